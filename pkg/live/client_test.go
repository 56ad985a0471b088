package live

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
)

const bounded = time.Minute

// served is a client of an agent served in this process (the protocol
// alone: no sandbox around it), ended at cleanup.
func served(t *testing.T) *Client {
	t.Helper()
	reqR, reqW := io.Pipe()
	evR, evW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- agent.Serve(reqR, evW); evW.Close() }()
	c := NewClient(reqW, evR)
	t.Cleanup(func() {
		reqW.Close()
		select {
		case <-done:
		case <-time.After(bounded):
			t.Error("the agent did not end with its input")
		}
	})
	return c
}

// output collects a process's events.
type output struct {
	mu             sync.Mutex
	stdout, stderr bytes.Buffer
	exit           chan agent.Event
}

func newOutput() *output { return &output{exit: make(chan agent.Event, 1)} }

func (o *output) on(ev agent.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch ev.Type {
	case agent.EvStdout:
		o.stdout.Write(ev.Data)
	case agent.EvStderr:
		o.stderr.Write(ev.Data)
	default:
		o.exit <- ev
	}
}

func (o *output) wait(t *testing.T) agent.Event {
	t.Helper()
	select {
	case ev := <-o.exit:
		return ev
	case <-time.After(bounded):
		t.Fatal("the process never ended")
		panic("unreachable")
	}
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.stdout.String() + "|" + o.stderr.String()
}

func testProcesses(t *testing.T, c *Client, tmp string) {
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()

	// Output in order on each stream, then the exit code.
	o := newOutput()
	pid, err := c.Start(ctx, agent.Request{Args: []string{"bash", "-c", "echo hi; echo err >&2; echo $FOO; pwd; exit 3"},
		Env: []string{"FOO=bar", "PATH=/usr/bin:/bin"}, Dir: tmp}, o.on)
	if err != nil || pid <= 0 {
		t.Fatalf("start: %d, %v", pid, err)
	}
	if ev := o.wait(t); *ev.Exit != 3 || ev.Error != "" || o.String() != "hi\nbar\n"+tmp+"\n|err\n" {
		t.Fatalf("exit %+v, output %q", ev, o.String())
	}

	// stdin while it runs, then closed; list shows it meanwhile.
	o = newOutput()
	pid, err = c.Start(ctx, agent.Request{Args: []string{"cat"}, Env: []string{"PATH=/usr/bin:/bin"}, Stdin: true, Tag: "cat"}, o.on)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(ctx, agent.Request{Op: agent.OpInput, PID: pid, Data: []byte("to cat\n")}); err != nil {
		t.Fatal(err)
	}
	ls, err := c.Call(ctx, agent.Request{Op: agent.OpList})
	if err != nil || len(ls.Procs) != 1 || ls.Procs[0].PID != pid || ls.Procs[0].Tag != "cat" {
		t.Fatalf("list: %+v, %v", ls.Procs, err)
	}
	if _, err := c.Call(ctx, agent.Request{Op: agent.OpCloseStdin, PID: pid}); err != nil {
		t.Fatal(err)
	}
	if ev := o.wait(t); *ev.Exit != 0 || o.String() != "to cat\n|" {
		t.Fatalf("cat: %+v %q", ev, o.String())
	}

	// A signal ends the process and what it started (its group).
	o = newOutput()
	pid, err = c.Start(ctx, agent.Request{Args: []string{"bash", "-c", "sleep 600 & sleep 600; echo never"}, Env: []string{"PATH=/usr/bin:/bin"}}, o.on)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(ctx, agent.Request{Op: agent.OpSignal, PID: pid, Signal: int(syscall.SIGKILL)}); err != nil {
		t.Fatal(err)
	}
	if ev := o.wait(t); *ev.Exit != -1 || !strings.Contains(ev.Error, "killed") || strings.Contains(o.String(), "never") {
		t.Fatalf("killed: %+v %q", ev, o.String())
	}
	var nf *Error
	if _, err := c.Call(ctx, agent.Request{Op: agent.OpSignal, PID: pid, Signal: 9}); !errors.As(err, &nf) || nf.Code != agent.CodeNotFound {
		t.Fatalf("a signal to a process that ended: %v", err)
	}
	if _, err := c.Start(ctx, agent.Request{Args: []string{"/no/such/program"}}, o.on); !errors.As(err, &nf) || nf.Code != agent.CodeNotFound {
		t.Fatalf("a program that does not exist: %v", err)
	}
}

