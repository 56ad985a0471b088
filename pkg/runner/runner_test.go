package runner_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/local"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// gate is an executor whose runs wait until released, so that a test
// decides who holds a worker; err, when set, is what a run returns.
type gate struct {
	mu      sync.Mutex
	started chan string
	release chan struct{}
	err     error
	last    *executor.Request // the last run's request
}

func newGate() *gate { return &gate{started: make(chan string, 16), release: make(chan struct{})} }

func (g *gate) Execute(ctx context.Context, req *executor.Request) (*executor.Result, error) {
	g.started <- string(req.Code)
	g.mu.Lock()
	g.last = req
	err := g.err
	g.mu.Unlock()
	if err != nil {
		return nil, err
	}
	select {
	case <-g.release:
	case <-ctx.Done():
		return &executor.Result{Outcome: executor.Outcome{Status: executor.StatusTimeout, LimitReason: "canceled"}, Language: "bash"}, nil
	}
	return &executor.Result{ExecutionID: "x-" + string(req.Code), Outcome: executor.Outcome{Status: executor.StatusCompleted}, Language: "bash"}, nil
}

func (g *gate) Registry() *executor.Registry { return nil }

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func run(s *runner.Service, ctx context.Context, code string) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := s.Run(ctx, runner.Run{Request: &wire.ExecuteRequest{Language: "bash", Code: code}, Via: "test"})
		done <- err
	}()
	return done
}

// TestAdmission: Workers runs go at once, Queue more wait, the next is
// refused at once (QueueFull); a queued run whose context ends leaves the
// queue (Canceled); the gauges and counters say so.
func TestAdmission(t *testing.T) {
	g := newGate()
	s := runner.New(runner.Config{Workers: 2, Queue: 1}, local.New(g), quiet(), nil)
	a, b := run(s, context.Background(), "a"), run(s, context.Background(), "b")
	<-g.started
	<-g.started
	if s.InFlight() != 2 || !s.HasRoom() {
		t.Fatalf("in flight %d, room %v: want 2 and room in the queue", s.InFlight(), s.HasRoom())
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := run(s, ctx, "c")
	for s.Queued() != 1 {
		time.Sleep(time.Millisecond)
	}
	if s.HasRoom() {
		t.Fatal("room with every worker busy and the queue full")
	}
	if err := <-run(s, context.Background(), "d"); runner.KindOf(err) != runner.QueueFull || !runner.KindOf(err).Retryable() {
		t.Fatalf("a run past the queue: %v (kind %d), want runner.QueueFull", err, runner.KindOf(err))
	}
	cancel()
	if err := <-c; runner.KindOf(err) != runner.Canceled {
		t.Fatalf("a canceled queued run: %v, want runner.Canceled", err)
	}
	close(g.release)
	for _, ch := range []<-chan error{a, b} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	if s.InFlight() != 0 || s.Queued() != 0 {
		t.Fatalf("after the runs: in flight %d, queued %d", s.InFlight(), s.Queued())
	}
	m := s.Metrics()
	if got := testutil.ToFloat64(m.Executions.WithLabelValues("bash", "completed")); got != 2 {
		t.Errorf("executions_total{completed} = %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.Rejected.WithLabelValues("queue_full")); got != 1 {
		t.Errorf("rejected{queue_full} = %v, want 1", got)
	}
}

// TestDrain: after Drain no run is admitted; one running goes on.
func TestDrain(t *testing.T) {
	g := newGate()
	s := runner.New(runner.Config{Workers: 1, Queue: 4}, local.New(g), quiet(), nil)
	a := run(s, context.Background(), "a")
	<-g.started
	s.Drain()
	if err := <-run(s, context.Background(), "b"); runner.KindOf(err) != runner.Draining || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("a run while draining: %v", err)
	}
	close(g.release)
	if err := <-a; err != nil {
		t.Fatalf("the run admitted before the drain: %v", err)
	}
}

// TestRunSetsTenantAndBudget: the run carries its tenant and, when it
// sets none, the service's response budget; OnStart comes before the run.
func TestRunSetsTenantAndBudget(t *testing.T) {
	g := newGate()
	close(g.release)
	s := runner.New(runner.Config{Workers: 1, MaxResponseBytes: 1 << 20}, local.New(g), quiet(), nil)
	req := &wire.ExecuteRequest{Language: "bash", Code: "x"}
	started := false
	if _, err := s.Run(context.Background(), runner.Run{Request: req, Tenant: "k1", OnStart: func() { started = len(g.started) == 0 }}); err != nil {
		t.Fatal(err)
	}
	if req := g.last; req.Tenant != "k1" || req.MaxResponseBytes != 1<<20 || !started {
		t.Fatalf("tenant %q, budget %d, OnStart before the run %v", req.Tenant, req.MaxResponseBytes, started)
	}
}
