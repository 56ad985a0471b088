package agent

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// frames is a test's end of an agent served in this process, in raw
// frames (pkg/live's Client is tested against the same agent there).
type frames struct {
	t   *testing.T
	enc *json.Encoder
	in  io.Closer
	out chan []byte // the agent's frames, read as they come
	// events read but not yet asked for, by request id
	held map[uint64][]Event
}

// wait is how long a test waits for an event that should come.
const wait = 30 * time.Second

func serve(t *testing.T) *frames {
	t.Helper()
	reqR, reqW := io.Pipe()
	evR, evW := io.Pipe()
	done := make(chan struct{})
	go func() { _ = Serve(reqR, evW); evW.Close(); close(done) }()
	out := make(chan []byte, 64)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(evR)
		sc.Buffer(nil, MaxFrame)
		for sc.Scan() {
			out <- slices.Clone(sc.Bytes())
		}
	}()
	t.Cleanup(func() {
		reqW.Close()
		go func() {
			for range out {
			}
		}()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Error("the agent did not end with its input")
		}
	})
	return &frames{t: t, enc: json.NewEncoder(reqW), in: reqW, out: out, held: map[uint64][]Event{}}
}

// next is the next event of request id, which must come within wait.
func (f *frames) next(id uint64) Event {
	f.t.Helper()
	if evs := f.held[id]; len(evs) > 0 {
		f.held[id] = evs[1:]
		return evs[0]
	}
	timeout := time.After(wait)
	for {
		select {
		case b, ok := <-f.out:
			if !ok {
				f.t.Fatalf("the agent's events ended waiting for request %d", id)
			}
			var ev Event
			if err := json.Unmarshal(b, &ev); err != nil {
				f.t.Fatalf("a frame that is no event: %q", b)
			}
			if ev.ID == id {
				return ev
			}
			f.held[ev.ID] = append(f.held[ev.ID], ev)
		case <-timeout:
			f.t.Fatalf("no event of request %d in %v", id, wait)
		}
	}
}

func (f *frames) do(r Request) Event {
	f.t.Helper()
	if err := f.enc.Encode(r); err != nil {
		f.t.Fatal(err)
	}
	return f.next(r.ID)
}

// runToEnd is the output of start request r (each event as "type:data;")
// and its exit event.
func (f *frames) runToEnd(r Request) (string, Event) {
	f.t.Helper()
	ev := f.do(r)
	if ev.Type != EvStarted {
		f.t.Fatalf("start: %+v", ev)
	}
	var out strings.Builder
	for {
		ev = f.next(r.ID)
		switch ev.Type {
		case EvStdout, EvStderr, EvResult:
			out.WriteString(ev.Type + ":" + string(ev.Data) + ";")
		case EvExit:
			return out.String(), ev
		default:
			f.t.Fatalf("%+v", ev)
		}
	}
}

var path = []string{"PATH=/usr/bin:/bin"}

