//go:build linux

package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// TestSandboxCLI runs `sandbox-run sandbox` against a real serve with an
// API key, as a person would: create, ls, exec (exit codes, streaming,
// stdin), shell (piped and on a terminal), cp both ways, kill, and the
// errors (an unknown sandbox, a server that cannot be reached, usage).
func TestSandboxCLI(t *testing.T) {
	b := make([]byte, 16)
	rand.Read(b)
	key := hex.EncodeToString(b)
	srv := startServe(t, []string{"SANDBOX_RUN_API_KEYS=cli=" + key})
	env := []string{"SANDBOX_RUN_SERVER=" + srv.url, "SANDBOX_RUN_API_KEY=" + key}
	run := func(stdin string, args ...string) cliResult {
		t.Helper()
		return cliEnv(t, env, stdin, append([]string{"sandbox"}, args...)...)
	}
	want := func(r cliResult, code int, stdout string) {
		t.Helper()
		if r.code != code || r.stdout != stdout {
			t.Fatalf("exit %d, stdout %q (stderr %q); want exit %d, stdout %q\nserver:\n%s", r.code, r.stdout, r.stderr, code, stdout, srv.stderr)
		}
	}

	r := run("", "create", "--language", "bash", "--timeout", "300", "--env", "GREETING=hi there", "-o", "json")
	var sb wire.Sandbox
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &sb) != nil || sb.ID == "" || len(sb.Languages) != 1 || sb.Languages[0] != "bash" {
		t.Fatalf("create -o json: %+v\n%s", r, srv.stderr)
	}
	if d := time.Until(sb.EndAt); d < 280*time.Second || d > 301*time.Second {
		t.Errorf("ends in %v, not 300s", d)
	}
	id := sb.ID
	t.Cleanup(func() { run("", "kill", id) })
	r = run("", "create")
	if r.code != 0 || !regexp.MustCompile(`^sbx\w+\n$`).MatchString(r.stdout) {
		t.Fatalf("create: %+v", r)
	}
	other := strings.TrimSpace(r.stdout)

	t.Run("ls", func(t *testing.T) {
		r := run("", "ls")
		if r.code != 0 || !strings.HasPrefix(r.stdout, "ID ") || !regexp.MustCompile(`(?m)^`+id+` +bash +running +\d{4}-`).MatchString(r.stdout) || !strings.Contains(r.stdout, other) {
			t.Errorf("ls: %+v", r)
		}
		r = run("", "ls", "--output-format", "json")
		var all []wire.Sandbox
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &all) != nil || len(all) != 2 {
			t.Errorf("ls -o json: %+v", r)
		}
	})

	t.Run("pause", func(t *testing.T) {
		if r := run("", "pause", other); r.code != 0 || r.stdout != "" {
			t.Fatalf("pause: %+v", r)
		}
		if r := run("", "pause", other); r.code != 0 || !strings.Contains(r.stderr, "paused already") {
			t.Errorf("pause again: %+v", r)
		}
		if r := run("", "ls"); !regexp.MustCompile(`(?m)^` + other + ` +\(default\) +paused +\d{4}-`).MatchString(r.stdout) {
			t.Errorf("ls of a paused sandbox: %+v", r)
		}
		if r := run("", "resume", "--timeout", "120", other); r.code != 0 {
			t.Errorf("resume: %+v", r)
		}
		if r := run("", "ls"); !regexp.MustCompile(`(?m)^` + other + ` +\(default\) +running +\d{4}-`).MatchString(r.stdout) {
			t.Errorf("ls after the resume: %+v", r)
		}
		if r := run("", "resume", "sbx0000000000000000000000ff"); r.code != 1 || !strings.Contains(r.stderr, "no such sandbox") {
			t.Errorf("resume of no sandbox: %+v", r)
		}
		if r := run("", "pause"); r.code != 2 {
			t.Errorf("pause without ids: %+v", r)
		}
	})

	t.Run("snapshot and fork", func(t *testing.T) {
		want(run("", "exec", other, "--", "echo kept > k.txt"), 0, "")
		r := run("", "snapshot", "--name", "n1", other)
		snap := strings.TrimSpace(r.stdout)
		if r.code != 0 || !strings.HasPrefix(snap, "snap") {
			t.Fatalf("snapshot: %+v", r)
		}
		if r := run("", "snapshot", "--list"); r.code != 0 || !strings.Contains(r.stdout, snap) || !strings.Contains(r.stdout, "n1") {
			t.Errorf("snapshot --list: %+v", r)
		}
		r = run("", "create", "--snapshot", snap)
		from := strings.TrimSpace(r.stdout)
		if r.code != 0 {
			t.Fatalf("create --snapshot: %+v", r)
		}
		want(run("", "exec", from, "--", "cat k.txt"), 0, "kept\n")
		run("", "kill", from)
		r = run("", "fork", "-n", "2", other)
		kids := strings.Fields(r.stdout)
		if r.code != 0 || len(kids) != 2 {
			t.Fatalf("fork: %+v", r)
		}
		for _, k := range kids {
			want(run("", "exec", k, "--", "cat k.txt"), 0, "kept\n")
		}
		run("", append([]string{"kill"}, kids...)...)
		want(run("", "snapshot", "--delete", snap), 0, "")
		if r := run("", "fork", "-n", "0", other); r.code != 2 {
			t.Errorf("fork -n 0: %+v", r)
		}
		if r := run("", "snapshot"); r.code != 2 {
			t.Errorf("snapshot without an id: %+v", r)
		}
	})

	t.Run("exec", func(t *testing.T) {
		// One word: a bash command line, in /work, with the sandbox's env.
		want(run("", "exec", id, "--", `echo "$GREETING from $(pwd)" > f.txt; cat f.txt`), 0, "hi there from /work\n")
		// Its exit code; several words are an argv (no shell: $HOME stays).
		want(run("", "exec", id, "--", "bash", "-c", "echo $0 $1; exit 7", "a b", "$HOME"), 7, "a b $HOME\n")
		want(run("", "exec", "--cwd", "/tmp", "--env", "K=v", id, "--", "sh", "-c", `echo "$(pwd) $K"`), 0, "/tmp v\n")
		r := run("", "exec", id, "--", "kill -TERM $$")
		if r.code != 128+15 || !strings.Contains(r.stderr, "signal: terminated") {
			t.Errorf("killed by SIGTERM: %+v", r)
		}
		r = run("", "exec", id, "--timeout", "0.5", "--", "sleep 30")
		if r.code != 124 || !strings.Contains(r.stderr, "timeout") {
			t.Errorf("--timeout: %+v", r)
		}
		r = run("", "exec", id, "--", "/no/such/program", "x")
		if r.code != 127 || !strings.Contains(r.stderr, "cannot start") {
			t.Errorf("no such program: %+v", r)
		}
		// Its stdin is empty, unless -i sends this command's.
		want(run("from stdin\n", "exec", id, "--", "cat"), 0, "")
		want(run("from stdin\n", "exec", "-i", id, "--", "tr a-z A-Z"), 0, "FROM STDIN\n")
		r = run("", "exec", "-o", "json", id, "--", "echo out; echo err >&2; exit 3")
		var res wire.ProcessResult
		if r.code != 3 || json.Unmarshal([]byte(r.stdout), &res) != nil || res.Stdout != "out\n" || res.Stderr != "err\n" || *res.ExitCode != 3 {
			t.Errorf("exec -o json: %+v", r)
		}
	})

	t.Run("streaming", func(t *testing.T) {
		// stdout and stderr in the order written, on one pipe; each line
		// as it is written, not at the end.
		cmd := cliCommand(t, env, "sandbox", "exec", id, "--", "echo one; sleep 0.2; echo two >&2; sleep 0.2; echo three; sleep 3; echo four")
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = pw, pw
		start := time.Now()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pw.Close()
		sc := bufio.NewScanner(pr)
		var lines []string
		var third time.Duration
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if len(lines) == 3 {
				third = time.Since(start)
			}
		}
		if err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
		if strings.Join(lines, ",") != "one,two,three,four" {
			t.Errorf("lines %q", lines)
		}
		if total := time.Since(start); total-third < 2*time.Second {
			t.Errorf("the third line came %v after the start, the end %v: not as written", third, total)
		}
	})

	t.Run("cp", func(t *testing.T) {
		dir := t.TempDir()
		data := make([]byte, 1<<20+3)
		rand.Read(data)
		copy(data, "\x00\xff\r\n\x1b[0m") // bytes that are no text
		local := filepath.Join(dir, "blob.bin")
		os.WriteFile(local, data, 0o644)
		want(run("", "cp", local, id+":in/blob.bin"), 0, "")
		back := filepath.Join(dir, "back.bin")
		want(run("", "cp", id+":/work/in/blob.bin", back), 0, "")
		if got, _ := os.ReadFile(back); !bytes.Equal(got, data) {
			t.Errorf("downloaded %d bytes, not the %d uploaded", len(got), len(data))
		}
		// Standard input and output.
		want(run(string(data), "cp", "-", id+":piped.bin"), 0, "")
		if r := run("", "cp", id+":piped.bin", "-"); r.code != 0 || r.stdout != string(data) {
			t.Errorf("cp to stdout: exit %d, %d bytes (%s)", r.code, len(r.stdout), r.stderr)
		}
		// Into a directory, either side: the file keeps its name.
		want(run("", "cp", local, id+":in"), 0, "")
		want(run("", "exec", id, "--", "ls in; cmp in/blob.bin piped.bin && echo same"), 0, "blob.bin\nsame\n")
		sub := filepath.Join(dir, "sub")
		os.Mkdir(sub, 0o755)
		want(run("", "cp", id+":f.txt", sub), 0, "")
		if got, _ := os.ReadFile(filepath.Join(sub, "f.txt")); string(got) != "hi there from /work\n" {
			t.Errorf("into a directory: %q", got)
		}
		r := run("", "cp", id+":missing.txt", filepath.Join(dir, "m"))
		if r.code != 1 || !strings.Contains(r.stderr, id+":missing.txt") {
			t.Errorf("a missing file: %+v", r)
		}
		if _, err := os.Stat(filepath.Join(dir, "m")); !os.IsNotExist(err) {
			t.Errorf("a failed download left a file: %v", err)
		}
		for _, args := range [][]string{{"cp", "a", "b"}, {"cp", id + ":a", id + ":b"}, {"cp", "a"}} {
			if r := run("", args...); r.code != 2 {
				t.Errorf("%q: %+v", args, r)
			}
		}
	})

	t.Run("shell piped", func(t *testing.T) {
		r := run("echo hi; cd /tmp\npwd\necho err >&2\nexit 3\n", "shell", id)
		if r.code != 3 || r.stdout != "hi\n/tmp\n" || r.stderr != "err\n" {
			t.Errorf("shell: %+v", r)
		}
	})

	t.Run("shell on a terminal", func(t *testing.T) {
		master, slave := openPTY(t)
		defer master.Close()
		setWinsize := func(rows, cols uint16) {
			if err := unix.IoctlSetWinsize(int(master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols}); err != nil {
				t.Fatal(err)
			}
		}
		setWinsize(33, 111)
		cmd := cliCommand(t, env, "sandbox", "shell", id)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
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
				tty.Write(buf[:n])
				if err != nil {
					return
				}
			}
		}()
		wait := func(what string) {
			t.Helper()
			deadline := time.Now().Add(time.Minute)
			for !strings.Contains(tty.String(), what) {
				if time.Now().After(deadline) {
					t.Fatalf("no %q on the terminal:\n%q", what, tty.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		wait("$ ")
		// Raw: the local terminal neither echoes nor edits (the shell's
		// terminal does); Ctrl-C goes to the shell, which survives it.
		master.Write([]byte("stty size; echo mark-$((6*7))\r"))
		wait("33 111\r\n")
		wait("mark-42\r\n")
		master.Write([]byte("sleep 60\r"))
		time.Sleep(500 * time.Millisecond)
		master.Write([]byte{3})
		master.Write([]byte("echo after-$((1+1))\r"))
		wait("after-2\r\n")
		setWinsize(44, 122)
		cmd.Process.Signal(syscall.SIGWINCH)
		time.Sleep(300 * time.Millisecond)
		master.Write([]byte("stty size; exit 5\r"))
		wait("44 122\r\n")
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 5 {
				t.Errorf("exit %v, want 5:\n%q", err, tty.String())
			}
			// The terminal is as it was: line editing and echo back.
			if tio, err := unix.IoctlGetTermios(int(master.Fd()), unix.TCGETS); err != nil || tio.Lflag&(unix.ICANON|unix.ECHO|unix.ISIG) != unix.ICANON|unix.ECHO|unix.ISIG {
				t.Errorf("the terminal was not restored: %+v %v", tio, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("the shell's exit did not end the command:\n%q", tty.String())
		}
	})

	t.Run("errors", func(t *testing.T) {
		for _, args := range [][]string{{"exec", "sbxnope", "--", "true"}, {"shell", "sbxnope"}, {"cp", "sbxnope:f", "-"}, {"cp", "-", "sbxnope:f"}, {"kill", "sbxnope"}} {
			if r := run("", args...); r.code != 1 || r.stderr != "sandbox-run: no such sandbox sbxnope\n" {
				t.Errorf("%q: %+v", args, r)
			}
		}
		// No server there: 125, as the other commands that need one.
		r := cliEnv(t, nil, "", "sandbox", "ls", "--server", "http://127.0.0.1:1")
		if r.code != 125 || !strings.Contains(r.stderr, "cannot reach server http://127.0.0.1:1") {
			t.Errorf("unreachable: %+v", r)
		}
		// Without the key.
		r = cliEnv(t, []string{"SANDBOX_RUN_SERVER=" + srv.url}, "", "sandbox", "ls")
		if r.code != 2 || !strings.Contains(r.stderr, "--api-key") {
			t.Errorf("no key: %+v", r)
		}
		for _, args := range [][]string{{}, {"bogus"}, {"exec"}, {"exec", id}, {"create", "extra"}, {"exec", "--bogus", id, "--", "true"}, {"ls", "--server", "ftp://x"}} {
			if r := run("", args...); r.code != 2 || r.stdout != "" {
				t.Errorf("%q: %+v", args, r)
			}
		}
		for _, args := range [][]string{{"--help"}, {"help"}, {"exec", "-h"}, {"help", "cp"}} {
			if r := run("", args...); r.code != 0 || !strings.HasPrefix(r.stdout, "Usage: sandbox-run sandbox") {
				t.Errorf("%q: %+v", args, r)
			}
		}
	})

	t.Run("kill", func(t *testing.T) {
		want(run("", "kill", other), 0, "")
		r := run("", "exec", other, "--", "true")
		if r.code != 1 || r.stderr != "sandbox-run: no such sandbox "+other+"\n" {
			t.Errorf("exec after kill: %+v", r)
		}
		if r := run("", "ls"); strings.Contains(r.stdout, other) {
			t.Errorf("ls after kill: %+v", r)
		}
	})
}

// TestSandboxCLINetwork runs `sandbox create --allow --secret` and
// `sandbox network` against a real serve with an API key whose
// network.allow names a listener on this host: the sandbox's process sees
// the secret's placeholder while the listener gets the value; network
// with no --allow cuts it off while it runs, and --allow gives it back;
// a sandbox made without a network, a list beyond the server's, an
// unknown sandbox and usage errors are refused with their exit codes.
func TestSandboxCLINetwork(t *testing.T) {
	var mu sync.Mutex
	var got []string // what the listener got: Authorization and the path
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	upstream := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Authorization")+" "+r.URL.RequestURI())
		mu.Unlock()
		io.WriteString(w, "upstream ok")
	})}
	go upstream.Serve(ln)
	t.Cleanup(func() { upstream.Close() })
	requests := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
	allow := fmt.Sprintf("host.sandbox.internal:%d", ln.Addr().(*net.TCPAddr).Port)

	b := make([]byte, 16)
	rand.Read(b)
	key := hex.EncodeToString(b)
	value := "sk-cli-test-" + hex.EncodeToString(b[:8])
	srv := startServe(t, []string{"SANDBOX_RUN_API_KEYS=cli=" + key, "SANDBOX_RUN_NETWORK_ALLOW=" + allow})
	env := []string{"SANDBOX_RUN_SERVER=" + srv.url, "SANDBOX_RUN_API_KEY=" + key}
	run := func(args ...string) cliResult {
		t.Helper()
		return cliEnv(t, env, "", append([]string{"sandbox"}, args...)...)
	}
	if r := cliEnv(t, env, value+"\n", "secrets", "put", "TOKEN", "--host", "host.sandbox.internal",
		"--header", "Authorization", "--header-format", "Bearer {value}"); r.code != 0 {
		t.Fatalf("secrets put: %+v\nserver:\n%s", r, srv.stderr)
	}

	r := run("create", "-l", "python,bash", "--timeout", "120", "--allow", allow, "--secret", "TOKEN", "-o", "json")
	var sb wire.Sandbox
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &sb) != nil || strings.Join(sb.Network, " ") != allow || strings.Join(sb.Secrets, " ") != "TOKEN" {
		t.Fatalf("create --allow --secret: %+v\nserver:\n%s", r, srv.stderr)
	}
	id := sb.ID
	t.Cleanup(func() { run("kill", id) })
	fetch := []string{"exec", id, "--", "python3", "-c", `import os, urllib.request
token = os.environ["TOKEN"]
print(token.startswith("SANDBOX_RUN_SECRET_TOKEN_"), "sk-cli-test-" in token)
try:
    print(urllib.request.urlopen("http://` + allow + `/v1?k=" + token, timeout=10).read().decode())
except Exception as e:
    print("failed", type(e).__name__)`}
	if r := run(fetch...); r.code != 0 || r.stdout != "True False\nupstream ok\n" {
		t.Fatalf("exec with the secret: %+v\nserver:\n%s", r, srv.stderr)
	}
	if g := requests(); len(g) != 1 || g[0] != "Bearer "+value+" /v1?k="+value {
		t.Errorf("the listener got %q", g)
	}

	// No --allow: nothing, while it runs.
	if r := run("network", id); r.code != 0 || r.stdout != id+" reaches nothing\n" {
		t.Fatalf("network without --allow: %+v", r)
	}
	if r := run(fetch...); r.code != 0 || !strings.HasPrefix(r.stdout, "True False\nfailed ") {
		t.Errorf("exec with no network: %+v", r)
	}
	if g := requests(); len(g) != 1 {
		t.Errorf("the listener got %q after the network was cut", g)
	}
	// --allow gives it back; -o json prints the sandbox.
	if r := run("network", id, "--allow", allow); r.code != 0 || r.stdout != id+" reaches "+allow+"\n" {
		t.Fatalf("network --allow: %+v", r)
	}
	r = run("network", "--allow", allow, id, "-o", "json")
	var now wire.Sandbox
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &now) != nil || now.ID != id || strings.Join(now.Network, " ") != allow || strings.Join(now.Secrets, " ") != "TOKEN" {
		t.Errorf("network -o json: %+v", r)
	}
	if r := run(fetch...); r.code != 0 || r.stdout != "True False\nupstream ok\n" {
		t.Errorf("exec with its network back: %+v", r)
	}

	// Refusals.
	r = run("create", "-l", "bash", "--timeout", "60")
	plain := strings.TrimSpace(r.stdout)
	if r.code != 0 {
		t.Fatalf("create: %+v", r)
	}
	t.Cleanup(func() { run("kill", plain) })
	if r := run("network", plain, "--allow", allow); r.code != 2 || !strings.Contains(r.stderr, "without a network") {
		t.Errorf("network of a sandbox made without one: %+v", r)
	}
	if r := run("network", id, "--allow", "10.0.0.0/8"); r.code != 2 || !strings.Contains(r.stderr, "network.allow") {
		t.Errorf("network beyond the server's: %+v", r)
	}
	if r := run("network", "sbx0000000000000000000000ff"); r.code != 1 || !strings.Contains(r.stderr, "no such sandbox") {
		t.Errorf("network of no sandbox: %+v", r)
	}
	if r := run("network"); r.code != 2 {
		t.Errorf("network without an id: %+v", r)
	}
	if r := run("create", "-l", "bash", "--secret", "TOKEN"); r.code != 2 || !strings.Contains(r.stderr, "network") {
		t.Errorf("create --secret without --allow: %+v", r)
	}
	if r := run("create", "-l", "bash", "--allow", allow, "--secret", "NOPE"); r.code != 2 || !strings.Contains(r.stderr, "NOPE") {
		t.Errorf("create --secret of no secret: %+v", r)
	}
	if strings.Contains(srv.stderr.String(), value) {
		t.Error("the server's log holds the value")
	}
}

