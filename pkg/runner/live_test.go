package runner_test

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/live"
	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
	"github.com/sandbox-run/sandbox-run/pkg/local"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// liveBackend is a backend whose live sandboxes are agents served in this
// process (the service's side of them, without the engine).
type liveBackend struct{ runner.Backend }

func (liveBackend) LiveStarter() live.Starter { return inProcess{} }

type inProcess struct{}

type inProcessRun struct {
	req  *io.PipeReader
	done chan struct{}
}

func (inProcess) StartLive(_ context.Context, _ live.StartOptions, req io.Reader, events io.Writer) (live.Running, error) {
	r := &inProcessRun{req: req.(*io.PipeReader), done: make(chan struct{})}
	go func() { _ = agent.Serve(req, events); close(r.done) }()
	return r, nil
}

func (r *inProcessRun) Wait() error                { <-r.done; return nil }
func (r *inProcessRun) Kill()                      { r.req.CloseWithError(io.EOF) }
func (r *inProcessRun) Stats() (live.Stats, error) { return live.Stats{}, nil }
func (r *inProcessRun) DialTCP(context.Context, int) (net.Conn, error) {
	return nil, errors.New("no network here")
}

// TestLiveThroughTheDoor: live sandboxes are the service's, behind its
// door: the key's rate and the server's drain, the maxima, per-key limits
// (429), another key's sandbox (404), bad timeouts (400), and every
// refusal a *runner.Error of its kind.
func TestLiveThroughTheDoor(t *testing.T) {
	app := config.Default()
	app.Live.MaxPerKey = 1
	app.Maximums.MemoryMB = 256
	s := runner.New(runner.Config{App: app}, liveBackend{local.New(newGate())}, quiet(), nil)
	defer s.Stop()
	if s.Live() == nil {
		t.Fatal("no live sandboxes on a backend that starts them")
	}
	ctx := context.Background()
	a := runner.Caller{Key: &runner.Key{APIKey: config.APIKey{ID: "a"}}}
	b := runner.Caller{Key: &runner.Key{APIKey: config.APIKey{ID: "b"}}}
	kind := func(err error) runner.Kind { return runner.KindOf(err) }

	sb, err := s.CreateLive(ctx, a, live.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateLive(ctx, a, live.CreateOptions{}); kind(err) != runner.RateLimited {
		t.Errorf("a second sandbox over max_per_key 1: %v", err)
	}
	if _, err := s.CreateLive(ctx, b, live.CreateOptions{Languages: []string{"no-such-language"}}); kind(err) != runner.Invalid {
		t.Errorf("an unknown language: %v", err)
	}
	if _, err := s.CreateLive(ctx, b, live.CreateOptions{MemoryBytes: 1 << 30}); kind(err) != runner.Invalid {
		t.Errorf("memory over the maximum: %v", err)
	}
	if _, err := s.CreateLive(ctx, b, live.CreateOptions{Timeout: 48 * time.Hour}); kind(err) != runner.Invalid {
		t.Errorf("a timeout over the most: %v", err)
	}
	if _, err := s.CreateLive(ctx, b, live.CreateOptions{Network: []string{"example.com"}}); kind(err) != runner.Invalid {
		t.Errorf("a network on a server that gives none: %v", err)
	}
	if _, err := s.CreateLive(ctx, b, live.CreateOptions{Network: []string{}}); kind(err) != runner.Invalid {
		t.Errorf("an empty allow-list: %v", err)
	}
	if got, err := s.LiveSandbox(a, sb.ID); err != nil || got != sb {
		t.Errorf("its own sandbox: %v", err)
	}
	if _, err := s.LiveSandbox(b, sb.ID); kind(err) != runner.NotFound {
		t.Errorf("another key's sandbox: %v", err)
	}
	if err := s.SetLiveTimeout(a, sb.ID, -time.Second); kind(err) != runner.Invalid {
		t.Errorf("a negative timeout: %v", err)
	}
	if err := s.SetLiveTimeout(a, sb.ID, time.Minute); err != nil {
		t.Errorf("a timeout: %v", err)
	}
	if err := s.KillLive(b, sb.ID); kind(err) != runner.NotFound {
		t.Errorf("another key's kill: %v", err)
	}
	if err := s.KillLive(a, sb.ID); err != nil {
		t.Errorf("kill: %v", err)
	}
	if err := s.KillLive(a, sb.ID); kind(err) != runner.NotFound {
		t.Errorf("a second kill: %v", err)
	}
	s.Drain()
	if _, err := s.CreateLive(ctx, a, live.CreateOptions{}); kind(err) != runner.Draining {
		t.Errorf("while draining: %v", err)
	}
	select {
	case <-s.Stopping():
	default:
		t.Error("Stopping is not closed after Drain")
	}
}

// TestNoLiveSandboxes: a backend that starts none has none, clearly.
func TestNoLiveSandboxes(t *testing.T) {
	s := runner.New(runner.Config{}, local.New(newGate()), quiet(), nil)
	if s.Live() != nil {
		t.Fatal("live sandboxes on a fake executor")
	}
	if _, err := s.CreateLive(context.Background(), runner.Caller{}, live.CreateOptions{}); runner.KindOf(err) != runner.Invalid {
		t.Errorf("create: %v", err)
	}
	for _, err := range []error{s.KillLive(runner.Caller{}, "x"), s.SetLiveTimeout(runner.Caller{}, "x", time.Minute)} {
		if runner.KindOf(err) != runner.NotFound {
			t.Errorf("%v", err)
		}
	}
	if _, err := s.LiveSandbox(runner.Caller{}, "x"); runner.KindOf(err) != runner.NotFound {
		t.Errorf("%v", err)
	}
}

// TestLiveNetworkWithin: a live sandbox's allow-list is within the
// server's network.allow, as a run's is; NetworkMaximum is that list.
func TestLiveNetworkWithin(t *testing.T) {
	app := config.Default()
	app.Network.Allow = []string{"*.example.com"}
	s := runner.New(runner.Config{App: app}, liveBackend{local.New(newGate())}, quiet(), nil)
	defer s.Stop()
	a := runner.Caller{Key: &runner.Key{APIKey: config.APIKey{ID: "a"}}}
	if _, err := s.CreateLive(context.Background(), a, live.CreateOptions{Network: []string{"example.org"}}); runner.KindOf(err) != runner.Invalid {
		t.Errorf("a host outside network.allow: %v", err)
	}
	if got := s.NetworkMaximum(); len(got) != 1 || got[0] != "*.example.com" {
		t.Errorf("NetworkMaximum: %q", got)
	}
}

// TestResolveIsolation: a run's isolation is its own, else its key's
// isolation_min, else the server's default; below the key's minimum it is
// refused (Forbidden), an unknown one is Invalid.
func TestResolveIsolation(t *testing.T) {
	app := config.Default()
	s := runner.New(runner.Config{App: app}, liveBackend{local.New(newGate())}, quiet(), nil)
	defer s.Stop()
	strict := &runner.Key{APIKey: config.APIKey{ID: "s", IsolationMin: config.IsolationGVisor}}
	for _, c := range []struct {
		asked string
		key   *runner.Key
		want  string
		kind  runner.Kind
	}{
		{"", nil, "native", 0},
		{"gvisor", nil, "gvisor", 0},
		{"", strict, "gvisor", 0},
		{"gvisor", strict, "gvisor", 0},
		{"native", strict, "", runner.Forbidden},
		{"firecracker", nil, "", runner.Invalid},
	} {
		req := &wire.ExecuteRequest{Isolation: c.asked}
		err := s.ResolveIsolation(req, c.key)
		if c.kind != 0 {
			if runner.KindOf(err) != c.kind {
				t.Errorf("%q with key %v: %v, want kind %v", c.asked, c.key != nil, err, c.kind)
			}
			continue
		}
		if err != nil || req.Isolation != c.want {
			t.Errorf("%q with key %v: %q %v, want %q", c.asked, c.key != nil, req.Isolation, err, c.want)
		}
	}
	app.Isolation.Default = config.IsolationGVisor
	s2 := runner.New(runner.Config{App: app}, liveBackend{local.New(newGate())}, quiet(), nil)
	defer s2.Stop()
	req := &wire.ExecuteRequest{}
	if err := s2.ResolveIsolation(req, nil); err != nil || req.Isolation != "gvisor" {
		t.Errorf("the server's default: %q %v", req.Isolation, err)
	}
}

// TestLiveIdlePause: a live sandbox's idle pause is its create's, else its
// key's live_idle_pause_seconds, else the server's live.idle_pause_seconds.
func TestLiveIdlePause(t *testing.T) {
	app := config.Default()
	app.Live.IdlePauseSeconds = 30
	s := runner.New(runner.Config{App: app}, liveBackend{local.New(newGate())}, quiet(), nil)
	defer s.Stop()
	ctx := context.Background()
	keyed := runner.Caller{Key: &runner.Key{APIKey: config.APIKey{ID: "k", LiveIdlePauseSeconds: 60}}}
	plain := runner.Caller{Key: &runner.Key{APIKey: config.APIKey{ID: "p"}}}
	for _, c := range []struct {
		who  runner.Caller
		asks time.Duration
		want time.Duration
	}{
		{plain, 0, 30 * time.Second},
		{keyed, 0, 60 * time.Second},
		{keyed, 5 * time.Second, 5 * time.Second},
	} {
		sb, err := s.CreateLive(ctx, c.who, live.CreateOptions{IdlePause: c.asks})
		if err != nil {
			t.Fatal(err)
		}
		if sb.IdlePause != c.want {
			t.Errorf("%s asking %v: idle pause %v, want %v", c.who.Tenant(), c.asks, sb.IdlePause, c.want)
		}
		s.Live().Kill(c.who.Tenant(), sb.ID)
	}
}

// gvisorBackend is liveBackend on a host that says it has gVisor.
type gvisorBackend struct{ liveBackend }

func (gvisorBackend) LiveIsolations() []string { return []string{config.IsolationGVisor} }

// TestLiveIsolation: a live sandbox's isolation is its create's, else its
// key's isolation_min, else gVisor for the code interpreter's templates
// (with a network too), else native; gVisor on a host without it is
// Invalid.
func TestLiveIsolation(t *testing.T) {
	app := config.Default()
	app.Network.Allow = []string{"*.example.com"}
	s := runner.New(runner.Config{App: app}, gvisorBackend{liveBackend{local.New(newGate())}}, quiet(), nil)
	defer s.Stop()
	ctx := context.Background()
	who := runner.Caller{Key: &runner.Key{APIKey: config.APIKey{ID: "k"}}}
	net := []string{"a.example.com"}
	for _, c := range []struct {
		o    live.CreateOptions
		want string
	}{
		{live.CreateOptions{}, ""},
		{live.CreateOptions{Network: net}, ""},
		{live.CreateOptions{Template: "code-interpreter-v1"}, "gvisor"},
		{live.CreateOptions{Template: "code-interpreter-v1", Network: net}, "gvisor"},
		{live.CreateOptions{Template: "code-interpreter-v1", Isolation: "native"}, ""},
		{live.CreateOptions{Isolation: "gvisor", Network: net}, "gvisor"},
	} {
		sb, err := s.CreateLive(ctx, who, c.o)
		if err != nil {
			t.Fatalf("%+v: %v", c.o, err)
		}
		if sb.Isolation != c.want {
			t.Errorf("%+v: isolation %q, want %q", c.o, sb.Isolation, c.want)
		}
		s.Live().Kill(who.Tenant(), sb.ID)
	}
	plain := runner.New(runner.Config{App: app}, liveBackend{local.New(newGate())}, quiet(), nil)
	defer plain.Stop()
	if _, err := plain.CreateLive(ctx, who, live.CreateOptions{Isolation: "gvisor"}); runner.KindOf(err) != runner.Invalid {
		t.Errorf("gVisor on a host without it: %v", err)
	}
	if sb, err := plain.CreateLive(ctx, who, live.CreateOptions{Template: "code-interpreter-v1"}); err != nil || sb.Isolation != "" {
		t.Errorf("the code interpreter on a host without gVisor: %v", err)
	}
}
