package sandboxcmd

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/sandbox-run/sandbox-run/internal/app/cli"
	"github.com/sandbox-run/sandbox-run/pkg/client"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// exitCannotStart is a command that could not start (no such program or
// directory, or not executable), as shells have it.
const exitCannotStart = 127

const execUsage = `Usage: sandbox-run sandbox exec ID [--cwd D] [--env K=V]... [--timeout S] [-i] -- CMD [ARGS...]

Runs CMD in live sandbox ID and streams its output as it comes: its stdout to
stdout, its stderr to stderr. One CMD word runs through bash -l -c (a command
line: pipes, redirections, ';' and quotes are bash's); several are an argv,
run as they are. It starts in /work (or --cwd) and its standard input is
empty, unless -i sends this command's standard input (its end ends CMD's).

The exit code is CMD's (128+N when signal N ended it), 124 when --timeout
passed, 127 when CMD could not start; 1 when the sandbox does not exist.
SIGINT or SIGTERM kills CMD (exit 130). With --output-format json the
process's result is printed at its end (pid, exit_code, status, stdout,
stderr, timed_out) instead of its output as it comes.

Flags:
`

// splitDashes splits args at the first "--": the words and flags before
// it, and the command after it.
func splitDashes(args []string) (before, after []string) {
	for i, a := range args {
		if a == "--" {
			return args[:i], args[i+1:]
		}
	}
	return args, nil
}

func (m *cmd) exec(args []string) int {
	fs := m.flags("exec", execUsage, true)
	var req wire.ProcessRequest
	env := envFlag{}
	var interactive bool
	fs.StringVar(&req.Cwd, "cwd", "", "the working `directory` of CMD (relative to /work unless absolute; default /work)")
	fs.Var(env, "env", "an environment variable `K=V` of CMD (repeatable)")
	fs.Float64Var(&req.TimeoutSeconds, "timeout", 0, "kill CMD after this many `seconds` (exit 124; default: none but the sandbox's life)")
	fs.BoolVar(&interactive, "interactive", false, "send this command's standard input to CMD")
	fs.BoolVar(&interactive, "i", false, "shorthand for --interactive")
	before, after := splitDashes(args)
	words, ok, code := cli.ParseWords(fs, before)
	if !ok {
		return code
	}
	if len(words) == 0 {
		return m.fatalf(exitUsage, "sandbox exec wants the sandbox's id, then -- and the command\n%s", strings.TrimSuffix(cli.UsageHint(fs), "\n"))
	}
	id, command := words[0], append(words[1:], after...)
	switch {
	case len(command) == 0:
		return m.fatalf(exitUsage, "sandbox exec wants a command after the id: sandbox-run sandbox exec %s -- CMD [ARGS...]", id)
	case len(command) == 1:
		req.Command = command[0]
	default:
		req.Args = command
	}
	if command[0] == "" {
		return m.fatalf(exitUsage, "sandbox exec: the command is empty")
	}
	if req.TimeoutSeconds < 0 {
		return m.fatalf(exitUsage, "--timeout must be positive, got %v", req.TimeoutSeconds)
	}
	if len(env) > 0 {
		req.Env = env
	}
	stop, code := m.connect()
	if stop == nil {
		return code
	}
	defer stop()

	var res *wire.ProcessResult
	var err error
	asJSON := m.common.Format == "json"
	var stdout, stderr bytes.Buffer
	onStdout, onStderr := func(p []byte) { m.con.Stdout().Write(p) }, func(p []byte) { m.con.Stderr().Write(p) }
	if asJSON {
		onStdout, onStderr = func(p []byte) { stdout.Write(p) }, func(p []byte) { stderr.Write(p) }
	}
	switch {
	case interactive:
		res, err = m.c.ExecWithInput(m.ctx, id, req, os.Stdin, onStdout, onStderr)
		if res != nil && asJSON {
			res.Stdout, res.Stderr = stdout.String(), stderr.String()
		}
	case asJSON:
		res, err = m.c.Exec(m.ctx, id, req)
	default:
		res, err = m.c.ExecStream(m.ctx, id, req, onStdout, onStderr)
	}
	if err != nil {
		return m.execFailure(id, err)
	}
	if asJSON {
		cli.PrintJSON(res)
	}
	return m.processExit(res, req.TimeoutSeconds)
}

