package gvisor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
// frame from its stdin (the program's argv, environment and directory:
// readHeader), and no more, so that the rest of stdin is the program's,
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
	h, err := readHeader(os.Stdin)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sandbox-run: the shim's header: %v\n", err)
		done(shimStatus{Exit: 126})
	}
	cmd := &exec.Cmd{Path: lookPath(h.Args[0], h.Env), Args: h.Args, Env: h.Env, Dir: h.Dir,
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		SysProcAttr: &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}}}
	if h.Result {
		cmd.ExtraFiles = []*os.File{result}
	}
	err = cmd.Start()
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

// maxHeader bounds a header's length.
const maxHeader = 4 << 20

// frame is h as the shim reads it: its length in 8 hex digits, then its
// JSON. The shim reads exactly that much of its stdin (the rest is the
// program's) in two reads, not a read per byte: under gVisor each read
// of the host's pipe costs tens of microseconds, and a byte at a time
// made a 160-byte header cost 6-15 ms of every run.
func frame(h header) []byte {
	b, _ := json.Marshal(h)
	return append(fmt.Appendf(nil, "%08x", len(b)), b...)
}

// readHeader reads one frame from r, and nothing past it.
func readHeader(r io.Reader) (header, error) {
	var h header
	var size [8]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return h, err
	}
	n, err := strconv.ParseUint(string(size[:]), 16, 32)
	if err != nil || n > maxHeader {
		return h, fmt.Errorf("a header of %q bytes", size[:])
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return h, err
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return h, err
	}
	if len(h.Args) == 0 {
		return h, errors.New("a header without a program")
	}
	return h, nil
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
