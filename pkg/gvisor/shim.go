package gvisor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
)

// EnvShim marks the first program of a sandbox booted ahead (the pool):
// ShimMain.
const EnvShim = "SANDBOX_RUN_GVISOR_SHIM"

// shimReady says this process's binary can be a pooled sandbox's shim:
// it called ShimMain. Without it the pool keeps nothing.
var shimReady atomic.Bool

// shimPath is where a pooled sandbox has the shim (this binary).
const shimPath = "/.sandbox-run/shim"

// header is what a pooled sandbox's shim reads first: the program.
type header struct {
	Args []string `json:"args"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir"`
	// Result gives the program the result pipe (the shim's descriptor 4)
	// as its descriptor 3.
	Result bool `json:"result,omitempty"`
}

// shimStatus is the shim's report on its descriptor 3: how the program
// ended (its exit code, or the signal that ended it).
type shimStatus struct {
	Exit   int `json:"exit"`
	Signal int `json:"signal,omitempty"`
}

// ShimMain, called first thing in main (and in the TestMain of a package
// whose tests pool gVisor sandboxes), is the first program of a sandbox
// booted ahead when EnvShim is set, and never returns there. It reads one
// line of JSON from its stdin (the program's argv, environment and
// directory), byte by byte so that the rest of stdin is the program's,
// starts the program as the sandbox's user (it is gVisor's root itself,
// with only the capabilities to change its user: the program can neither
// signal it nor see its descriptor 3), waits for it, and reports how it
// ended on descriptor 3, a pipe to the host (runsc run --pass-fd). Its
// exit then ends the sandbox and whatever the program left running. It
// returns at once otherwise.
func ShimMain() {
	if os.Getenv(EnvShim) != "1" {
		shimReady.Store(true)
		return
	}
	report, result := os.NewFile(3, "report"), os.NewFile(4, "result")
	syscall.CloseOnExec(3)
	syscall.CloseOnExec(4)
	done := func(st shimStatus) {
		// The program's stderr is the shim's: nothing of the shim's may
		// follow the program's (a -cover build warns at its exit).
		os.Stderr.Close()
		json.NewEncoder(report).Encode(st)
		os.Exit(0)
	}
	var line []byte
	b := make([]byte, 1)
	for {
		n, err := os.Stdin.Read(b)
		if n == 1 {
			if b[0] == '\n' {
				break
			}
			line = append(line, b[0])
		}
		if err != nil || len(line) > 4<<20 {
			done(shimStatus{Exit: 126})
		}
	}
	var h header
	if json.Unmarshal(line, &h) != nil || len(h.Args) == 0 {
		done(shimStatus{Exit: 126})
	}
	cmd := &exec.Cmd{Path: lookPath(h.Args[0], h.Env), Args: h.Args, Env: h.Env, Dir: h.Dir,
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		SysProcAttr: &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}}}
	if h.Result {
		cmd.ExtraFiles = []*os.File{result}
	}
	err := cmd.Start()
	result.Close() // the program's alone: its end is the pipe's
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandbox-run: %s: %v\n", h.Args[0], err)
		if errors.Is(err, fs.ErrNotExist) {
			done(shimStatus{Exit: 127})
		}
		done(shimStatus{Exit: 126})
	}
	// As the sandbox's PID 1 it reaps every orphan that comes to it
	// until the program itself ends.
	var ws syscall.WaitStatus
	for {
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if pid == cmd.Process.Pid {
			break
		}
		if err != nil && err != syscall.EINTR {
			done(shimStatus{Exit: -1, Signal: int(syscall.SIGKILL)})
		}
	}
	if ws.Signaled() {
		done(shimStatus{Exit: -1, Signal: int(ws.Signal())})
	}
	done(shimStatus{Exit: ws.ExitStatus()})
}

// lookPath finds name on env's PATH, as a shell would (a name with a
// slash is itself).
func lookPath(name string, env []string) string {
	if strings.Contains(name, "/") {
		return name
	}
	path := "/usr/local/bin:/usr/bin:/bin"
	for _, kv := range env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = p
		}
	}
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return name
}
