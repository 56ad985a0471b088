package main

import (
	"bufio"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const guessPy = `import os, sys
secret = int(os.environ["SECRET"])
tries = 0
while True:
    print("guess?", flush=True)
    line = sys.stdin.readline()
    if not line:
        print("gave up", file=sys.stderr)
        sys.exit(3)
    tries += 1
    n = int(line)
    if n < secret:
        print("higher", flush=True)
    elif n > secret:
        print("lower", flush=True)
    else:
        print(f"correct in {tries}", flush=True)
        break
`

// startInteractive starts execute --interactive on srv with args, with
// pipes to the CLI's stdin and from its stdout; it is killed when the test
// ends.
func startInteractive(t *testing.T, srv *serveProc, args ...string) (cmd *exec.Cmd, stdin io.WriteCloser, stdout io.Reader, stderr *syncBuffer) {
	t.Helper()
	cmd = cliCommand(t, nil, append([]string{"execute", "--server", srv.url, "--interactive"}, args...)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err = cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr = &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	return cmd, stdin, stdout, stderr
}

// The CLI against a real `serve`: a dialogue on pipes, each guess written
// only once its prompt has been printed.
func TestInteractiveDialogue(t *testing.T) {
	srv := startServe(t, nil)
	cmd, stdin, stdout, stderr := startInteractive(t, srv, "-l", "python", "--code", guessPy, "--env", "SECRET=37")
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	next := func() string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the CLI ended early; stderr %q", stderr.String())
			}
			return l
		case <-time.After(60 * time.Second):
			t.Fatalf("no output; stderr %q", stderr.String())
		}
		return ""
	}
	lo, hi := 1, 100
	var transcript []string
	for tries := 1; ; tries++ {
		if l := next(); l != "guess?" {
			t.Fatalf("prompt %q; transcript %q", l, transcript)
		}
		guess := (lo + hi) / 2
		io.WriteString(stdin, strconv.Itoa(guess)+"\n")
		answer := next()
		transcript = append(transcript, strconv.Itoa(guess)+" "+answer)
		switch answer {
		case "higher":
			lo = guess + 1
		case "lower":
			hi = guess - 1
		default:
			if answer != "correct in "+strconv.Itoa(tries) || guess != 37 {
				t.Fatalf("answer %q; transcript %q", answer, transcript)
			}
			stdin.Close()
			if err := cmd.Wait(); err != nil {
				t.Errorf("exit: %v; stderr %q", err, stderr.String())
			}
			return
		}
		if tries > 10 {
			t.Fatalf("no end: %q", transcript)
		}
	}
}

// Piped stdin, EOF, exit codes and refusals, like execute's.
func TestInteractiveExitCodes(t *testing.T) {
	srv := startServe(t, nil)
	cases := []struct {
		name   string
		stdin  string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"cat until eof", "a\nb\n", []string{"-l", "bash", "-c", "cat; echo end >&2"}, 0, "a\nb\n", "end\n"},
		{"exit code", "x\n", []string{"-l", "python", "-c", "import sys; print(input()); sys.exit(4)"}, 4, "x\n", ""},
		{"input first", "live\n", []string{"-l", "bash", "-c", "read a; read b; echo $a $b", "--input", "given\n"}, 0, "given live\n", ""},
		{"gave up at eof", "", []string{"-l", "python", "-c", guessPy, "--env", "SECRET=1"}, 3, "guess?\n", "gave up\n"},
		{"timeout", "", []string{"-l", "bash", "-c", "sleep 5", "-t", "0.3"}, exitTimeout, "", "sandbox-run: timeout (wall time limit)\n"},
		{"output limit", "", []string{"-l", "bash", "-c", "printf '%2000s' x", "--max-output", "1000"}, exitLimit, strings.Repeat(" ", 1000), "sandbox-run: output truncated\n"},
		{"compile error", "", []string{"-l", "c", "-c", "int main(){return x;}"}, exitCompile, "", "sandbox-run: compile error\n"},
		{"unknown language", "", []string{"-l", "cobol-2099", "-c", "x"}, exitUsage, "", "cobol-2099"},
		{"json", "", []string{"-l", "bash", "-c", "true", "-o", "json"}, exitUsage, "", "--output-format text"},
		{"input from stdin", "", []string{"-l", "bash", "-c", "true", "--input", "-"}, exitUsage, "", "drop --input -"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := runCLI(t, c.stdin, append([]string{"execute", "--server", srv.url, "--interactive"}, c.args...)...)
			if r.code != c.code || r.stdout != c.stdout || !strings.Contains(r.stderr, c.stderr) {
				t.Errorf("exit %d (want %d) stdout %q stderr %q", r.code, c.code, r.stdout, r.stderr)
			}
		})
	}
	// Local runs take --interactive too: live stdin.
	if r := runCLI(t, "abc\n", "execute", "--interactive", "-l", "python", "-c", "print(input()[::-1])"); r.code != 0 || r.stdout != "cba\n" {
		t.Errorf("local: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	// Refused before the upgrade: a key is needed.
	keyed := startServe(t, []string{"SANDBOX_RUN_API_KEYS=k=secret"})
	if r := runCLI(t, "", "execute", "--server", keyed.url, "--interactive", "-l", "bash", "-c", "echo hi"); r.code != exitUsage || !strings.Contains(r.stderr, "API key") {
		t.Errorf("without a key: exit %d stderr %q", r.code, r.stderr)
	}
	if r := runCLI(t, "", "execute", "--server", keyed.url, "--api-key", "secret", "--interactive", "-l", "bash", "-c", "echo hi"); r.code != 0 || r.stdout != "hi\n" {
		t.Errorf("with the key: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
}

// SIGINT kills the remote run.
func TestInteractiveInterrupt(t *testing.T) {
	srv := startServe(t, nil)
	cmd, stdin, stdout, stderr := startInteractive(t, srv, "-l", "bash", "-c", "echo up; sleep 60")
	defer stdin.Close() // open until then: the program is not told EOF
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "up\n" {
		t.Fatalf("first line %q, %v; stderr %q", line, err, stderr.String())
	}
	start := time.Now()
	cmd.Process.Signal(syscall.SIGINT)
	err = cmd.Wait()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != exitInterrupted || !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("exit %v, stderr %q; want %d", err, stderr.String(), exitInterrupted)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("took %v", d)
	}
	// The server logged the run as canceled.
	if !waitForText(srv.stderr, `"limit":"canceled"`, 10*time.Second) {
		t.Errorf("the server did not log a canceled run:\n%s", srv.stderr)
	}
}

func waitForText(b *syncBuffer, text string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !strings.Contains(b.String(), text) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}
