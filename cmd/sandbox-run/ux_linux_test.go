package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestUnknownFlagSuggestion: a misspelled flag gets one line naming it and
// the closest flag, and the command's usage line, not every flag.
func TestUnknownFlagSuggestion(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"execute", "-l", "python", "-c", "1", "--session_id", "x"}, "unknown flag --session_id; did you mean --session-id?"},
		{[]string{"execute", "-l", "python", "-c", "1", "--format", "json"}, "unknown flag --format; did you mean --output-format?"},
		{[]string{"execute", "--langauge", "python"}, "unknown flag --langauge; did you mean --language?"},
		{[]string{"serve", "--prewarn", "2"}, "unknown flag --prewarn; did you mean --prewarm?"},
		{[]string{"languages", "--output_format", "json"}, "did you mean --output-format?"},
		{[]string{"execute", "--zzzzzz"}, "unknown flag --zzzzzz\n"},
		{[]string{"execute", "--timeout", "soon"}, `invalid value "soon" for --timeout`},
		{[]string{"execute", "-l", "python", "--code"}, "--code needs a value"},
	}
	for _, c := range cases {
		r := runCLI(t, "", c.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want %q", c.args, r.code, r.stderr, c.want)
		}
		if n := strings.Count(r.stderr, "\n"); n > 4 || !strings.Contains(r.stderr, "Usage: sandbox-run "+c.args[0]) {
			t.Errorf("%q: %d lines, want a short usage hint: %q", c.args, n, r.stderr)
		}
	}
}

// TestLimitFlagNamed: a limit flag that cannot be a limit is named, with
// its value.
func TestLimitFlagNamed(t *testing.T) {
	for flag, want := range map[string]string{
		"--timeout":       "--timeout must be positive, got -1",
		"--memory":        "--memory must be positive (or 0 for the default), got -1",
		"--max-processes": "--max-processes must be positive",
		"--cpu-time":      "--cpu-time must be positive",
	} {
		r := runCLI(t, "", "execute", "-l", "python", "-c", "1", flag, "-1")
		if r.code != exitUsage || !strings.Contains(r.stderr, want) {
			t.Errorf("%s -1: exit %d, stderr %q; want %q", flag, r.code, r.stderr, want)
		}
	}
}

// TestMessageOnFreshLine: the CLI's own message after a limit starts on a
// line of its own when the program's output (on the same terminal or
// pipe) ended without a newline, and adds nothing otherwise.
func TestMessageOnFreshLine(t *testing.T) {
	code := "import sys\nsys.stdout.write('abc'); sys.stdout.flush()\nx = bytearray(1 << 30)\n"
	cmd := cliCommand(t, nil, "execute", "-l", "python", "--memory", "64", "-c", code)
	var both bytes.Buffer
	cmd.Stdout, cmd.Stderr = &both, &both // one pipe, as a terminal would be
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitLimit {
		t.Fatalf("exit %v, output %q", err, both.String())
	}
	if want := "abc\nsandbox-run: memory limit exceeded\n"; both.String() != want {
		t.Errorf("output %q, want %q", both.String(), want)
	}
	// Apart, stderr's own last byte is all that counts.
	r := runCLI(t, "", "execute", "-l", "python", "--memory", "64", "-c", code)
	if r.stdout != "abc" || r.stderr != "sandbox-run: memory limit exceeded\n" {
		t.Errorf("separate streams: stdout %q stderr %q", r.stdout, r.stderr)
	}
	// A program that ends its line gets no blank line.
	cmd = cliCommand(t, nil, "execute", "-l", "python", "--memory", "64", "-c", "print('abc', flush=True)\nx = bytearray(1 << 30)\n")
	both.Reset()
	cmd.Stdout, cmd.Stderr = &both, &both
	cmd.Run()
	if want := "abc\nsandbox-run: memory limit exceeded\n"; both.String() != want {
		t.Errorf("output %q, want %q", both.String(), want)
	}
}

