// Package runner is the run service: the one path from a checked request to
// the executor that every transport takes (HTTP sync, SSE, WebSocket and
// async jobs, MCP over stdio and /mcp, and next the cluster's workers).
//
// It owns admission (one pool of Workers runs at a time, at most Queue more
// waiting, the rest refused at once), the shutdown drain, the key's compile
// cache and automatic timeouts (Run.Tenant), the response budget's
// default, the classification of failures into the errors every transport
// maps to its own answers (Error), and one log line and the metrics of
// every run. It knows nothing of HTTP: a transport decodes, calls Run and
// encodes.
package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/live"
	"github.com/sandbox-run/sandbox-run/pkg/metrics"
	"github.com/sandbox-run/sandbox-run/pkg/secrets"
	"github.com/sandbox-run/sandbox-run/pkg/sessions"
	"github.com/sandbox-run/sandbox-run/pkg/webhook"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// Config sets up a Service.
type Config struct {
	// Workers is how many runs go at once (at least 1); Queue how many more
	// may wait for a worker before the next is refused.
	Workers, Queue int
	// MaxResponseBytes is the response budget of a run that sets none.
	MaxResponseBytes int64
	// LogCode logs each run's code and output (at debug level).
	LogCode bool
	// App is the application's configuration: the maximums and session
	// settings the service checks requests and sessions against.
	App config.Config
	// SessionDir keeps the sessions' metadata on disk, so that they
	// survive a restart; "" keeps them in memory (MCP over stdio).
	SessionDir string
	// LiveDir keeps the live sandboxes' records, so that they outlive the
	// process (a restart takes them over); "": they end with it.
	LiveDir string
	// NoLive: the service keeps no live sandboxes, whatever its backend
	// (an API node of a cluster: they live on its workers).
	NoLive bool
	// LiveRegistry, when set, learns of the live sandboxes (a worker's
	// record of them in its cluster).
	LiveRegistry live.Registry
	// LiveSnapshots, when set, keeps the live sandboxes' snapshots where
	// every node of a cluster finds them (its object store): an API node
	// lists and deletes them there, a worker keeps and takes them there.
	LiveSnapshots live.SnapshotStore
	// Secrets keeps each key's secrets (nil: the service keeps none, and
	// refuses runs that name some); SecretsErr is why there is none when
	// there should be one (its key could not be read).
	Secrets    *secrets.Store
	SecretsErr error
}

// Service runs requests for every transport.
type Service struct {
	cfg     Config
	x       Backend
	log     *slog.Logger
	metrics *metrics.Metrics

	slots     chan struct{}
	queued    atomic.Int64
	draining  atomic.Bool
	drained   chan struct{} // closed by Drain
	drainOnce sync.Once

	sessions SessionStore
	// sessionX, when set, is the sessions' files and runs elsewhere (a
	// cluster's workers) instead of the backend's.
	sessionX SessionExecutor

	// jobs is where async work waits (UseJobs).
	jobs JobStore

	// remote, when set, runs every run elsewhere (UseRemote).
	remote Remote
	// hooks checks callback URLs (CheckCallback) as the configuration says.
	hooks *webhook.Sender
	// live keeps the live sandboxes (nil: the backend starts none).
	live *live.Manager
}

// New builds the service over x; m are the metrics it counts in (a fresh
// set when nil).
func New(cfg Config, x Backend, log *slog.Logger, m *metrics.Metrics) *Service {
	cfg.Workers = max(cfg.Workers, 1)
	s := &Service{cfg: cfg, x: x, log: log, slots: make(chan struct{}, cfg.Workers), hooks: CallbackSender(cfg.App, ""),
		drained: make(chan struct{})}
	if m == nil {
		m = metrics.NewMetrics(func() float64 { return float64(s.queued.Load()) })
	}
	s.metrics = m
	if cfg.SecretsErr != nil {
		log.Error("the secret store cannot open: runs naming secrets are refused", "err", cfg.SecretsErr)
	}
	// An execution admitted before its session ended may still be queued
	// or running: ended sessions' directories are watched that long.
	s.sessions = sessions.Open(cfg.SessionDir, SessionLinger(cfg.App.Maximums), log)
	if ls, ok := x.(LiveStarter); ok && !cfg.NoLive {
		if st := ls.LiveStarter(); st != nil {
			s.live = live.NewManager(st, s.liveConfig())
			if n := s.live.Reattached(); n > 0 {
				log.Info("live sandboxes taken over", "count", n)
			}
		}
	}
	return s
}

