package agent

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// terminal reads the output of PTY process id.
type terminal struct {
	f    *frames
	id   uint64
	rest string // read, not yet matched
}

// until reads the terminal until it shows want (after what an earlier
// until matched).
func (term *terminal) until(want string) {
	term.f.t.Helper()
	for {
		if i := strings.Index(term.rest, want); i >= 0 {
			term.rest = term.rest[i+len(want):]
			return
		}
		ev := term.f.next(term.id)
		if ev.Type != EvPTY {
			term.f.t.Fatalf("%+v, waiting for %q in %q", ev, want, term.rest)
		}
		term.rest += string(ev.Data)
	}
}

// TestPTY: a shell on a terminal, its input, output and size; the errors
// of the terminal's ops.
func TestPTY(t *testing.T) {
	f := serve(t)
	ev := f.do(Request{ID: 1, Op: OpStart, Args: []string{"sh"}, Env: append(path, "TERM=dumb", "PS1=$ "), PTY: &Size{Cols: 80, Rows: 24}, Tag: "sh"})
	if ev.Type != EvStarted {
		t.Fatalf("%+v", ev)
	}
	pid := ev.PID
	term := &terminal{f: f, id: 1}
	input := func(id uint64, s string) {
		t.Helper()
		if ev := f.do(Request{ID: id, Op: OpInput, PID: pid, Data: []byte(s)}); ev.Type != EvOK {
			t.Fatalf("%+v", ev)
		}
	}
	// The terminal echoes the input: what is awaited is only in the
	// output.
	input(2, "echo marker-$((6*7))\n")
	term.until("marker-42")
	input(3, "tty\n")
	term.until("/dev/pts/")
	if ev := f.do(Request{ID: 4, Op: OpResize, PID: pid, Size: &Size{Cols: 101, Rows: 33}}); ev.Type != EvOK {
		t.Fatalf("%+v", ev)
	}
	input(5, "stty size\n")
	term.until("33 101")
	if ev := f.do(Request{ID: 6, Op: OpList}); len(ev.Procs) != 1 || !ev.Procs[0].PTY || ev.Procs[0].Tag != "sh" {
		t.Fatalf("%+v", ev)
	}

	// A process on no terminal, and errors.
	sleeper := f.do(Request{ID: 7, Op: OpStart, Args: []string{"sleep", "600"}, Env: path}).PID
	for _, c := range []struct {
		r    Request
		code string
	}{
		{Request{Op: OpResize, PID: 99999999, Size: &Size{Cols: 1, Rows: 1}}, CodeNotFound},
		{Request{Op: OpResize, PID: sleeper, Size: &Size{Cols: 1, Rows: 1}}, CodeInvalid},
		{Request{Op: OpResize, PID: pid}, CodeInvalid},
		{Request{Op: OpCloseStdin, PID: pid}, CodeInvalid},
	} {
		c.r.ID = 100
		if ev := f.do(c.r); ev.Type != EvError || ev.Code != c.code {
			t.Errorf("%+v: %+v, want %s", c.r, ev, c.code)
		}
	}
	f.do(Request{ID: 8, Op: OpSignal, PID: sleeper, Signal: int(syscall.SIGKILL)})
	if ev := f.next(7); ev.Type != EvExit {
		t.Fatalf("%+v", ev)
	}

	// The shell's end: its output, then its exit.
	input(9, "echo bye-$((1+1)); exit 3\n")
	term.until("bye-2")
	for {
		ev := f.next(1)
		if ev.Type == EvExit {
			if *ev.Exit != 3 {
				t.Fatalf("%+v", ev)
			}
			break
		}
		if ev.Type != EvPTY {
			t.Fatalf("%+v", ev)
		}
	}

	// A process on a terminal is the leader of its session and of a
	// process group: a signal reaches the group.
	ev = f.do(Request{ID: 10, Op: OpStart, Args: []string{"sh", "-c", "sleep 600; echo not killed"}, Env: path, PTY: &Size{Cols: 80, Rows: 24}})
	if ev.Type != EvStarted {
		t.Fatalf("%+v", ev)
	}
	if ev := f.do(Request{ID: 11, Op: OpSignal, PID: ev.PID, Signal: int(syscall.SIGTERM)}); ev.Type != EvOK {
		t.Fatalf("%+v", ev)
	}
	for {
		ev := f.next(10)
		if ev.Type == EvExit {
			if *ev.Exit != -1 || !strings.Contains(ev.Error, "terminated") {
				t.Fatalf("%+v", ev)
			}
			break
		}
		if ev.Type != EvPTY || strings.Contains(string(ev.Data), "not killed") {
			t.Fatalf("%+v", ev)
		}
	}

	// A process left behind on the terminal does not hold back the exit
	// (next waits less than the sleep).
	ev = f.do(Request{ID: 12, Op: OpStart, Args: []string{"sh", "-c", "trap '' HUP; sleep 600 & echo left"}, Env: path, PTY: &Size{Cols: 80, Rows: 24}})
	if ev.Type != EvStarted {
		t.Fatalf("%+v", ev)
	}
	group := ev.PID
	t.Cleanup(func() { syscall.Kill(-group, syscall.SIGKILL) })
	(&terminal{f: f, id: 12}).until("left")
	for ev := f.next(12); ev.Type != EvExit; ev = f.next(12) {
		if ev.Type != EvPTY {
			t.Fatalf("%+v", ev)
		}
	}
}