// TestSandboxCLIDocsNetwork runs docs/CLI.md's example of a live
// sandbox's network and secrets as it is written, against a server that
// allows host.sandbox.internal on the port of a listener of this host
// standing for the docs' 8000, which accepts the token only in its
// Authorization header.
func TestSandboxCLIDocsNetwork(t *testing.T) {
	b := make([]byte, 12)
	rand.Read(b)
	token := "tok-" + hex.EncodeToString(b)
	var mu sync.Mutex
	accepted := 0
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	upstream := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token || r.URL.Path != "/whoami" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		mu.Lock()
		accepted++
		mu.Unlock()
		io.WriteString(w, "token accepted")
	})}
	go upstream.Serve(ln)
	t.Cleanup(func() { upstream.Close() })
	hostPort := fmt.Sprintf("host.sandbox.internal:%d", ln.Addr().(*net.TCPAddr).Port)

	srv := startServe(t, []string{"SANDBOX_RUN_NETWORK_ALLOW=" + hostPort})
	t.Setenv("SANDBOX_RUN_SERVER", srv.url)
	t.Setenv("SANDBOX_RUN_API_KEY", "")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token.txt"), []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	block := docBlock(t, "docs/CLI.md", "### A sandbox's network and secrets", "console")
	if ex := consoleExamples(block); len(ex) != 8 || !strings.Contains(ex[1].cmd, "--secret API_TOKEN") || !strings.HasPrefix(ex[3].cmd, "sandbox-run sandbox network") {
		t.Fatalf("the example changed: %q", ex)
	}
	runConsole(t, dir, srv.url, strings.ReplaceAll(block, "host.sandbox.internal:8000", hostPort))
	mu.Lock()
	defer mu.Unlock()
	if accepted != 1 {
		t.Errorf("the listener accepted the token %d times, want once (before the network was cut)", accepted)
	}
	if strings.Contains(srv.stderr.String(), token) {
		t.Error("the server's log holds the value")
	}
}
