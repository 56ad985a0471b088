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
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/api/playground"
	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/filestore"
	"github.com/sandbox-run/sandbox-run/pkg/jobs"
	"github.com/sandbox-run/sandbox-run/pkg/metrics"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
	"github.com/sandbox-run/sandbox-run/pkg/webhook"
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
	cfg     Config
	x       Executor
	log     *slog.Logger
	metrics *metrics.Metrics
	run     *runner.Service
	keys    *keyring
	mux     *http.ServeMux
	// methods lists the methods routed for each path, for 405 answers.
	methods map[string][]string

	langOnce sync.Once
	langs    []LanguageInfo

	// Async jobs (pkg/jobs) and their callbacks' sender, and the store of
	// uploaded files.
	jobMgr *jobs.Manager
	hooks  *webhook.Sender
	files  *filestore.Store

	// background are tasks (queues, janitors) that run while Serve does;
	// features add them when they register.
	background []func(ctx context.Context)
}

// New builds a server; cfg must have passed Validate.
func New(cfg Config, x Executor, log *slog.Logger) *Server {
	svc := runner.FromConfig(cfg, x, log)
	s := &Server{cfg: cfg, x: x, log: log, run: svc, metrics: svc.Metrics(), keys: newKeyring(cfg.Keys), methods: map[string][]string{}}
	s.mux = http.NewServeMux()
	s.route("POST /api/sandbox/execute", ScopeExecute, s.handleExecute)
	s.route("GET /api/sandbox/languages", ScopeExecute, s.handleLanguages)
	s.route("GET /api/openapi.json", "", s.handleOpenAPI)
	s.route("GET /healthz", "", s.handleHealth)
	s.route("GET /readyz", "", s.handleReady)
	s.route("GET /metrics", ScopeAdmin, s.metrics.Handler().ServeHTTP)
	s.registerFiles()
	s.registerSessions()
	s.registerJobs()
	s.registerWebSocket()
	for _, h := range extraHandlers {
		handler := h.build(cfg, s.run, log)
		s.route(h.pattern, ScopeExecute, func(w http.ResponseWriter, r *http.Request) {
			// The key's rate and concurrency limits hold, per request.
			leave, ok := s.admitKey(w, keyOf(r))
			if !ok {
				return
			}
			defer leave()
			handler.ServeHTTP(w, r)
		})
	}
	s.route("/", "", s.notFound)
	s.registerPlayground()
	return s
}

// notFound is the catch-all. It matches every method, so ServeMux's own
// 405 never happens: answer it here, in JSON like every other error.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	if methods, ok := s.methods[r.URL.Path]; ok {
		w.Header().Set("Allow", strings.Join(methods, ", "))
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s (allowed: %s)", r.Method, r.URL.Path, strings.Join(methods, ", ")))
		return
	}
	writeError(w, http.StatusNotFound, "no such endpoint: "+r.Method+" "+r.URL.Path)
}

// registerPlayground serves the web playground (pkg/api/playground): the
// page at GET / and its assets under GET /playground/. Both are public (the
// page asks for an API key when the API wants one) and outside the API, so
// not in s.methods nor the OpenAPI document; other methods on them and
// unknown assets get the catch-all's JSON 404.
func (s *Server) registerPlayground() {
	h := playground.Handler(http.HandlerFunc(s.notFound))
	for _, pattern := range []string{"GET /{$}", "GET " + playground.Prefix} {
		s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
			defer func() { s.metrics.Requests.WithLabelValues(pattern, fmt.Sprint(rec.status)).Inc() }()
			h.ServeHTTP(rec, r)
		})
	}
}

// extraHandlers are served by every Server besides the API's routes; other
// packages add them with RegisterHandler (pkg/mcp adds /mcp).
var extraHandlers []extraHandler

type extraHandler struct {
	pattern string
	build   func(cfg Config, svc *runner.Service, log *slog.Logger) http.Handler
}

// RegisterHandler makes every Server that New builds afterwards serve, at
// pattern (every method), the handler build returns for it, behind the API
// keys with the execute scope and their rate and concurrency limits (each
// request counts), refused while the server shuts down. The handler runs
// code through svc, the server's own run service: one pool, one drain and
// one set of metrics for every transport. Call it from an init function.
func RegisterHandler(pattern string, build func(cfg Config, svc *runner.Service, log *slog.Logger) http.Handler) {
	extraHandlers = append(extraHandlers, extraHandler{pattern, build})
}

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler {
	if len(s.cfg.Keys) > 0 {
		return s.mux
	}
	return http.HandlerFunc(s.checkHost)
}

// checkHost guards a server without API keys (bound to loopback) against
// DNS rebinding: a web page whose name was made to resolve to 127.0.0.1
// sends its own name as Host. Only loopback names and addresses (and the
// listen address) are answered; with keys, a request must carry one, which
// such a page has not.
func (s *Server) checkHost(w http.ResponseWriter, r *http.Request) {
	if !loopbackHost(r.Host, s.cfg.Addr) {
		s.metrics.Rejected.WithLabelValues("host").Inc()
		writeError(w, http.StatusForbidden, fmt.Sprintf("Host %.100q is not a loopback name: a server without API keys answers only requests to localhost, 127.0.0.1 or [::1] (a guard against DNS rebinding); configure API keys to serve other names", r.Host))
		return
	}
	s.mux.ServeHTTP(w, r)
}

