//go:build linux

package main

import (
	"context"
	"encoding/json"
	"image/png"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReplLocal pipes cells into `sandbox-run repl`: values, output,
// an exception after which the state is still there.
func TestReplLocal(t *testing.T) {
	r := runCLI(t, "x = 41\nx + 1\ndef f(a):\n    return a * 2\n\nf(x)\nprint('hi')\n1/0\nx\n", "repl", "-l", "python")
	if r.code != 0 || r.stdout != "42\n82\nhi\n41\n" || !strings.Contains(r.stderr, "ZeroDivisionError: division by zero") {
		t.Errorf("python: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stderr, ">>>") {
		t.Errorf("prompts on a pipe: %q", r.stderr)
	}
	r = runCLI(t, "let y = 2\ny * 21\n", "repl", "--language", "javascript")
	if r.code != 0 || r.stdout != "42\n" {
		t.Errorf("javascript: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	// exit() ends the loop: what follows never runs. A display item
	// prints its text, a timeout is said.
	r = runCLI(t, "display('shown')\nimport time\ntime.sleep(30)\n'after'\nexit()\nprint('never')\n", "repl", "-l", "python", "--timeout", "1")
	if r.code != 0 || r.stdout != "'shown'\n'after'\n" || !strings.Contains(r.stderr, "KeyboardInterrupt") || !strings.Contains(r.stderr, "sandbox-run: timeout") {
		t.Errorf("exit(): exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestReplUsage(t *testing.T) {
	r := runCLI(t, "1\n", "repl", "-l", "bash")
	if r.code != exitUsage || !strings.Contains(r.stderr, "python") || !strings.Contains(r.stderr, "javascript") {
		t.Errorf("bash: exit %d stderr %q", r.code, r.stderr)
	}
	for _, args := range [][]string{
		{"repl"},
		{"repl", "-l", "python", "--timeout", "-1"},
		{"repl", "-l", "python", "stray"},
		{"repl", "-l", "cobol-2099"},
		{"repl", "-l", "python", "--server", "ftp://x"},
		{"repl", "-l", "python", "--server", "http://127.0.0.1:1", "--workers", "2"},
		{"repl", "-l", "python", "--no-such-flag"},
	} {
		if r := runCLI(t, "", args...); r.code != exitUsage || !strings.HasPrefix(r.stderr, "sandbox-run: ") {
			t.Errorf("%q: exit %d stderr %q", args, r.code, r.stderr)
		}
	}
	// Nothing listens on port 1.
	if r := runCLI(t, "", "repl", "-l", "python", "--server", "http://127.0.0.1:1"); r.code != exitSetup || !strings.Contains(r.stderr, "cannot reach server") {
		t.Errorf("unreachable server: exit %d stderr %q", r.code, r.stderr)
	}
	r = runCLI(t, "", "repl", "-h")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "Usage: sandbox-run repl") || !strings.Contains(r.stdout, "-l, --language string") {
		t.Errorf("repl -h: exit %d stdout %q", r.code, r.stdout)
	}
	if r := runCLI(t, "", "-h"); !strings.Contains(r.stdout, "sandbox-run repl ") {
		t.Errorf("sandbox-run -h lacks repl:\n%s", r.stdout)
	}
}

// TestReplRemote runs the loop on a server's session, deleted at exit.
func TestReplRemote(t *testing.T) {
	srv := startServe(t, nil)
	r := runCLI(t, "x = 41\nx + 1\nundefined_name\nx\n", "repl", "--server", srv.url, "-l", "python")
	if r.code != 0 || r.stdout != "42\n41\n" || !strings.Contains(r.stderr, "NameError") {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	m := regexp.MustCompile(`"msg":"session created","session_id":"(sess_[0-9a-f]+)"`).FindStringSubmatch(srv.stderr.String())
	if m == nil {
		t.Fatalf("no session logged:\n%s", srv.stderr)
	}
	resp, err := http.Get(srv.url + "/api/sandbox/sessions/" + m[1])
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("session %s after the repl: %d, want 404", m[1], resp.StatusCode)
	}
	var list struct {
		Sessions []json.RawMessage `json:"sessions"`
	}
	if resp, err := http.Get(srv.url + "/api/sandbox/sessions"); err == nil {
		json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
	}
	if len(list.Sessions) != 0 {
		t.Errorf("sessions left: %s", list.Sessions)
	}
	// The server's refusal is a usage error; --timeout above its maximum
	// too.
	if r := runCLI(t, "", "repl", "--server", srv.url, "-l", "bash"); r.code != exitUsage || !strings.Contains(r.stderr, "python and javascript") {
		t.Errorf("bash: exit %d stderr %q", r.code, r.stderr)
	}
	if r := runCLI(t, "", "repl", "--server", srv.url, "-l", "python", "--timeout", "100000"); r.code != exitUsage || !strings.Contains(r.stderr, "above the maximum") {
		t.Errorf("--timeout 100000: exit %d stderr %q", r.code, r.stderr)
	}
}

// TestReplSaveImages: a matplotlib figure becomes a PNG file, its path
// printed.
func TestReplSaveImages(t *testing.T) {
	for _, remote := range []bool{false, true} {
		name := "local"
		if remote {
			name = "remote"
		}
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "figures")
			args := []string{"repl", "-l", "python", "--save-images", dir}
			if remote {
				args = append(args, "--server", startServe(t, nil).url)
			}
			r := runCLI(t, "import matplotlib\nimport matplotlib.pyplot as plt\n_ = plt.plot([1, 2, 3])\n", args...)
			if strings.Contains(r.stderr, "No module named 'matplotlib'") {
				t.Skip("the sandbox's python has no matplotlib (python3-matplotlib)")
			}
			want := filepath.Join(dir, "cell-3-1.png")
			if r.code != 0 || r.stdout != want+"\n" {
				t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
			}
			f, err := os.Open(want)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if img, err := png.Decode(f); err != nil || img.Bounds().Dx() < 100 {
				t.Errorf("%s: %v", want, err)
			}
			// Without --save-images: the figure's text.
			r = runCLI(t, "import matplotlib.pyplot as plt\n_ = plt.plot([1, 2, 3])\n", args[:3]...)
			if r.code != 0 || r.stdout != "<Figure 1>\n" {
				t.Errorf("without --save-images: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
			}
		})
	}
}

// TestReplSIGINT: on a pipe, SIGINT while a cell runs ends the loop with
// 130, after the cell was interrupted.
func TestReplSIGINT(t *testing.T) {
	cmd := cliCommand(t, nil, "repl", "-l", "python")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	t.Cleanup(func() { cmd.Process.Kill() })
	stdin.Write([]byte("1 + 1\n"))
	if !waitForText(&stdout, "2\n", 2*time.Minute) {
		t.Fatalf("no first cell: stderr %q", stderr.String())
	}
	// Interrupted while it runs (or, on a busy machine, before it starts:
	// the same end).
	stdin.Write([]byte("import time; time.sleep(120)\n"))
	time.Sleep(time.Second)
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitInterrupted || !strings.Contains(stderr.String(), "interrupted") {
			t.Errorf("exit %v stdout %q stderr %q; want %d", err, stdout.String(), stderr.String(), exitInterrupted)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the repl ignored SIGINT: stderr %q", stderr.String())
	}
}

// TestReplTerminal drives the loop on a terminal: prompts, Ctrl-C that
// interrupts a cell (the state stays: the terminal's SIGINT must not
// reach the sandboxes) and that clears a cell begun, Ctrl-D.
func TestReplTerminal(t *testing.T) {
	master, slave := openPTY(t)
	defer master.Close()
	cmd := cliCommand(t, nil, "repl", "-l", "python")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	// The terminal is the CLI's controlling terminal, its process group
	// the foreground one: what Ctrl-C signals.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	t.Cleanup(func() { cmd.Process.Kill() })
	var tty syncBuffer
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			tty.Write([]byte(strings.ReplaceAll(string(buf[:n]), "\r\n", "\n")))
			if err != nil {
				return
			}
		}
	}()
	wait := func(what string, n int) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for strings.Count(tty.String(), what) < n {
			if time.Now().After(deadline) {
				t.Fatalf("no %d× %q on the terminal:\n%s", n, what, tty.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	wait(">>> ", 1)
	master.Write([]byte("x = 41\n"))
	wait(">>> ", 2)
	master.Write([]byte("import time\n"))
	wait(">>> ", 3)
	master.Write([]byte("time.sleep(120)\n"))
	time.Sleep(2 * time.Second) // the cell runs
	master.Write([]byte("\x03"))
	wait("KeyboardInterrupt", 1)
	wait(">>> ", 4)
	master.Write([]byte("x + 1\n"))
	wait("\n42\n", 1)
	wait(">>> ", 5)
	master.Write([]byte("if x:\n"))
	wait("... ", 1)
	master.Write([]byte("\x03"))
	wait("KeyboardInterrupt", 2)
	wait(">>> ", 6)
	master.Write([]byte("x\n"))
	wait("\n41\n", 1)
	wait(">>> ", 7)
	master.Write([]byte("\x04"))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("exit %v:\n%s", err, tty.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("Ctrl-D did not end the repl:\n%s", tty.String())
	}
	if s := tty.String(); strings.Contains(s, "restarted") || strings.Contains(s, "interpreter ended") {
		t.Errorf("the interpreter did not survive Ctrl-C:\n%s", s)
	}
}

// TestReplREADME runs the repl example of docs/SESSIONS.md and checks that
// it prints what the docs say.
func TestReplREADME(t *testing.T) {
	doc, err := os.ReadFile("../../docs/SESSIONS.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)\n\\$ printf '([^']*)' \\| sandbox-run repl -l python\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("no repl example in docs/SESSIONS.md")
	}
	cmd := cliCommand(t, nil, "repl", "-l", "python")
	cmd.Stdin = strings.NewReader(strings.ReplaceAll(string(m[1]), `\n`, "\n"))
	var out syncBuffer // stdout and stderr as a terminal shows them
	cmd.Stdout, cmd.Stderr = &out, &out
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	go func() { <-ctx.Done(); cmd.Process.Kill() }()
	if err := cmd.Run(); err != nil || out.String() != string(m[2]) {
		t.Errorf("%v: the example prints\n%s\nthe docs say\n%s", err, out.String(), m[2])
	}
}