func testFiles(t *testing.T, c *Client, dir string) {
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()
	call := func(r agent.Request) agent.Event {
		t.Helper()
		ev, err := c.Call(ctx, r)
		if err != nil {
			t.Fatalf("%s %s: %v", r.Op, r.Path, err)
		}
		return ev
	}
	big := bytes.Repeat([]byte{0, 1, 2, 255}, 5<<20/4)
	p := filepath.Join(dir, "a", "b", "big.bin")
	if ev := call(agent.Request{Op: agent.OpWriteFile, Path: p, Data: big}); ev.Entry == nil || ev.Entry.Size != int64(len(big)) {
		t.Fatalf("write: %+v", ev.Entry)
	}
	if ev := call(agent.Request{Op: agent.OpReadFile, Path: p}); !bytes.Equal(ev.Data, big) {
		t.Fatalf("read back %d bytes", len(ev.Data))
	}
	call(agent.Request{Op: agent.OpMkdir, Path: filepath.Join(dir, "x", "y")})
	if ev := call(agent.Request{Op: agent.OpMove, Path: p, To: filepath.Join(dir, "x", "y", "moved.bin")}); ev.Entry.Name != "moved.bin" {
		t.Fatalf("move: %+v", ev.Entry)
	}
	ev := call(agent.Request{Op: agent.OpListDir, Path: dir, Depth: 3})
	var names []string
	for _, e := range ev.Entries {
		names = append(names, strings.TrimPrefix(e.Path, dir)+":"+e.Type)
	}
	if got := strings.Join(names, " "); got != "/a:dir /a/b:dir /x:dir /x/y:dir /x/y/moved.bin:file" {
		t.Fatalf("list: %s", got)
	}
	if ev := call(agent.Request{Op: agent.OpListDir, Path: dir}); len(ev.Entries) != 2 {
		t.Fatalf("depth 1: %+v", ev.Entries)
	}
	call(agent.Request{Op: agent.OpRemove, Path: filepath.Join(dir, "x")})
	var e *Error
	for _, r := range []agent.Request{{Op: agent.OpStat, Path: filepath.Join(dir, "x")}, {Op: agent.OpReadFile, Path: p},
		{Op: agent.OpRemove, Path: filepath.Join(dir, "x")}} {
		if _, err := c.Call(ctx, r); !errors.As(err, &e) || e.Code != agent.CodeNotFound {
			t.Fatalf("%s of what is gone: %v", r.Op, err)
		}
	}
	if _, err := c.Call(ctx, agent.Request{Op: agent.OpMkdir, Path: filepath.Join(dir, "a")}); !errors.As(err, &e) || e.Code != agent.CodeExists {
		t.Fatalf("mkdir of what exists: %v", err)
	}
}

// TestAgentProtocol: the agent's processes and files, over the protocol,
// with no sandbox around it (what each op does; the sandbox's walls are
// TestLiveSandbox's).
func TestAgentProtocol(t *testing.T) {
	c := served(t)
	dir := t.TempDir()
	testProcesses(t, c, dir)
	testFiles(t, c, dir)
	testOutputWhole(t, c)
}

// testOutputWhole: processes that write up to a pipe's worth and exit at
// once, many at a time, each give all they wrote (what was in the pipe
// at their exit is read, however late the reader).
func testOutputWhole(t *testing.T, c *Client) {
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()
	var outs []*output
	for range 16 {
		o := newOutput()
		if _, err := c.Start(ctx, agent.Request{Args: []string{"bash", "-c", "head -c 60000 /dev/zero | tr '\\0' x"}, Env: []string{"PATH=/usr/bin:/bin"}}, o.on); err != nil {
			t.Fatal(err)
		}
		outs = append(outs, o)
	}
	for i, o := range outs {
		o.wait(t)
		if got := o.String(); got != strings.Repeat("x", 60000)+"|" {
			t.Fatalf("process %d gave %d bytes", i, len(got)-1)
		}
	}
}

// TestClientAgentGone: calls on a client whose agent ended fail with
// ErrGone; a process still running is told so.
func TestClientAgentGone(t *testing.T) {
	reqR, reqW := io.Pipe()
	evR, evW := io.Pipe()
	c := NewClient(reqW, evR)
	go func() { _ = agent.Serve(reqR, evW) }()
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()
	o := newOutput()
	if _, err := c.Start(ctx, agent.Request{Args: []string{"sleep", "600"}, Env: []string{"PATH=/usr/bin:/bin"}}, o.on); err != nil {
		t.Fatal(err)
	}
	evW.Close() // the sandbox's end goes away
	if ev := o.wait(t); ev.Type != agent.EvError {
		t.Fatalf("%+v", ev)
	}
	if _, err := c.Call(ctx, agent.Request{Op: agent.OpList}); !errors.Is(err, ErrGone) {
		t.Fatalf("%v", err)
	}
	reqW.Close()
}

// TestErrorKind: the agent's codes as the kinds every door answers by
// (wire.ErrorKind.HTTPStatus).
func TestErrorKind(t *testing.T) {
	for code, want := range map[string]int{agent.CodeNotFound: 404, agent.CodeExists: 409, agent.CodeInvalid: 400,
		agent.CodeDenied: 403, agent.CodeNoSpace: 507, agent.CodeInternal: 500, "something else": 500} {
		if got := (&Error{Code: code}).Kind().HTTPStatus(); got != want {
			t.Errorf("%s: %d, want %d", code, got, want)
		}
	}
}