// execFailure is failure, but for a process that could not start (127).
func (m *cmd) execFailure(id string, err error) int {
	var ae *client.Error
	if errors.As(err, &ae) && ae.StatusCode == http.StatusBadRequest && strings.HasPrefix(ae.Message, "the process cannot start") {
		return m.fatalf(exitCannotStart, "%s", ae.Message)
	}
	return m.failure(id, err)
}

// processExit is the exit code of a process's end, as a shell has it.
func (m *cmd) processExit(res *wire.ProcessResult, timeout float64) int {
	switch {
	case res.TimedOut:
		return m.fatalf(exitTimeout, "timeout: killed after %gs", timeout)
	case res.ExitCode != nil && *res.ExitCode >= 0:
		return *res.ExitCode
	}
	if name, ok := strings.CutPrefix(res.Status, "signal: "); ok {
		if n := signalNumber(name); n > 0 {
			if n != int(syscall.SIGINT) && n != int(syscall.SIGPIPE) {
				m.con.Printf("sandbox-run: %s\n", res.Status)
			}
			return 128 + n
		}
	}
	msg := res.Error
	if msg == "" {
		msg = "the process ended without an exit code (" + res.Status + ")"
	}
	return m.fatalf(exitFailed, "%s", msg)
}

// signalNumber is the number of the signal Go's os/exec names so
// ("killed", "terminated"), or 0.
func signalNumber(name string) int {
	for n := 1; n < 65; n++ {
		if syscall.Signal(n).String() == name {
			return n
		}
	}
	return 0
}

const shellUsage = `Usage: sandbox-run sandbox shell ID

Opens an interactive shell (bash -i -l, TERM=xterm-256color) in live sandbox
ID on a terminal of this terminal's size. This terminal is in raw mode while
it runs (Ctrl-C, Ctrl-D, Ctrl-Z and the rest go to the shell), the shell's
terminal follows its size when it changes, and it is restored at the end.
The command exits with the shell's exit code ('exit 3' in it: 3).

When standard input is no terminal, it is piped to a shell (bash -l) that
runs without a terminal, and the shell's stdout and stderr are printed as
they come:

  printf 'cd /tmp\npwd\n' | sandbox-run sandbox shell ID

Flags:
`

func (m *cmd) shell(args []string) int {
	fs := m.flags("shell", shellUsage, false)
	words, ok, code := cli.ParseWords(fs, args)
	if !ok {
		return code
	}
	if len(words) != 1 {
		return m.fatalf(exitUsage, "sandbox shell wants one sandbox id, got %q", words)
	}
	id := words[0]
	stop, code := m.connect()
	if stop == nil {
		return code
	}
	defer stop()
	if !cli.IsTerminal(os.Stdin) {
		res, err := m.c.ExecWithInput(m.ctx, id, wire.ProcessRequest{Args: []string{"bash", "-l"}}, os.Stdin,
			func(p []byte) { m.con.Stdout().Write(p) }, func(p []byte) { m.con.Stderr().Write(p) })
		if err != nil {
			return m.failure(id, err)
		}
		return m.processExit(res, 0)
	}
	fd := int(os.Stdin.Fd())
	cols, rows := terminalSize(fd)
	t, err := m.c.PTY(m.ctx, id, cols, rows)
	if err != nil {
		return m.failure(id, err)
	}
	defer t.Close()
	restore, err := makeRaw(fd)
	if err != nil {
		return m.fatalf(exitFailed, "cannot put the terminal in raw mode: %v", err)
	}
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)
	go func() {
		for range winch {
			if c, r := terminalSize(fd); c > 0 && r > 0 {
				t.Resize(c, r)
			}
		}
	}()
	go io.Copy(t, os.Stdin) // what is typed; the shell's end ends the command
	_, err = io.Copy(os.Stdout, t)
	restore()
	if err != nil {
		if m.ctx.Err() != nil {
			fmt.Fprint(os.Stdout, "\r\n")
			return m.fatalf(exitInterrupted, "interrupted: the shell was hung up on")
		}
		return m.fatalf(exitFailed, "lost the terminal: %v", err)
	}
	code, _ = t.ExitCode()
	if code >= 0 {
		return code
	}
	return m.processExit(&wire.ProcessResult{ExitCode: &code, Status: t.ExitStatus()}, 0)
}
