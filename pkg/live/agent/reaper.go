package agent

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
)

// The agent as a sandbox's PID 1 (under gVisor, whose container starts
// the agent itself): a process whose parent ends is handed to PID 1, which
// must wait for it, or it stays a zombie. PID 1 waiting for every child
// would take the exit of the agent's own processes from os/exec, so PID 1
// is a small reaper instead: it starts the agent proper as its child (the
// same program, its stdin, stdout, stderr and descriptor 3, the same
// environment), waits for every process handed to it, passes SIGUSR1 on
// (the host's word after a checkpoint), and ends as the agent ends.

// envChild marks the agent that PID 1 started (its environment only).
const envChild = "SANDBOX_RUN_AGENT_CHILD"

// reapAsInit is true when this process is the sandbox's PID 1 and not yet
// the agent proper.
func reapAsInit() bool {
	if os.Getenv(envChild) != "" {
		os.Unsetenv(envChild) // not for what the agent starts
		return false
	}
	return os.Getpid() == 1
}

// reap runs the agent proper as a child, reaps whatever is handed to this
// PID 1 until it ends, and returns its exit code.
func reap() int {
	if err := setUndumpable(); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox-run agent:", err)
		return 1
	}
	cmd := exec.Command(Path)
	cmd.Args = os.Args
	if exe, err := os.Readlink("/proc/self/exe"); err == nil && filepath.Dir(exe) == LibDir {
		// Started through the host's loader (an image's root, which has
		// not the agent's libraries): so is the agent proper.
		cmd.Path, cmd.Args = exe, append([]string{exe, "--library-path", LibDir}, os.Args...)
	}
	cmd.Env = append(os.Environ(), envChild+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if os.Getenv(EnvSocket) == "" {
		cmd.ExtraFiles = []*os.File{os.NewFile(3, "events")} // the pipe mode's
	}
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox-run agent: starting the agent:", err)
		return 1
	}
	child := cmd.Process.Pid
	go func() {
		for range usr1 {
			syscall.Kill(child, syscall.SIGUSR1)
		}
	}()
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "sandbox-run agent: waiting:", err)
			return 1
		}
		if pid != child {
			continue // an orphan, reaped
		}
		if ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ws.ExitStatus()
	}
}