// Backend is the backend the service runs on, for what is not a run
// (languages, sessions' files, validation).
func (s *Service) Backend() Backend { return s.x }

// UseRemote makes every run of s go to r (a cluster's workers), after the
// same checks, with r's admission instead of the pool; sess, when set, are
// the sessions' metadata and files there.
func (s *Service) UseRemote(r Remote, store SessionStore, sess SessionExecutor) {
	s.remote = r
	s.live = nil // live sandboxes live on workers: not here
	if store != nil {
		s.sessions, s.sessionX = store, sess
	}
}

// Remote is where s sends its runs, or nil.
func (s *Service) Remote() Remote { return s.remote }

// Languages are the languages the backend knows, installed or not.
func (s *Service) Languages() []Language { return s.x.Languages() }

// Lookup finds a language by name or alias.
func (s *Service) Lookup(name string) (Language, bool) { return s.x.Lookup(name) }

// Resolve finds the installed version of a language (Backend.Resolve).
func (s *Service) Resolve(name, version string) (Language, Version, error) {
	return s.x.Resolve(name, version)
}

// Metrics are the collectors the service counts in.
func (s *Service) Metrics() *metrics.Metrics { return s.metrics }

// Workers is the size of the pool.
func (s *Service) Workers() int { return s.cfg.Workers }

// InFlight is how many runs hold a worker now.
func (s *Service) InFlight() int { return len(s.slots) }

// Queued is how many runs wait for a worker.
func (s *Service) Queued() int64 { return s.queued.Load() }

// HasRoom says whether a run would be admitted now (a free worker or room
// in the queue).
func (s *Service) HasRoom() bool {
	return s.InFlight() < s.cfg.Workers || s.queued.Load() < int64(s.cfg.Queue)
}

// Drain refuses every run from now on (ErrDraining); runs admitted before
// go on. Transports stop accepting and wait for their runs themselves.
func (s *Service) Drain() {
	s.draining.Store(true)
	s.drainOnce.Do(func() { close(s.drained) })
}

// Stopping is closed once Drain was called: what holds a connection but is
// no run (a live sandbox's streams) ends then, so that the shutdown does
// not wait for it.
func (s *Service) Stopping() <-chan struct{} { return s.drained }

// Stop ends what outlives the runs: the interpreters of the service's
// sessions (the sessions and their files stay; a session's next cell
// starts a new one; sessions that run elsewhere have none here). A
// transport calls it once it has stopped and its runs are over.
func (s *Service) Stop() {
	switch {
	case s.live == nil:
	case s.cfg.App.Live.EndOnShutdown:
		s.live.Close()
	default:
		s.live.Detach() // they outlive this process when they can
	}
	if x, ok := s.x.(interface{ EndInterpreter(string) }); ok && s.sessionX == nil {
		for _, id := range s.sessions.IDs() {
			x.EndInterpreter(id)
		}
	}
}

// Draining says whether Drain was called.
func (s *Service) Draining() bool { return s.draining.Load() }

// Kind classifies why a run did not produce a result: the one kind every
// layer and transport shares (wire.ErrorKind).
type Kind = wire.ErrorKind

// The kinds of Error (wire's, by the names the run service's callers use).
const (
	Invalid      = wire.KindInvalid
	QueueFull    = wire.KindQueueFull
	Busy         = wire.KindBusy
	Draining     = wire.KindDraining
	Full         = wire.KindFull
	Canceled     = wire.KindCanceled
	Internal     = wire.KindInternal
	Unauthorized = wire.KindUnauthorized
	Forbidden    = wire.KindForbidden
	Unsupported  = wire.KindUnsupported
	RateLimited  = wire.KindRateLimited
	Unavailable  = wire.KindUnavailable
	NotFound     = wire.KindNotFound
	Exists       = wire.KindExists
)

