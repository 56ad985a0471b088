// Package api is the HTTP face of the executor: the seed contract's
// POST /api/sandbox/execute, languages, health, Prometheus metrics and the
// OpenAPI document, with API keys, rate and concurrency limits and a bounded
// worker pool. Handlers only translate; sandboxing happens in pkg/executor.
package api

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/monitor"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

//go:embed openapi.json
var openAPIDocument []byte

// OpenAPI returns the OpenAPI 3.1 document the server serves.
func OpenAPI() []byte { return openAPIDocument }

// Executor is what the server needs of pkg/executor.
type Executor interface {
	Execute(ctx context.Context, req *executor.Request) (*executor.Result, error)
	Registry() *executor.Registry
}

// Server serves the API.
type Server struct {
	cfg      Config
	x        Executor
	log      *slog.Logger
	metrics  *monitor.Metrics
	pool     *pool
	keys     *keyring
	mux      *http.ServeMux
	draining atomic.Bool
	// methods lists the methods routed for each path, for 405 answers.
	methods map[string][]string

	langOnce sync.Once
	langs    []LanguageInfo
}

// New builds a server; cfg must have passed Validate.
func New(cfg Config, x Executor, log *slog.Logger) *Server {
	s := &Server{cfg: cfg, x: x, log: log, pool: newPool(cfg.Workers, cfg.Queue), keys: newKeyring(cfg.Keys), methods: map[string][]string{}}
	s.metrics = monitor.NewMetrics(func() float64 { return float64(s.pool.queued.Load()) })
	s.mux = http.NewServeMux()
	s.route("POST /api/sandbox/execute", ScopeExecute, s.handleExecute)
	s.route("GET /api/sandbox/languages", ScopeExecute, s.handleLanguages)
	s.route("GET /api/openapi.json", "", s.handleOpenAPI)
	s.route("GET /healthz", "", s.handleHealth)
	s.route("GET /readyz", "", s.handleReady)
	s.route("GET /metrics", ScopeAdmin, s.metrics.Handler().ServeHTTP)
	s.route("/", "", func(w http.ResponseWriter, r *http.Request) {
		// The catch-all matches every method, so ServeMux's own 405 never
		// happens: answer it here, in JSON like every other error.
		if methods, ok := s.methods[r.URL.Path]; ok {
			w.Header().Set("Allow", strings.Join(methods, ", "))
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s (allowed: %s)", r.Method, r.URL.Path, strings.Join(methods, ", ")))
			return
		}
		writeError(w, http.StatusNotFound, "no such endpoint: "+r.Method+" "+r.URL.Path)
	})
	return s
}

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.mux }

// route registers a handler behind auth (scope "" is public) and counts
// its answers.
func (s *Server) route(pattern, scope string, h http.HandlerFunc) {
	if method, path, ok := strings.Cut(pattern, " "); ok {
		s.methods[path] = append(s.methods[path], method)
		if method == http.MethodGet {
			s.methods[path] = append(s.methods[path], http.MethodHead)
		}
	}
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		defer func() { s.metrics.Requests.WithLabelValues(pattern, fmt.Sprint(rec.status)).Inc() }()
		if scope != "" {
			key, status, msg := s.keys.authenticate(r, scope)
			if status != 0 {
				if status == http.StatusUnauthorized {
					rec.Header().Set("WWW-Authenticate", `Bearer realm="sandbox-run"`)
				}
				writeError(rec, status, msg)
				return
			}
			r = r.WithContext(context.WithValue(r.Context(), keyCtx{}, key))
		}
		h(rec, r)
	})
}

type keyCtx struct{}