// TestCodeLooksLikeMissingFile: a --code that looks like a file name but
// names no file is an error naming it, never run as code.
func TestCodeLooksLikeMissingFile(t *testing.T) {
	for _, code := range []string{"missing.py", "src/missing", "./prog.c", "Main.JAVA"} {
		r := runCLI(t, "", "execute", "-l", "python", "--code", code)
		if r.code != exitUsage || !strings.Contains(r.stderr, "--code "+code+": no such file") {
			t.Errorf("--code %s: exit %d stdout %q stderr %q", code, r.code, r.stdout, r.stderr)
		}
	}
	// Code is still code.
	for code, out := range map[string]string{"print(1/2)": "0.5\n", "print('a.py')": "a.py\n"} {
		if r := runCLI(t, "", "execute", "-l", "python", "--code", code); r.code != 0 || r.stdout != out {
			t.Errorf("--code %s: exit %d stdout %q stderr %q", code, r.code, r.stdout, r.stderr)
		}
	}
	if r := runCLI(t, "", "execute", "-l", "bash", "--code", "echo"); r.code != 0 || r.stdout != "\n" {
		t.Errorf("--code echo: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestHelpTexts: the command list names every command, each default is
// printed once, and execute -h documents the output-file patterns.
func TestHelpTexts(t *testing.T) {
	r := runCLI(t, "", "-h")
	for _, cmd := range []string{"execute", "serve", "mcp", "languages", "sessions", "doctor", "bench", "version"} {
		if !strings.Contains(r.stdout, "sandbox-run "+cmd+" ") {
			t.Errorf("sandbox-run -h lacks %s:\n%s", cmd, r.stdout)
		}
	}
	for _, cmd := range []string{"execute", "serve", "languages", "doctor", "sessions"} {
		r := runCLI(t, "", cmd, "-h")
		if r.code != 0 || !strings.HasPrefix(r.stdout, "Usage: sandbox-run "+cmd) {
			t.Errorf("%s -h: exit %d stdout %.200q stderr %.200q", cmd, r.code, r.stdout, r.stderr)
		}
		for _, line := range strings.Split(r.stdout, "\n") {
			if strings.Count(line, "(default") > 1 {
				t.Errorf("%s -h: default given twice: %q", cmd, line)
			}
		}
	}
	r = runCLI(t, "", "execute", "-h")
	for _, want := range []string{"**/*.txt", "-l, --language string", "-t, --timeout float", "(default 30)", "names it exactly"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("execute -h lacks %q", want)
		}
	}
}

// TestVerboseDecisions: -v shows what the sandbox decided: toolchain and
// version, the limits that applied, the mounts, the compile cache, the
// files returned and skipped, and why the run ended.
func TestVerboseDecisions(t *testing.T) {
	r := runCLI(t, "", "execute", "-v", "-l", "python", "--memory", "64", "-c", "open('o.txt', 'w').write('x')\nx = bytearray(1 << 30)", "--output-file", "o.txt", "--output-file", "nope.txt")
	for _, want := range []string{
		"sandbox-run: toolchain: python 3.", "memory 64 MiB", "wall 30s", "read-only mounts of /usr",
		"no warm pool", "files returned: 1 matching o.txt nope.txt: o.txt", "file skipped: nope.txt: not found",
		"ended: the memory limit killed it (64 MiB)", "run: id=exec_",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("-v lacks %q:\n%s", want, r.stderr)
		}
	}
	// A compiled language: the compile's limits, a miss, then the same
	// program again is a compile cache hit.
	src := fmt.Sprintf("int main(void) { return 3; }\n/* %d */\n", time.Now().UnixNano())
	r = runCLI(t, "", "execute", "-v", "-l", "c", "-c", src)
	for _, want := range []string{"compile limits: ", "compile: compiled (compile cache miss)", "ended: the program exited with status 3"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("c -v lacks %q:\n%s", want, r.stderr)
		}
	}
	r = runCLI(t, "", "execute", "-v", "-l", "c", "-c", src)
	if !strings.Contains(r.stderr, "compile: cache hit") {
		t.Errorf("second identical compile, -v:\n%s", r.stderr)
	}
	// -v with JSON output: the decisions on stderr, stdout stays JSON.
	r = runCLI(t, "", "execute", "-v", "-o", "json", "-l", "python", "-c", "print(1)")
	var res map[string]any
	if json.Unmarshal([]byte(r.stdout), &res) != nil || !strings.Contains(r.stderr, "ended: the program exited with status 0") {
		t.Errorf("-v -o json: stdout %.200q stderr %q", r.stdout, r.stderr)
	}
}