// Error is a run that produced no result, classified once for every
// transport (wire.Error).
type Error = wire.Error

// KindOf is the Kind of err (0 when it is no *Error).
func KindOf(err error) Kind { return wire.KindOf(err) }

// Run is one execution to run.
type Run struct {
	// Request is the request, checked (Check, CheckLanguage) and its
	// stored files and session resolved.
	Request *wire.ExecuteRequest
	// Stdin, when set, is the program's whole stdin (input_data included:
	// see Input), read as the program reads; nil: input_data.
	Stdin io.Reader
	// Stdout and Stderr receive the program's output live, CompileOutput
	// the compiler's; Progress, lines of text on what the run waits for
	// before it starts (a toolchain cache being prepared), every few
	// seconds.
	Stdout, Stderr, CompileOutput, Progress io.Writer
	// CompileMemoryBytes bounds the compile step's memory (Piston's
	// compile_memory_limit); 0 is the language's.
	CompileMemoryBytes int64
	// Local, when set, is given the backend's own form of the request
	// before it runs (the CLI's trace of the executor's decisions).
	Local func(any)
	// Prepared is the backend's own: what its Prepare made of the run,
	// for its Execute (so that the request is mapped and its language
	// and image found once per run).
	Prepared any
	// Tenant is whose compile cache and automatic timeouts the run uses
	// (the API key's id; "" for a keyless server and the CLI).
	Tenant string
	// Via names the transport, for the log ("rest", "sse", "ws", "job",
	// "mcp", "cli").
	Via string
	// Interactive says Stdin is live (a WebSocket client's): on a cluster
	// it is sent to the worker as it comes.
	Interactive bool
	// Session, when set, is logged with the run.
	Session string
	// OnStart, if set, is called once a worker is free, just before the
	// run starts.
	OnStart func()
	// Secrets are the secrets the request names, with their values: the
	// service takes them from its store as the run starts (never before,
	// never kept with the request).
	Secrets []secrets.Secret
}

// Run waits for a worker, runs r and records it: one log line and the
// metrics. ctx bounds the wait and the run: when it ends, the backend
// kills the sandbox. A run that produced no result returns an *Error.
func (s *Service) Run(ctx context.Context, r Run) (*wire.Result, error) {
	if s.draining.Load() {
		s.metrics.Rejected.WithLabelValues("shutdown").Inc()
		return nil, &Error{Kind: Draining, Msg: "the server is shutting down"}
	}
	req := *r.Request
	if req.MaxResponseBytes == 0 {
		req.MaxResponseBytes = s.cfg.MaxResponseBytes
	}
	r.Request = &req
	queued := time.Now()
	if s.remote != nil {
		s.metrics.InFlight.Inc()
		defer s.metrics.InFlight.Dec()
		res, err := s.remote.Run(ctx, &r)
		if err != nil {
			return nil, s.failed(ctx, err)
		}
		s.observe(r, res, time.Since(queued), time.Since(queued))
		return res, nil
	}
	// The secrets' values as the run is handed to the backend.
	if err := s.openSecrets(&r); err != nil {
		return nil, s.failed(ctx, err)
	}
	// An image is pulled (or found in the store) before the run waits for a
	// worker: a slow pull holds none.
	s.x.Prepare(ctx, &r)
	release, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	s.metrics.QueueWait.Observe(time.Since(queued).Seconds())
	s.metrics.InFlight.Inc()
	defer s.metrics.InFlight.Dec()
	if r.OnStart != nil {
		r.OnStart()
	}
	start := time.Now()
	res, err := s.x.Execute(ctx, &r)
	if err != nil {
		return nil, s.failed(ctx, err)
	}
	s.observe(r, res, time.Since(queued), time.Since(start))
	return res, nil
}

