package live

import (
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
)

// inProcess starts "sandboxes" that are agents served in this process: the
// Manager's bookkeeping without the engine (TestManagerExecutor has it).
type inProcess struct{ started atomic.Int32 }

type inProcessRun struct {
	req  *io.PipeReader
	done chan struct{}
}

func (p *inProcess) StartLive(_ context.Context, _ StartOptions, req io.Reader, events io.Writer) (Running, error) {
	p.started.Add(1)
	r := &inProcessRun{req: req.(*io.PipeReader), done: make(chan struct{})}
	go func() { _ = agent.Serve(req, events); close(r.done) }()
	return r, nil
}

func (r *inProcessRun) Wait() error           { <-r.done; return nil }
func (r *inProcessRun) Kill()                 { r.req.CloseWithError(io.EOF) }
func (r *inProcessRun) Stats() (Stats, error) { return Stats{}, errors.New("no cgroup in process") }
func (r *inProcessRun) DialTCP(ctx context.Context, port int) (net.Conn, error) {
	return nil, errors.New("no network namespace in process")
}

func runIn(t *testing.T, s *Sandbox, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()
	o := newOutput()
	if _, err := s.Client().Start(ctx, agent.Request{Args: args, Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin"}}, o.on); err != nil {
		t.Fatal(err)
	}
	ev := o.wait(t)
	code := -2
	if ev.Exit != nil {
		code = *ev.Exit
	}
	return o.String(), code
}

func waitEnded(t *testing.T, s *Sandbox) {
	t.Helper()
	select {
	case <-s.Done():
	case <-time.After(bounded):
		t.Fatalf("sandbox %s did not end", s.ID)
	}
}

// TestManagerOwners: a sandbox answers its owner; to anyone else it does
// not exist (get, list, kill, timeout).
func TestManagerOwners(t *testing.T) {
	m := NewManager(&inProcess{}, Config{})
	t.Cleanup(m.Close)
	ctx := context.Background()
	a, err := m.Create(ctx, "alice", CreateOptions{Metadata: map[string]string{"k": "v"}, Template: "base"})
	if err != nil {
		t.Fatal(err)
	}
	if out, code := runIn(t, a, "echo", "hi"); out != "hi\n|" || code != 0 {
		t.Fatalf("%q %d", out, code)
	}
	if got, err := m.Get("alice", a.ID); err != nil || got != a || got.Metadata["k"] != "v" {
		t.Fatalf("%v %v", got, err)
	}
	if l := m.List("alice"); len(l) != 1 || l[0] != a {
		t.Fatalf("list: %v", l)
	}
	for name, err := range map[string]error{
		"get": func() error { _, err := m.Get("bob", a.ID); return err }(), "kill": m.Kill("bob", a.ID),
		"timeout": m.SetTimeout("bob", a.ID, time.Hour),
	} {
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("bob's %s of alice's sandbox: %v", name, err)
		}
	}
	if l := m.List("bob"); len(l) != 0 {
		t.Fatalf("bob lists %v", l)
	}
	if err := m.Kill("alice", a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Get("alice", a.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a killed sandbox: %v", err)
	}
	if _, err := a.Client().Call(ctx, agent.Request{Op: agent.OpList}); !errors.Is(err, ErrGone) {
		t.Fatalf("a call on a killed sandbox: %v", err)
	}
}

// TestManagerTimeouts: a sandbox ends when its timeout passes; a timeout
// set again moves its end.
func TestManagerTimeouts(t *testing.T) {
	m := NewManager(&inProcess{}, Config{MaxTimeout: 2 * time.Hour})
	t.Cleanup(m.Close)
	ctx := context.Background()
	short, err := m.Create(ctx, "k", CreateOptions{Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	kept, err := m.Create(ctx, "k", CreateOptions{Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SetTimeout("k", kept.ID, time.Hour); err != nil {
		t.Fatal(err)
	}
	if end := kept.End(); time.Until(end) < 50*time.Minute {
		t.Fatalf("end %v", end)
	}
	waitEnded(t, short)
	if _, err := m.Get("k", short.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a sandbox past its timeout: %v", err)
	}
	time.Sleep(4 * time.Second) // past its first timeout
	if _, err := m.Get("k", kept.ID); err != nil {
		t.Fatalf("the sandbox whose timeout was set again: %v", err)
	}
	if _, err := m.Create(ctx, "k", CreateOptions{Timeout: 3 * time.Hour}); err == nil {
		t.Fatal("a timeout over the most was taken")
	}
	if err := m.SetTimeout("k", kept.ID, 3*time.Hour); err == nil {
		t.Fatal("a timeout over the most was set")
	}
}

// TestManagerLimits: one key's count, the server's count and the memory
// of all; a sandbox ended gives its place back; a closed manager refuses.
func TestManagerLimits(t *testing.T) {
	m := NewManager(&inProcess{}, Config{MaxPerOwner: 2, MaxTotal: 3, MaxMemoryBytes: 5 << 20, DefaultMemoryBytes: 1 << 20})
	ctx := context.Background()
	var a []*Sandbox
	for range 2 {
		s, err := m.Create(ctx, "a", CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		a = append(a, s)
	}
	var le *LimitError
	if _, err := m.Create(ctx, "a", CreateOptions{}); !errors.As(err, &le) || le.Full {
		t.Fatalf("a third of one key's: %v", err)
	}
	b, err := m.Create(ctx, "b", CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, "c", CreateOptions{}); !errors.As(err, &le) || !le.Full {
		t.Fatalf("past the server's count: %v", err)
	}
	if err := m.Kill("b", b.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, "c", CreateOptions{MemoryBytes: 4 << 20}); !errors.As(err, &le) || !le.Full {
		t.Fatalf("past the memory of all: %v", err)
	}
	c, err := m.Create(ctx, "c", CreateOptions{MemoryBytes: 3 << 20})
	if err != nil {
		t.Fatalf("within the memory of all: %v", err)
	}
	m.Close()
	for _, s := range append(a, c) {
		waitEnded(t, s)
	}
	if _, err := m.Create(ctx, "a", CreateOptions{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}