// freshDataDir is a data dir with nothing prepared in it.
func freshDataDir(t *testing.T) string { return t.TempDir() }

// cheapGo replaces the go entry (same name, same first toolchain
// candidate) by one whose build cache takes no time to prepare.
const cheapGo = `languages:
  - {name: go, extensions: [go], source: main.go, default: true, toolchain: [/usr/local/go/bin/go, /usr/lib/go/bin/go, go], version: ["{bin}", version], cache: {dir: /cache/go, prepare: [/bin/sh, -c, "echo warm > /cache/go/w"]}, compile: [/bin/sh, -c, "cp /cache/go/w main"], artifacts: [main], run: [/bin/cat, main]}
`

func cheapGoLanguages(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "languages.yaml")
	if err := os.WriteFile(p, []byte(cheapGo), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// openPTY opens a pseudo-terminal: what the CLI writes to slave, master
// reads.
func openPTY(t *testing.T) (master, slave *os.File) {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}

// TestGoCacheProgressOnTerminal: the first Go run on a host says on
// a terminal that it prepares Go's build cache (once); not on a pipe, and
// not when the cache is there.
func TestGoCacheProgressOnTerminal(t *testing.T) {
	langs := cheapGoLanguages(t)
	data := freshDataDir(t)
	run := func() string {
		master, slave := openPTY(t)
		defer master.Close()
		cmd := cliCommand(t, []string{"SANDBOX_RUN_TOOLCHAIN_CACHE_DIR=" + filepath.Join(data, "toolchains")}, "execute", "--languages", langs, "--data-dir", data, "-l", "go", "-c", "package main\n")
		var stdout bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, slave
		read := make(chan string)
		go func() {
			b, _ := io.ReadAll(master) // ends with EIO once the slave is closed
			read <- string(b)
		}()
		err := cmd.Run()
		slave.Close()
		tty := strings.ReplaceAll(<-read, "\r\n", "\n")
		if err != nil || stdout.String() != "warm\n" {
			t.Fatalf("exit %v stdout %q terminal %q", err, stdout.String(), tty)
		}
		return tty
	}
	if tty := run(); !strings.Contains(tty, "sandbox-run: preparing Go's build cache (once per host and Go version, ~45 s on an idle 2-core machine)...\n") ||
		!strings.Contains(tty, "sandbox-run: Go's build cache ready in ") {
		t.Errorf("first run on a terminal: %q", tty)
	}
	if tty := run(); strings.Contains(tty, "preparing") {
		t.Errorf("second run: %q", tty)
	}
	// On a pipe: nothing.
	fresh := freshDataDir(t)
	r := cliEnv(t, []string{"SANDBOX_RUN_TOOLCHAIN_CACHE_DIR=" + filepath.Join(fresh, "toolchains")}, "", "execute", "--languages", langs, "--data-dir", fresh, "-l", "go", "-c", "package main\n")
	if r.code != 0 || r.stdout != "warm\n" || r.stderr != "" {
		t.Errorf("pipe: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestServePreparesGoCache: serve fills Go's build cache in the background
// as it starts, and logs it.
func TestServePreparesGoCache(t *testing.T) {
	data := freshDataDir(t)
	srv := startServe(t, []string{"SANDBOX_RUN_TOOLCHAIN_CACHE_DIR=" + filepath.Join(data, "toolchains")}, "--languages", cheapGoLanguages(t), "--data-dir", data)
	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(srv.stderr.String(), `"msg":"toolchain cache ready","language":"go"`) {
		if time.Now().After(deadline) {
			t.Fatalf("serve did not prepare the go cache:\n%s", srv.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(srv.stderr.String(), `"msg":"preparing toolchain cache","language":"go"`) {
		t.Errorf("no start line:\n%s", srv.stderr)
	}
	matches, _ := filepath.Glob(filepath.Join(data, "toolchains", "go-*", "w"))
	if len(matches) != 1 {
		t.Errorf("cache files %v", matches)
	}
}

// TestSessionsCommand: sessions ls lists the sessions of --session-id runs
// (id, files, size, last use), sessions rm removes them.
func TestSessionsCommand(t *testing.T) {
	data := freshDataDir(t)
	for _, id := range []string{"alpha", "beta", "gamma"} {
		if r := runCLI(t, "", "execute", "--data-dir", data, "--session-id", id, "-l", "python", "-c", "open('f.txt', 'w').write('12345')"); r.code != 0 {
			t.Fatalf("session %s: %d %q", id, r.code, r.stderr)
		}
	}
	r := runCLI(t, "", "sessions", "ls", "--data-dir", data)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "ID") || !strings.Contains(r.stdout, "LAST USED") {
		t.Fatalf("ls: %d %q %q", r.code, r.stdout, r.stderr)
	}
	for _, id := range []string{"alpha", "beta", "gamma"} {
		if !strings.Contains(r.stdout, "\n"+id+" ") {
			t.Errorf("ls lacks %s:\n%s", id, r.stdout)
		}
	}
	var list []sessionInfo
	r = runCLI(t, "", "sessions", "ls", "--data-dir", data, "-o", "json")
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 3 {
		t.Fatalf("ls json: %v %q", err, r.stdout)
	}
	for _, s := range list {
		// The source main.py (kept with the session) and f.txt.
		if s.Files != 2 || s.Bytes < 5 || s.LastUsed.IsZero() {
			t.Errorf("ls json: %+v", s)
		}
	}
	r = runCLI(t, "", "sessions", "rm", "--data-dir", data, "alpha")
	if r.code != 0 || r.stdout != "removed alpha\n" {
		t.Errorf("rm alpha: %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, "", "sessions", "rm", "alpha", "--data-dir", data, "-o", "json")
	var removal sessionRemoval
	if json.Unmarshal([]byte(r.stdout), &removal); r.code != 1 || len(removal.Removed) != 0 || !strings.Contains(removal.Errors["alpha"], "no session alpha") {
		t.Errorf("rm alpha again: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, "", "sessions", "rm", "--data-dir", data, "../x"); r.code != exitUsage || !strings.Contains(r.stderr, "invalid session id") {
		t.Errorf("rm ../x: %d %q", r.code, r.stderr)
	}
	if r := runCLI(t, "", "sessions", "rm", "--data-dir", data); r.code != exitUsage || !strings.Contains(r.stderr, "--all") {
		t.Errorf("rm without ids: %d %q", r.code, r.stderr)
	}
	r = runCLI(t, "", "sessions", "rm", "--all", "--data-dir", data, "-o", "json")
	if json.Unmarshal([]byte(r.stdout), &removal); r.code != 0 || strings.Join(removal.Removed, " ") != "beta gamma" {
		t.Errorf("rm --all: %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, "", "sessions", "ls", "--data-dir", data, "-o", "json")
	if strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("ls after rm --all: %q", r.stdout)
	}
	if r := runCLI(t, "", "sessions", "frob"); r.code != exitUsage || !strings.Contains(r.stderr, "use ls or rm") {
		t.Errorf("sessions frob: %d %q", r.code, r.stderr)
	}
}