func keyOf(r *http.Request) *apiKey {
	k, _ := r.Context().Value(keyCtx{}).(*apiKey)
	return k
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (s *Server) handleExecute(w http.ResponseWriter, r *http.Request) {
	if err := checkContentType(r); err != nil {
		s.reject(w, err, "content_type")
		return
	}
	if r.ContentLength > s.cfg.MaxBodyBytes {
		s.reject(w, &requestError{http.StatusRequestEntityTooLarge, fmt.Sprintf("request body of %d bytes is larger than %d", r.ContentLength, s.cfg.MaxBodyBytes)}, "too_large")
		return
	}
	req, err := DecodeExecuteRequest(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes), &s.cfg)
	if err != nil {
		s.reject(w, err, "invalid")
		return
	}
	key := keyOf(r)
	if key != nil {
		if wait, ok := key.allow(); !ok {
			retryAfter(w, wait)
			s.reject(w, &requestError{http.StatusTooManyRequests, "rate limit of key " + key.ID + " exceeded"}, "rate_limit")
			return
		}
		if !key.enter() {
			retryAfter(w, time.Second)
			s.reject(w, &requestError{http.StatusTooManyRequests, fmt.Sprintf("key %s has %d executions in flight already", key.ID, key.MaxConcurrent)}, "key_concurrency")
			return
		}
		defer key.leave()
	}
	if s.draining.Load() {
		retryAfter(w, 5*time.Second)
		s.reject(w, &requestError{http.StatusServiceUnavailable, "the server is shutting down"}, "shutdown")
		return
	}
	queued := time.Now()
	release, err := s.pool.acquire(r.Context())
	if err != nil {
		if errors.Is(err, errQueueFull) {
			retryAfter(w, time.Second)
			s.reject(w, &requestError{http.StatusServiceUnavailable, fmt.Sprintf("all %d workers are busy and %d executions are queued; retry later", s.cfg.Workers, s.cfg.Queue)}, "queue_full")
			return
		}
		// The client went away while queued (nobody reads this), or the
		// server gave up on shutdown: never answer an empty 200.
		retryAfter(w, 5*time.Second)
		writeError(w, http.StatusServiceUnavailable, "canceled while queued: the client went away or the server is shutting down")
		return
	}
	defer release()
	s.metrics.QueueWait.Observe(time.Since(queued).Seconds())
	s.metrics.InFlight.Inc()
	defer s.metrics.InFlight.Dec()

	start := time.Now()
	// r.Context ends when the client disconnects or the server gives up on
	// shutdown; the executor kills the sandbox then.
	res, err := s.x.Execute(r.Context(), req.toExecutor())
	if err != nil {
		var unsupported *executor.UnsupportedLanguageError
		var invalid *executor.InvalidRequestError
		if errors.As(err, &unsupported) || errors.As(err, &invalid) {
			s.reject(w, badRequest("%s", err.Error()), "invalid")
			return
		}
		s.log.Error("execution failed", "error", err)
		writeError(w, http.StatusInternalServerError, "execution failed: "+err.Error())
		return
	}
	s.observe(r, req, res, time.Since(queued), time.Since(start))
	if r.Context().Err() != nil {
		// The client went away (nobody reads this), or the server killed
		// the run at the end of its shutdown grace period: the client is
		// still there and must not get an empty 200.
		retryAfter(w, 5*time.Second)
		writeJSON(w, http.StatusServiceUnavailable, ErrorResponse{Error: "execution canceled: the server is shutting down", ExecutionID: res.ExecutionID})
		return
	}
	status := http.StatusOK
	if res.Status == executor.StatusSetupError {
		// The sandbox itself failed: the one case that is the server's fault.
		status = http.StatusInternalServerError
	}
	writeJSON(w, status, res)
}

// observe logs one line per execution and updates the metrics.
func (s *Server) observe(r *http.Request, req *ExecuteRequest, res *executor.Result, total, run time.Duration) {
	s.metrics.Executions.WithLabelValues(res.Language, string(res.Status)).Inc()
	s.metrics.Duration.WithLabelValues(res.Language).Observe(run.Seconds())
	if res.LimitReason != "" {
		s.metrics.LimitKills.WithLabelValues(res.LimitReason).Inc()
	}
	attrs := []any{"execution_id", res.ExecutionID, "language", res.Language, "status", res.Status,
		"exit_code", res.ExitCode, "duration_ms", res.DurationMs, "cpu_time_ms", res.CPUTimeMs,
		"memory_used_mb", res.MemoryUsedMB, "queue_wait_ms", (total - run).Milliseconds(), "total_ms", total.Milliseconds()}
	if k := keyOf(r); k != nil {
		attrs = append(attrs, "key_id", k.ID)
	}
	if res.LimitReason != "" {
		attrs = append(attrs, "limit", res.LimitReason)
	}
	if res.Compile != nil {
		attrs = append(attrs, "compile_status", res.Compile.Status, "compile_ms", res.Compile.DurationMs)
	}
	switch {
	case res.Status == executor.StatusSetupError:
		s.log.Error("execution", append(attrs, "error", res.Error)...)
	case s.cfg.LogLevel == "debug":
		s.log.Debug("execution", append(attrs, "code", req.Code, "stdout", res.Stdout, "stderr", res.Stderr)...)
	default:
		s.log.Info("execution", attrs...)
	}
}