// loopbackHost reports whether a Host header names this machine's
// loopback: localhost (or a name under .localhost), a loopback address, or
// the host of the listen address. An empty Host (HTTP/1.0) passes: no
// browser sends one.
func loopbackHost(host, listen string) bool {
	if host == "" {
		return true
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.TrimSuffix(strings.ToLower(strings.Trim(name, "[]")), ".")
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return true
	}
	if ip := net.ParseIP(name); ip != nil && ip.IsLoopback() {
		return true
	}
	if l, _, err := net.SplitHostPort(listen); err == nil && l != "" {
		return strings.EqualFold(strings.Trim(l, "[]"), name)
	}
	return false
}

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
				refuseAuth(rec, status, msg)
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
	req, key, leave, ok := s.admit(w, r)
	if !ok {
		return
	}
	defer leave()
	if r.URL.Path == "/api/sandbox/executions" {
		req.Async = true
	}
	if err := s.prepare(req, key); err != nil {
		s.reject(w, err, "invalid")
		return
	}
	switch {
	case req.Async:
		s.submitJob(w, r, req, key)
	case wantsEventStream(r):
		s.streamExecute(w, r, req, key)
	default:
		s.executeSync(w, r, req, key)
	}
}

// admit checks and decodes an execution request and applies the key's
// rate limit and concurrency cap. When ok, leave must be called once the
// execution is over; otherwise the answer has been written.
func (s *Server) admit(w http.ResponseWriter, r *http.Request) (req *ExecuteRequest, key *apiKey, leave func(), ok bool) {
	if err := checkContentType(r); err != nil {
		s.reject(w, err, "content_type")
		return nil, nil, nil, false
	}
	if r.ContentLength > s.cfg.MaxBodyBytes {
		s.reject(w, &requestError{http.StatusRequestEntityTooLarge, fmt.Sprintf("request body of %d bytes is larger than %d", r.ContentLength, s.cfg.MaxBodyBytes)}, "too_large")
		return nil, nil, nil, false
	}
	req, err := DecodeExecuteRequest(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes), &s.cfg)
	if err != nil {
		s.reject(w, err, "invalid")
		return nil, nil, nil, false
	}
	key = keyOf(r)
	if leave, ok = s.admitKey(w, key); !ok {
		return nil, nil, nil, false
	}
	return req, key, leave, true
}

// admitKey applies the key's rate limit and concurrency cap and refuses
// work while the server drains, for POST and, before the upgrade, for
// WebSocket. When ok, leave must be called once the execution is over;
// otherwise the answer has been written.
func (s *Server) admitKey(w http.ResponseWriter, key *apiKey) (leave func(), ok bool) {
	leave = func() {}
	if key != nil {
		if wait, ok := key.allow(); !ok {
			retryAfter(w, wait)
			s.reject(w, &requestError{http.StatusTooManyRequests, "rate limit of key " + key.ID + " exceeded"}, "rate_limit")
			return nil, false
		}
		if !key.enter() {
			retryAfter(w, time.Second)
			s.reject(w, &requestError{http.StatusTooManyRequests, fmt.Sprintf("key %s has %d executions in flight already", key.ID, key.MaxConcurrent)}, "key_concurrency")
			return nil, false
		}
		leave = key.leave
	}
	if s.run.Draining() {
		leave()
		retryAfter(w, 5*time.Second)
		s.reject(w, &requestError{http.StatusServiceUnavailable, "the server is shutting down"}, "shutdown")
		return nil, false
	}
	return leave, true
}

// prepare resolves what a request refers to (stored files, its session)
// before it runs.
func (s *Server) prepare(req *ExecuteRequest, key *apiKey) error {
	// An unknown language is refused before anything is queued or streamed.
	if err := s.run.CheckLanguage(req); err != nil {
		return httpError(err)
	}
	if req.CallbackURL != "" && !req.Async {
		return badRequest("callback_url needs \"async\": true (or POST /api/sandbox/executions)")
	}
	if err := s.resolveFileRefs(req, key); err != nil {
		return err
	}
	if err := s.checkSession(req, key); err != nil {
		return err
	}
	// What the executor would refuse only when the run starts is refused
	// now too.
	return httpError(s.run.Validate(req))
}

// errCanceled means a run ended because its context did: the client went
// away, or the server gave up on it at shutdown.
var errCanceled = errors.New("canceled")

// execute runs the request through the run service (pkg/runner) and says
// its failures in HTTP's terms. onRun, if set, is called once a worker is
// free, just before the run starts.
func (s *Server) execute(ctx context.Context, via string, xreq *executor.Request, keyID string, onRun func()) (*executor.Result, error) {
	res, err := s.run.Run(ctx, runner.Run{Request: xreq, Tenant: keyID, Via: via, OnStart: onRun, Session: xreq.SessionID})
	if err != nil {
		return nil, httpError(err)
	}
	return res, nil
}