// TestResult: what a process writes to descriptor 3 comes as EvResult
// events, all before its exit.
func TestResult(t *testing.T) {
	f := serve(t)
	out, ev := f.runToEnd(Request{ID: 1, Op: OpStart, Args: []string{"sh", "-c", "echo hi >&3; echo out"}, Env: path, Result: true})
	if !strings.Contains(out, "result:hi\n;") || !strings.Contains(out, "stdout:out\n;") || *ev.Exit != 0 {
		t.Fatalf("%q %+v", out, ev)
	}
	// On a terminal too.
	if ev := f.do(Request{ID: 3, Op: OpStart, Args: []string{"sh", "-c", "echo r >&3"}, Env: path, PTY: &Size{Cols: 80, Rows: 24}, Result: true}); ev.Type != EvStarted {
		t.Fatalf("%+v", ev)
	}
	var result string
	for ev = f.next(3); ev.Type != EvExit; ev = f.next(3) {
		if ev.Type == EvResult {
			result += string(ev.Data)
		}
	}
	if result != "r\n" || *ev.Exit != 0 {
		t.Fatalf("%q %+v", result, ev)
	}
}

// fsEvent reads watch id's events until one of op on name.
func (f *frames) fsEvent(id uint64, name, op string) {
	f.t.Helper()
	for {
		ev := f.next(id)
		if ev.Type != EvFS {
			f.t.Fatalf("%+v, waiting for %s %s", ev, op, name)
		}
		if ev.Name == name && ev.FSOp == op {
			return
		}
	}
}

// TestWatch: watches of a directory and of a tree, what they report,
// their end, and the errors.
func TestWatch(t *testing.T) {
	f := serve(t)
	dir := t.TempDir()
	in := func(name ...string) string { return filepath.Join(append([]string{dir}, name...)...) }
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	if ev := f.do(Request{ID: 1, Op: OpWatch, Path: dir}); ev.Type != EvStarted || ev.PID != 0 {
		t.Fatalf("%+v", ev)
	}
	check(os.WriteFile(in("a"), []byte("x"), 0o644))
	f.fsEvent(1, "a", FSCreate)
	f.fsEvent(1, "a", FSWrite)
	check(os.Chmod(in("a"), 0o600))
	f.fsEvent(1, "a", FSChmod)
	check(os.Rename(in("a"), in("b")))
	f.fsEvent(1, "a", FSRename)
	f.fsEvent(1, "b", FSRename)
	check(os.Remove(in("b")))
	f.fsEvent(1, "b", FSRemove)
	// Not recursive: a subdirectory's files are not reported (they would
	// come before what was made after them).
	check(os.MkdirAll(in("sub", "deeper"), 0o755))
	check(os.WriteFile(in("sub", "f"), nil, 0o644))
	check(os.WriteFile(in("last"), nil, 0o644))
	for ev := f.next(1); ev.Name != "last"; ev = f.next(1) {
		if ev.Type != EvFS || strings.HasPrefix(ev.Name, "sub/") {
			t.Fatalf("%+v", ev)
		}
	}

	// Recursive: the directories there before the watch and those made
	// after, even made at once with what is in them.
	if ev := f.do(Request{ID: 2, Op: OpWatch, Path: dir, Recursive: true}); ev.Type != EvStarted {
		t.Fatalf("%+v", ev)
	}
	check(os.WriteFile(in("sub", "deeper", "g"), nil, 0o644))
	f.fsEvent(2, "sub/deeper/g", FSCreate)
	check(os.Mkdir(in("new"), 0o755))
	f.fsEvent(2, "new", FSCreate)
	check(os.WriteFile(in("new", "f"), nil, 0o644))
	f.fsEvent(2, "new/f", FSCreate)
	check(os.MkdirAll(in("x", "y", "z"), 0o755))
	check(os.WriteFile(in("x", "y", "z", "h"), nil, 0o644))
	f.fsEvent(2, "x/y/z/h", FSCreate)
	// A directory moved within the tree is reported under its new name.
	check(os.Rename(in("new"), in("moved")))
	f.fsEvent(2, "moved", FSRename)
	check(os.WriteFile(in("moved", "f"), []byte("x"), 0o644))
	f.fsEvent(2, "moved/f", FSWrite)
	check(os.RemoveAll(in("x")))
	f.fsEvent(2, "x/y/z/h", FSRemove)
	f.fsEvent(2, "x", FSRemove)

	// Unwatch: the watch's stream ends, then the answer.
	if ev := f.do(Request{ID: 3, Op: OpUnwatch, Watch: 1}); ev.Type != EvOK {
		t.Fatalf("%+v", ev)
	}
	for ev := f.next(1); ev.Type != EvExit; ev = f.next(1) {
		if ev.Type != EvFS {
			t.Fatalf("%+v", ev)
		}
	}

	// A watched directory removed: the watch ends on its own.
	gone := in("gone")
	check(os.Mkdir(gone, 0o755))
	if ev := f.do(Request{ID: 4, Op: OpWatch, Path: gone}); ev.Type != EvStarted {
		t.Fatalf("%+v", ev)
	}
	check(os.Remove(gone))
	f.fsEvent(4, ".", FSRemove)
	if ev := f.next(4); ev.Type != EvExit || ev.Error == "" {
		t.Fatalf("%+v", ev)
	}

	for _, c := range []struct {
		r    Request
		code string
	}{
		{Request{Op: OpWatch, Path: in("missing")}, CodeNotFound},
		{Request{Op: OpWatch, Path: in("last")}, CodeInvalid},
		{Request{Op: OpWatch}, CodeInvalid},
		{Request{Op: OpUnwatch, Watch: 1}, CodeNotFound},
		{Request{Op: OpUnwatch, Watch: 4}, CodeNotFound},
	} {
		c.r.ID = 100
		if ev := f.do(c.r); ev.Type != EvError || ev.Code != c.code {
			t.Errorf("%+v: %+v, want %s", c.r, ev, c.code)
		}
	}
	// Watch 2 still runs: the agent's end stops it (serve's cleanup
	// waits for that).
}