func (s *Server) reject(w http.ResponseWriter, err error, reason string) {
	s.metrics.Rejected.WithLabelValues(reason).Inc()
	var re *requestError
	if errors.As(err, &re) {
		writeError(w, re.status, re.msg)
		return
	}
	writeError(w, http.StatusBadRequest, err.Error())
}

func (s *Server) handleLanguages(w http.ResponseWriter, r *http.Request) {
	s.langOnce.Do(func() {
		reg := s.x.Registry()
		for _, l := range reg.Languages() {
			tc := reg.Toolchain(l)
			if tc.Err != nil {
				continue
			}
			limits := s.cfg.Defaults
			if l.Limits.MemoryMB > 0 {
				limits.MemoryMB = l.Limits.MemoryMB
			}
			if l.Limits.Processes > 0 {
				limits.Processes = l.Limits.Processes
			}
			info := LanguageInfo{Name: l.Name, Aliases: l.Aliases, Extensions: l.Extensions, Version: tc.Version, Compiled: l.Compiled(), DefaultLimits: limits}
			if info.Aliases == nil {
				info.Aliases = []string{}
			}
			if info.Extensions == nil {
				info.Extensions = []string{}
			}
			s.langs = append(s.langs, info)
		}
	})
	writeJSON(w, http.StatusOK, s.langs)
}

func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openAPIDocument)
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "shutting down"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "workers": s.cfg.Workers,
		"in_flight": s.pool.busy(), "queued": s.pool.queued.Load()})
}

// Serve answers on ln until ctx ends, then shuts down gracefully: it stops
// accepting, lets running executions finish within the grace period, and
// then cancels them, which kills their sandboxes.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	runCtx, cancelRuns := context.WithCancel(context.Background())
	defer cancelRuns()
	// Generous write timeout: a response is written after the longest run.
	maxRun := seconds(s.cfg.Maximums.TimeoutSeconds + s.cfg.Maximums.CompileTimeoutSeconds)
	srv := &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       seconds(s.cfg.ReadTimeoutSeconds),
		WriteTimeout:      maxRun + seconds(s.cfg.ReadTimeoutSeconds) + time.Minute,
		IdleTimeout:       seconds(s.cfg.IdleTimeoutSeconds),
		BaseContext:       func(net.Listener) context.Context { return runCtx },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.draining.Store(true)
	grace := seconds(s.cfg.ShutdownGraceSeconds)
	s.log.Info("shutting down", "in_flight", s.pool.busy(), "grace_seconds", grace.Seconds())
	shutCtx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := srv.Shutdown(shutCtx)
	if errors.Is(err, context.DeadlineExceeded) {
		s.log.Warn("grace period over: killing running executions", "in_flight", s.pool.busy())
		cancelRuns()
		killCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err = srv.Shutdown(killCtx)
	}
	if err != nil {
		srv.Close()
	}
	s.log.Info("stopped")
	return nil
}

// NewExecutor builds the executor a server configuration describes.
func NewExecutor(cfg Config) (*executor.Executor, error) {
	e, err := sandbox.Default()
	if err != nil {
		return nil, err
	}
	d := cfg.Defaults
	return executor.New(executor.Config{
		Languages: cfg.Languages, DataDir: cfg.DataDir, Engine: e,
		Defaults: executor.Limits{WallTime: seconds(d.TimeoutSeconds), CPUTime: seconds(d.CPUTimeSeconds),
			MemoryBytes: d.MemoryMB << 20, Processes: d.Processes, OutputBytes: d.OutputBytes},
		CompileDefaults: executor.Limits{WallTime: seconds(d.CompileTimeoutSeconds)},
	})
}