// acquire waits for a free worker; it refuses at once when Queue runs
// wait already. release is idempotent.
func (s *Service) acquire(ctx context.Context) (release func(), err error) {
	var once sync.Once
	release = func() { once.Do(func() { <-s.slots }) }
	select {
	case s.slots <- struct{}{}:
		return release, nil
	default:
	}
	if s.queued.Add(1) > int64(s.cfg.Queue) {
		s.queued.Add(-1)
		s.metrics.Rejected.WithLabelValues("queue_full").Inc()
		return nil, &Error{Kind: QueueFull, Msg: fmt.Sprintf("all %d workers are busy and %d executions are queued; retry later", s.cfg.Workers, s.cfg.Queue)}
	}
	defer s.queued.Add(-1)
	select {
	case s.slots <- struct{}{}:
		return release, nil
	case <-ctx.Done():
		return nil, &Error{Kind: Canceled, Msg: "execution canceled while waiting for a worker", Err: ctx.Err()}
	}
}

// failed counts a backend's refusal and makes sure it is an *Error: a run
// whose context ended is Canceled, whatever the backend made of it.
func (s *Service) failed(ctx context.Context, err error) error {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Kind: Internal, Msg: "execution failed: " + err.Error(), Err: err}
	}
	switch {
	case e.Kind == Invalid:
		s.metrics.Rejected.WithLabelValues("invalid").Inc()
	case ctx.Err() != nil:
		return &Error{Kind: Canceled, Msg: "execution canceled", Err: err}
	case e.Kind == Busy:
		s.metrics.Rejected.WithLabelValues("busy").Inc()
	case e.Kind == QueueFull:
		s.metrics.Rejected.WithLabelValues("queue_full").Inc()
	case e.Kind == Internal:
		s.log.Error("execution failed", "error", err)
	}
	return e
}

// observe logs one line per run and updates the metrics.
func (s *Service) observe(r Run, res *wire.Result, total, run time.Duration) {
	s.metrics.Executions.WithLabelValues(res.Language, string(res.Status)).Inc()
	s.metrics.Duration.WithLabelValues(res.Language).Observe(run.Seconds())
	if res.LimitReason != "" {
		s.metrics.LimitKills.WithLabelValues(res.LimitReason).Inc()
	}
	if n := res.Network; n != nil {
		s.metrics.Network.WithLabelValues("allowed").Add(float64(n.Allowed))
		s.metrics.Network.WithLabelValues("denied").Add(float64(n.Denied))
		s.metrics.NetworkBytes.WithLabelValues("out").Add(float64(n.BytesOut))
		s.metrics.NetworkBytes.WithLabelValues("in").Add(float64(n.BytesIn))
	}
	attrs := []any{"execution_id", res.ExecutionID, "language", res.Language, "status", res.Status,
		"exit_code", res.ExitCode, "duration_ms", res.DurationMs, "cpu_time_ms", res.CPUTimeMs,
		"memory_used_mb", res.MemoryUsedMB, "queue_wait_ms", (total - run).Milliseconds(), "total_ms", total.Milliseconds()}
	if r.Via != "" {
		attrs = append(attrs, "via", r.Via)
	}
	if r.Tenant != "" {
		attrs = append(attrs, "key_id", r.Tenant)
	}
	if r.Session != "" {
		attrs = append(attrs, "session_id", r.Session)
	}
	if res.LimitReason != "" {
		attrs = append(attrs, "limit", res.LimitReason)
	}
	if res.Compile != nil {
		attrs = append(attrs, "compile_status", res.Compile.Status, "compile_ms", res.Compile.DurationMs)
	}
	if n := res.Network; n != nil {
		attrs = append(attrs, "network_allowed", n.Allowed, "network_denied", n.Denied, "network_bytes_out", n.BytesOut, "network_bytes_in", n.BytesIn)
	}
	switch {
	case res.Status == wire.StatusSetupError:
		s.log.Error("execution", append(attrs, "error", res.Error)...)
	case s.cfg.LogCode:
		s.log.Debug("execution", append(attrs, "code", r.Request.Code, "stdout", res.Stdout, "stderr", res.Stderr)...)
	default:
		s.log.Info("execution", attrs...)
	}
}

// SessionLinger is how long ended sessions' files are watched: a run
// admitted before the end may still be queued or running, within the
// maximums mx.
func SessionLinger(mx config.LimitSet) time.Duration {
	return max(10*time.Minute, time.Duration((mx.TimeoutSeconds+mx.CompileTimeoutSeconds)*float64(time.Second))+5*time.Minute)
}