// httpError is a run service's error as the API answers it.
func httpError(err error) error {
	var e *runner.Error
	if !errors.As(err, &e) {
		return err
	}
	switch e.Kind {
	case runner.Invalid:
		return badRequest("%s", e.Msg)
	case runner.QueueFull, runner.Busy, runner.Draining:
		return &requestError{http.StatusServiceUnavailable, e.Msg}
	case runner.Full:
		return &requestError{http.StatusInsufficientStorage, e.Msg}
	case runner.Canceled:
		return errCanceled
	}
	return e
}

func (s *Server) executeSync(w http.ResponseWriter, r *http.Request, req *ExecuteRequest, key *apiKey) {
	res, err := s.execute(r.Context(), "rest", toExecutor(req), key.id(), nil)
	if err != nil {
		s.writeExecuteError(w, err, nil)
		return
	}
	if r.Context().Err() != nil {
		// The client went away (nobody reads this), or the server killed
		// the run at the end of its shutdown grace period: the client is
		// still there and must not get an empty 200.
		s.writeExecuteError(w, errCanceled, res)
		return
	}
	status := http.StatusOK
	if res.Status == executor.StatusSetupError {
		// The sandbox itself failed: the one case that is the server's fault.
		status = http.StatusInternalServerError
	}
	writeResult(w, status, res)
}

// writeExecuteError answers an execution that could not run or finish.
func (s *Server) writeExecuteError(w http.ResponseWriter, err error, res *executor.Result) {
	var re *requestError
	switch {
	case errors.As(err, &re):
		if re.status == http.StatusServiceUnavailable {
			retryAfter(w, time.Second)
		}
		writeError(w, re.status, re.msg)
	case errors.Is(err, errCanceled):
		retryAfter(w, 5*time.Second)
		e := ErrorResponse{Error: "execution canceled: the client went away or the server is shutting down"}
		if res != nil {
			e.ExecutionID = res.ExecutionID
		}
		writeJSON(w, http.StatusServiceUnavailable, e)
	default:
		writeError(w, http.StatusInternalServerError, err.Error())
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
		limitsOf := func(l *executor.Language) LimitSet {
			limits := s.cfg.Defaults
			if l.Limits.MemoryMB > 0 {
				limits.MemoryMB = l.Limits.MemoryMB
			}
			if l.Limits.Processes > 0 {
				limits.Processes = l.Limits.Processes
			}
			return limits
		}
		s.langs = []LanguageInfo{}
		for _, name := range reg.LanguageNames() {
			l, tc, err := reg.Resolve(name, "")
			if err != nil {
				continue
			}
			info := LanguageInfo{Name: l.Name, Aliases: l.Aliases, Extensions: l.Extensions, Version: tc.Version, Compiled: l.Compiled(), DefaultLimits: limitsOf(l), Versions: []LanguageVersion{}}
			for _, e := range reg.Entries(name) {
				if etc := reg.Toolchain(e); etc.Err == nil {
					info.Versions = append(info.Versions, LanguageVersion{Version: etc.Version, Available: true, Default: e == l, Compiled: e.Compiled(), DefaultLimits: limitsOf(e)})
				}
			}
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
	if s.run.Draining() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "shutting down"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "workers": s.cfg.Workers,
		"in_flight": s.run.InFlight(), "queued": s.run.Queued()})
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
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       seconds(s.cfg.ReadTimeoutSeconds),
		WriteTimeout:      maxRun + seconds(s.cfg.ReadTimeoutSeconds) + time.Minute,
		IdleTimeout:       seconds(s.cfg.IdleTimeoutSeconds),
		BaseContext:       func(net.Listener) context.Context { return runCtx },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	bgCtx, stopBackground := context.WithCancel(context.Background())
	var bg sync.WaitGroup
	for _, task := range s.background {
		bg.Add(1)
		go func() {
			defer bg.Done()
			task(bgCtx)
		}()
	}
	defer func() {
		stopBackground()
		bg.Wait()
	}()
	if w, ok := s.x.(interface{ Prewarm(int) error }); ok && s.cfg.Prewarm > 0 {
		go func() {
			if err := w.Prewarm(s.cfg.Prewarm); err != nil {
				s.log.Warn("preparing sandboxes ahead", "error", err)
			}
		}()
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.run.Drain()
	grace := seconds(s.cfg.ShutdownGraceSeconds)
	s.log.Info("shutting down", "in_flight", s.run.InFlight(), "grace_seconds", grace.Seconds())
	shutCtx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := srv.Shutdown(shutCtx)
	if errors.Is(err, context.DeadlineExceeded) {
		s.log.Warn("grace period over: killing running executions", "in_flight", s.run.InFlight())
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

// NewExecutor builds the executor a server configuration describes
// (runner.NewExecutor).
func NewExecutor(cfg Config) (*executor.Executor, error) { return runner.NewExecutor(cfg) }
