// Package api is the native HTTP transport of the run service: the seed
// contract's POST /api/sandbox/execute, async jobs, SSE and WebSocket,
// files, sessions, languages, health, Prometheus metrics and the OpenAPI
// document, behind API keys; the other transports are mounted beside it
// (Mount). Handlers authenticate, decode and answer; the run service
// (pkg/runner) does the rest: its door (origin, the key's rate and
// concurrency), its checks, its pool.
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
	"github.com/sandbox-run/sandbox-run/pkg/metrics"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
	"github.com/sandbox-run/sandbox-run/pkg/webhook"
)

//go:embed openapi.json
var openAPIDocument []byte

// OpenAPI returns the OpenAPI 3.1 document the server serves.
func OpenAPI() []byte { return openAPIDocument }

// Server serves the API.
type Server struct {
	cfg     Config
	x       runner.Backend
	log     *slog.Logger
	metrics *metrics.Metrics
	run     *runner.Service
	keys    *runner.Keys
	mux     *http.ServeMux
	// methods lists the methods routed for each path, for 405 answers.
	methods map[string][]string

	langMu  sync.Mutex
	langGen int64
	langs   []LanguageInfo

	// Async jobs (pkg/jobs) and their callbacks' sender, and the store of
	// uploaded files.
	jobMgr jobService
	hooks  *webhook.Sender
	files  FileStore
	opts   options

	// hosts are the mounted transports that serve whole hosts.
	hosts []hostRoute
	// liveRouters are the mounted transports whose calls on live
	// sandboxes an API node of a cluster sends to workers; fwdKeys the
	// keys of callers such a node forwarded here.
	liveRouters []liveRouter
	fwdKeys     runner.ForwardedKeys

	// background are tasks (queues, janitors) that run while Serve does;
	// features add them when they register.
	background []func(ctx context.Context)
}