// TestServe: each op in raw frames, and the errors it answers.
func TestServe(t *testing.T) {
	f := serve(t)
	out, ev := f.runToEnd(Request{ID: 1, Op: OpStart, Args: []string{"sh", "-c", "echo out; exit 4"}, Env: path})
	if out != "stdout:out\n;" || *ev.Exit != 4 || ev.Status != "exit status 4" {
		t.Fatalf("%q %+v", out, ev)
	}

	// stdin, list, close, signal to the group.
	if ev := f.do(Request{ID: 2, Op: OpStart, Args: []string{"cat"}, Env: path, Stdin: true, Tag: "t"}); ev.Type != EvStarted {
		t.Fatalf("%+v", ev)
	} else {
		pid := ev.PID
		if ev := f.do(Request{ID: 3, Op: OpInput, PID: pid, Data: []byte("x\n")}); ev.Type != EvOK {
			t.Fatalf("%+v", ev)
		}
		if ev := f.next(2); ev.Type != EvStdout || string(ev.Data) != "x\n" {
			t.Fatalf("%+v", ev)
		}
		if ev := f.do(Request{ID: 4, Op: OpList}); len(ev.Procs) != 1 || ev.Procs[0].Tag != "t" {
			t.Fatalf("%+v", ev)
		}
		if ev := f.do(Request{ID: 5, Op: OpCloseStdin, PID: pid}); ev.Type != EvOK {
			t.Fatalf("%+v", ev)
		}
		if ev := f.next(2); ev.Type != EvExit || *ev.Exit != 0 {
			t.Fatalf("%+v", ev)
		}
	}
	ev = f.do(Request{ID: 6, Op: OpStart, Args: []string{"sleep", "600"}, Env: path})
	if ev := f.do(Request{ID: 7, Op: OpSignal, PID: ev.PID, Signal: int(syscall.SIGTERM)}); ev.Type != EvOK {
		t.Fatalf("%+v", ev)
	}
	if ev := f.next(6); ev.Type != EvExit || *ev.Exit != -1 || !strings.Contains(ev.Error, "terminated") {
		t.Fatalf("%+v", ev)
	}

	// Errors: their codes.
	for _, c := range []struct {
		r    Request
		code string
	}{
		{Request{Op: OpStart}, CodeInvalid},
		{Request{Op: OpStart, Args: []string{"/nonexistent"}}, CodeNotFound},
		{Request{Op: OpInput, PID: 99999999}, CodeNotFound},
		{Request{Op: OpSignal, PID: 99999999, Signal: 9}, CodeNotFound},
		{Request{Op: OpStat}, CodeInvalid},
		{Request{Op: "nonsense", Path: "/"}, CodeInvalid},
		{Request{Op: OpStat, Path: "/nonexistent"}, CodeNotFound},
		{Request{Op: OpMkdir, Path: "/"}, CodeExists},
		{Request{Op: OpMove, Path: "/tmp"}, CodeInvalid},
		{Request{Op: OpListDir, Path: "/etc/passwd"}, CodeInvalid},
	} {
		c.r.ID = 100
		if ev := f.do(c.r); ev.Type != EvError || ev.Code != c.code {
			t.Errorf("%+v: %+v, want %s", c.r, ev, c.code)
		}
	}

	// Files.
	dir := t.TempDir()
	p := filepath.Join(dir, "d", "f.txt")
	if ev := f.do(Request{ID: 8, Op: OpWriteFile, Path: p, Data: []byte("hello"), Mode: 0o600}); ev.Entry == nil || ev.Entry.Mode != 0o600 || ev.Entry.Size != 5 {
		t.Fatalf("%+v", ev)
	}
	if ev := f.do(Request{ID: 9, Op: OpReadFile, Path: p}); string(ev.Data) != "hello" {
		t.Fatalf("%+v", ev)
	}
	f.do(Request{ID: 10, Op: OpWriteFile, Path: filepath.Join(dir, "empty")})
	if ev := f.do(Request{ID: 11, Op: OpReadFile, Path: filepath.Join(dir, "empty")}); ev.Type != EvOK || len(ev.Data) != 0 {
		t.Fatalf("%+v", ev)
	}
	if ev := f.do(Request{ID: 12, Op: OpMkdir, Path: filepath.Join(dir, "m")}); ev.Entry == nil || ev.Entry.Type != "dir" {
		t.Fatalf("%+v", ev)
	}
	if err := syscall.Symlink("d/f.txt", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if ev := f.do(Request{ID: 13, Op: OpStat, Path: filepath.Join(dir, "link")}); ev.Entry.Type != "symlink" || ev.Entry.Target != "d/f.txt" {
		t.Fatalf("%+v", ev)
	}
	if ev := f.do(Request{ID: 14, Op: OpMove, Path: p, To: filepath.Join(dir, "m", "g.txt")}); ev.Entry == nil || ev.Entry.Name != "g.txt" {
		t.Fatalf("%+v", ev)
	}
	if ev := f.do(Request{ID: 15, Op: OpListDir, Path: dir, Depth: 2}); len(ev.Entries) != 5 {
		t.Fatalf("%+v", ev.Entries)
	}
	if ev := f.do(Request{ID: 16, Op: OpRemove, Path: filepath.Join(dir, "m")}); ev.Type != EvOK {
		t.Fatalf("%+v", ev)
	}

	// A frame that is not a request is answered, and the agent goes on.
	if _, err := io.WriteString(f.in.(io.Writer), "not json\n"); err != nil {
		t.Fatal(err)
	}
	if ev := f.next(0); ev.Type != EvError || ev.Code != CodeInvalid {
		t.Fatalf("%+v", ev)
	}
	if ev := f.do(Request{ID: 17, Op: OpList}); ev.Type != EvOK {
		t.Fatalf("%+v", ev)
	}
}

// TestWithShell: bash -l -c LINE runs as sh -c LINE where there is no
// bash, and as itself where there is; other commands are left alone.
func TestWithShell(t *testing.T) {
	dir := t.TempDir()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh here")
	}
	if err := os.Symlink(sh, filepath.Join(dir, "sh")); err != nil {
		t.Fatal(err)
	}
	line := []string{"bash", "-l", "-c", "echo hi"}
	t.Setenv("PATH", dir)
	if got := withShell(line); !slices.Equal(got, []string{filepath.Join(dir, "sh"), "-c", "echo hi"}) {
		t.Errorf("without bash: %q", got)
	}
	if got := withShell([]string{"bash", "script.sh"}); !slices.Equal(got, []string{"bash", "script.sh"}) {
		t.Errorf("another command: %q", got)
	}
	if err := os.Symlink(sh, filepath.Join(dir, "bash")); err != nil {
		t.Fatal(err)
	}
	if got := withShell(line); !slices.Equal(got, line) {
		t.Errorf("with bash: %q", got)
	}
}
