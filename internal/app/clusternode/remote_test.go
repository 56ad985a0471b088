package clusternode

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/testkit/natstest"
	"github.com/sandbox-run/sandbox-run/pkg/cluster"
	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
	"github.com/sandbox-run/sandbox-run/pkg/local"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

func TestMain(m *testing.M) {
	// A sandbox's PID 1 is this test binary re-executed (TestCluster's
	// worker runs real sandboxes): Init must come first.
	sandbox.Init()
	agent.Main() // and a live sandbox's agent (live_test.go)
	os.Exit(m.Run())
}

// syncWriter collects what a run streams.
type syncWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestCluster: the run service on both sides of a cluster, with real
// sandboxes: an API node's service (no engine) sends its runs, streams,
// stdin and sessions to a worker's service, and says the worker's
// refusals in its own terms.
func TestCluster(t *testing.T) {
	ctx, connect, cfg, urls := clusterSetup(t, 2*time.Minute)

	// The worker: a service over a real executor.
	wx, err := local.NewExecutor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	wsvc := runner.New(runner.ConfigFrom(cfg), local.New(wx), quiet(), nil)
	wctx, stopWorker := context.WithCancel(ctx)
	worked := make(chan error, 1)
	go func() {
		worked <- connect("worker").WorkWith(wctx, cluster.WorkOptions{Slots: 2, Run: runJob(wsvc, &cfg), Sessions: wx, Log: quiet()})
	}()
	defer func() { stopWorker(); <-worked }()

	// The API node: a service over an executor without an engine.
	acfg := cfg
	acfg.DataDir = t.TempDir()
	acfg.NATS = config.NATS{URLs: urls, Role: config.RoleAPI}
	ax, err := local.NewExecutor(acfg)
	if err != nil {
		t.Fatal(err)
	}
	if ax.Engine() != nil {
		t.Fatal("an API node's executor has an engine")
	}
	api := runner.New(runner.ConfigFrom(acfg), local.New(ax), quiet(), nil)
	ac := connect("api")
	sess, err := ac.Sessions(ctx, time.Minute, quiet())
	if err != nil {
		t.Fatal(err)
	}
	api.UseRemote(Remote(ac, 0, sess, acfg, quiet()), sess, sess)
	if api.Remote() == nil {
		t.Fatal("Remote()")
	}
	waitWorkers(ctx, t, ac, 1, worked)

	runWire := func(req *wire.ExecuteRequest, run *runner.Run, interactive bool) (*wire.Result, error) {
		if run == nil {
			run = &runner.Run{}
		}
		run.Request, run.Via, run.Interactive = req, "test", interactive
		return api.Run(ctx, *run)
	}

	t.Run("run and stream", func(t *testing.T) {
		req := &wire.ExecuteRequest{Language: "bash", Code: "echo out; echo err >&2"}
		var out, errw syncWriter
		res, err := runWire(req, &runner.Run{Stdout: &out, Stderr: &errw}, false)
		if err != nil || res.Status != wire.StatusCompleted || res.Stdout != "out\n" || !strings.HasPrefix(res.ExecutionID, "exec_") {
			t.Fatalf("%+v %v", res, err)
		}
		if out.String() != "out\n" || errw.String() != "err\n" {
			t.Fatalf("streamed %q %q", out.String(), errw.String())
		}
	})

	t.Run("stdin", func(t *testing.T) {
		req := &wire.ExecuteRequest{Language: "bash", Code: "cat", InputData: "ignored: stdin comes whole from the transport"}
		res, err := runWire(req, &runner.Run{Stdin: strings.NewReader("from the client\n")}, true)
		if err != nil || res.Stdout != "from the client\n" {
			t.Fatalf("%+v %v", res, err)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		// The worker checks against its own configuration.
		_, err := runWire(&wire.ExecuteRequest{Language: "cobol-85", Code: "x"}, nil, false)
		if runner.KindOf(err) != runner.Invalid {
			t.Fatalf("an unknown language: %v", err)
		}
		// Full: 2 slots, no queue.
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := runWire(&wire.ExecuteRequest{Language: "bash", Code: "sleep 1"}, nil, false)
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		full := 0
		for err := range errs {
			if runner.KindOf(err) == runner.QueueFull {
				full++
			} else if err != nil {
				t.Errorf("run: %v", err)
			}
		}
		if full == 0 {
			t.Fatal("4 runs at once on 2 slots with no queue: none refused")
		}
		// Canceled: the caller's context ends.
		cctx, ccancel := context.WithTimeout(ctx, time.Second)
		defer ccancel()
		req := &wire.ExecuteRequest{Language: "bash", Code: "sleep 30"}
		if _, err := api.Run(cctx, runner.Run{Request: req, Via: "test"}); runner.KindOf(err) != runner.Canceled {
			t.Fatalf("canceled: %v", err)
		}
	})

	t.Run("sessions", func(t *testing.T) {
		s, err := api.CreateSession("k", wire.SessionRequest{Language: "bash"})
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range []string{"1\n", "2\n"} {
			req := &wire.ExecuteRequest{Language: "bash", Code: "echo x >> f; wc -l < f", SessionID: s.ID}
			if err := api.UseSession(req, "k"); err != nil {
				t.Fatal(err)
			}
			res, err := runWire(req, nil, false)
			if err != nil || res.Stdout != want {
				t.Fatalf("run %d: %+v %v", i, res, err)
			}
		}
		files, total, err := api.SessionFiles().SessionFiles(s.ID)
		if err != nil || total == 0 || !strings.Contains(strings.TrimSpace(pathsOf(files)), "f") {
			t.Fatalf("files: %v %d %v", files, total, err)
		}
		if got := api.Sessions().List("k"); len(got) != 1 || got[0].ID != s.ID {
			t.Fatalf("list: %v", got)
		}
		if found, err := api.EndSession(s.ID, "k"); !found || err != nil {
			t.Fatalf("end: %v %v", found, err)
		}
		if _, ok := api.Sessions().Get(s.ID, "k"); ok {
			t.Fatal("an ended session is still there")
		}
		if _, err := os.Stat(filepath.Join(cfg.DataDir, "sessions", s.ID)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the worker kept the ended session's files: %v", err)
		}
	})
}

func pathsOf(files []wire.SessionFile) string {
	var b strings.Builder
	for _, f := range files {
		b.WriteString(f.Path + " ")
	}
	return b.String()
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// clusterSetup starts a NATS cluster for a test that runs sandboxes (it
// skips where it cannot), and returns a context bounding the test, a
// connect that opens a node's connection (closed at the end) and a
// configuration of a worker on a fresh data dir sharing the tests'
// toolchain cache, and the cluster's URLs.
func clusterSetup(t *testing.T, d time.Duration) (context.Context, func(name string) *cluster.Conn, config.Config, []string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a NATS cluster and runs sandboxes")
	}
	if _, err := sandbox.Default(); err != nil {
		t.Skipf("cannot sandbox here: %v", err)
	}
	nc := natstest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	connect := func(name string) *cluster.Conn {
		c, err := cluster.Connect(ctx, cluster.Options{URLs: nc.URLList(), Name: name, Insecure: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	data := t.TempDir()
	home, _ := os.UserHomeDir()
	cache := filepath.Join(home, ".cache", "sandbox-run-test", "cache")
	os.MkdirAll(cache, 0o755)
	os.Symlink(cache, filepath.Join(data, "cache"))
	cfg := config.Default()
	cfg.DataDir, cfg.Workers, cfg.Queue, cfg.PoolSize = data, 2, 0, -1
	return ctx, connect, cfg, nc.URLList()
}

// waitWorkers waits (a minute at most) until c lists n workers. worked,
// when not nil, is where a worker's Work returns: one that stopped before
// it announced itself says why.
func waitWorkers(ctx context.Context, t *testing.T, c *cluster.Conn, n int, worked chan error) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; {
		ws, err := c.Workers(ctx)
		if len(ws) == n {
			return
		}
		if worked != nil {
			select {
			case werr := <-worked:
				worked <- werr // for the deferred stop
				t.Fatalf("the worker stopped before it announced itself: %v", werr)
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not %d workers: workers %v, %v", n, ws, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