// New builds a server over x, the run service's backend on this host
// (pkg/local); cfg must have passed Validate.
func New(cfg Config, x runner.Backend, log *slog.Logger, opts ...Option) *Server {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	svc := o.service
	if svc == nil {
		rc := runner.ConfigFrom(cfg)
		// An API node of a cluster keeps no live sandboxes: its workers do.
		rc.NoLive = o.cluster != nil
		if c := o.cluster; c != nil {
			rc.LiveSnapshots = c.Snapshots
			rc.Secrets, rc.SecretsErr = c.Secrets, c.SecretsErr
			if rc.Secrets == nil && rc.SecretsErr == nil {
				rc.SecretsErr = errors.New("the cluster's secret store is not set up")
			}
		}
		svc = runner.New(rc, x, log, nil)
	}
	s := &Server{cfg: cfg, x: x, log: log, run: svc, metrics: svc.Metrics(), keys: runner.NewKeys(cfg.Keys), methods: map[string][]string{}, opts: o}
	if c := s.opts.cluster; c != nil {
		if c.Sessions != nil {
			svc.UseRemote(c.Remote, c.Sessions, c.Sessions)
		} else {
			svc.UseRemote(c.Remote, nil, nil)
		}
		if c.Dropped != nil {
			s.metrics.CountDropped(c.Dropped)
		}
	}
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
	s.registerImages()
	s.registerSandboxes()
	s.registerSnapshots()
	s.registerSecrets()
	for _, m := range s.opts.mounts {
		// Behind the keys (execute scope) unless public; each transport
		// passes the run service's door for every run it asks for, and
		// answers what is refused before it in its own error shape when it
		// has one.
		h := m.build(cfg, s.run, log)
		var refuse func(http.ResponseWriter, int, string)
		if r, ok := h.(Refuser); ok {
			refuse = r.Refuse
		}
		for _, p := range m.keyed {
			s.routeWith(p, ScopeExecute, h.ServeHTTP, refuse)
		}
		for _, p := range m.public {
			s.routeWith(p, "", h.ServeHTTP, refuse)
		}
		if hr, ok := h.(HostRouter); ok {
			s.hosts = append(s.hosts, hostRoute{hr, h})
		}
		if lr, ok := h.(LiveRouter); ok {
			s.liveRouters = append(s.liveRouters, liveRouter{lr, refuse})
		}
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

// Transport builds a transport that the server mounts at a pattern: a
// handler that decodes its wire format, runs through svc (the server's
// run service: its door, pool, job store, drain and metrics) and encodes
// the outcome.
type Transport func(cfg Config, svc *runner.Service, log *slog.Logger) http.Handler

type mount struct {
	keyed, public []string
	build         Transport
}

// Mount makes the server serve, at pattern (every method), the handler
// build returns for it, behind the API keys with the execute scope (the
// caller it then sees is runner.CallerOf the request's context). The
// composition of a server (which transports it mounts) is its caller's:
// see internal/app.
func Mount(pattern string, build Transport) Option {
	return MountRoutes(build, []string{pattern}, nil)
}

// MountRoutes makes the server serve one handler that build returns at
// several patterns: those in keyed behind the API keys as Mount does, those
// in public without (the transport authenticates them itself, as the E2B
// door does a sandbox's calls by its access token; the server's other
// guards still apply). A handler that is a HostRouter gets, besides, every
// request to a host it claims, whatever its path.
func MountRoutes(build Transport, keyed, public []string) Option {
	return func(o *options) { o.mounts = append(o.mounts, mount{keyed, public, build}) }
}

// HostRouter is a mounted transport that serves whole host names (a live
// sandbox's ports as PORT-ID.<domain>).
type HostRouter interface {
	ClaimsHost(host string) bool
}

type hostRoute struct {
	r HostRouter
	h http.Handler
}

// byHost serves r by the transport that claims its Host, if one does.
func (s *Server) byHost(w http.ResponseWriter, r *http.Request) bool {
	for _, hr := range s.hosts {
		if hr.r.ClaimsHost(r.Host) {
			rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
			hr.h.ServeHTTP(rec, r)
			s.metrics.Requests.WithLabelValues("host", fmt.Sprint(rec.status)).Inc()
			return true
		}
	}
	return false
}

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler {
	h := http.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if route, refuse, ok := s.liveRoute(r); ok {
			s.serveLive(w, r, route, refuse)
			return
		}
		if !s.byHost(w, r) {
			s.mux.ServeHTTP(w, r)
		}
	}))
	if len(s.cfg.Keys) == 0 {
		next := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// A call an API node forwarded passed its host check there.
			if _, fwd := forwardedOf(r); fwd || s.checkHost(w, r) {
				next.ServeHTTP(w, r)
			}
		})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, keyPathPrefix) {
			var ok bool
			if r, ok = keyPath(w, r); !ok {
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// checkHost guards a server without API keys (bound to loopback) against
// DNS rebinding: a web page whose name was made to resolve to 127.0.0.1
// sends its own name as Host. Only loopback names and addresses (and the
// listen address) are answered; with keys, a request must carry one, which
// such a page has not.
func (s *Server) checkHost(w http.ResponseWriter, r *http.Request) bool {
	if !loopbackHost(r.Host, s.cfg.Addr) {
		s.metrics.Rejected.WithLabelValues("host").Inc()
		writeError(w, http.StatusForbidden, fmt.Sprintf("Host %.100q is not a loopback name: a server without API keys answers only requests to localhost, 127.0.0.1 or [::1] (a guard against DNS rebinding); configure API keys to serve other names", r.Host))
		return false
	}
	return true
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
	s.routeWith(pattern, scope, h, nil)
}

// Refuser is a mounted transport that answers a request refused before it
// (a missing or wrong key, a cross-site request) in its wire format's error
// shape, as its clients read errors.
type Refuser interface {
	Refuse(w http.ResponseWriter, status int, msg string)
}

// routeWith is route whose refusals refuse writes (nil: the native shape).
func (s *Server) routeWith(pattern, scope string, h http.HandlerFunc, refuse func(http.ResponseWriter, int, string)) {
	if method, path, ok := strings.Cut(pattern, " "); ok {
		s.methods[path] = append(s.methods[path], method)
		if method == http.MethodGet {
			s.methods[path] = append(s.methods[path], http.MethodHead)
		}
	}
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		defer func() { s.metrics.Requests.WithLabelValues(pattern, fmt.Sprint(rec.status)).Inc() }()
		var key *runner.Key
		if scope != "" {
			k, status, msg := s.authenticate(r, scope)
			if status != 0 {
				refuseAuth(rec, status, msg, refuse)
				return
			}
			key = k
		}
		c := callerOf(r, key)
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			// What changes anything (uploads, sessions, deletions, not only
			// runs) is refused to a web page of another site on a server
			// without keys, whatever the route (the door's origin rule).
			origin := c
			origin.Body = false
			if err := s.run.CheckCaller(origin); err != nil {
				var re *requestError
				if refuse != nil && errors.As(httpError(err), &re) {
					refuse(rec, re.status, re.msg)
				} else {
					s.writeExecuteError(rec, httpError(err), nil)
				}
				return
			}
		}
		h(rec, r.WithContext(runner.WithCaller(r.Context(), c)))
	})
}

// keyOf is the key r came with (nil without keys).
func keyOf(r *http.Request) *runner.Key { return runner.CallerOf(r.Context()).Key }

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

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
	s.run.Stop()
	s.log.Info("stopped")
	return nil
}
