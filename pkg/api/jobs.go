package api

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/cluster"
	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/jobs"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
	"github.com/sandbox-run/sandbox-run/pkg/webhook"
)

// Async executions: the routes, admission and answers. The queue, the
// store, the runs, the quotas and the callbacks' bookkeeping are pkg/jobs
// (its package doc is the contract); callbacks are sent by pkg/webhook.
//
//	POST /api/sandbox/execute with "async": true, or POST /api/sandbox/executions
//	  → 202 {"execution_id", "status": "queued", "created_at"}, Location: the job.
//	GET /api/sandbox/executions/{id}[?wait=true[&timeout=SECONDS]]
//	  → {"execution_id", "status": "queued"|"running", ...} until the run is
//	    over, then the result as the synchronous call answers it, plus
//	    created_at, started_at and finished_at.

func (s *Server) registerJobs() {
	s.hooks = CallbackSender(s.cfg, "")
	if c := s.opts.cluster; c != nil {
		s.jobMgr = c.Jobs(cluster.JobsConfig{Queue: s.cfg.AsyncQueue, ResultTTL: seconds(s.cfg.ResultTTLSeconds), Log: s.log})
	} else {
		s.jobMgr = jobs.New(jobs.Config{App: s.cfg, Run: s.runJob, Notifier: notifier{s.hooks}, Log: s.log})
	}

	s.route("POST /api/sandbox/executions", ScopeExecute, s.handleExecute)
	s.route("GET /api/sandbox/executions/{id}", ScopeExecute, s.handleJob)
	s.background = append(s.background, func(ctx context.Context) { s.jobMgr.Serve(ctx, s.run.Draining) })
}

// runJob runs an async job through the run service, on the pool every
// transport shares.
func (s *Server) runJob(ctx context.Context, req *ExecuteRequest, keyID string, onRun func()) (*executor.Result, error) {
	// While the pool's queue is full (of synchronous requests, say), the
	// job waits its turn without counting as refused.
	if !s.run.HasRoom() {
		return nil, jobs.ErrNoRoom
	}
	xreq := toExecutor(req)
	res, err := s.run.Run(ctx, runner.Run{Request: xreq, Tenant: keyID, Via: "job", OnStart: onRun, Session: xreq.SessionID})
	if runner.KindOf(err).Retryable() {
		return nil, fmt.Errorf("%w: %w", jobs.ErrNoRoom, err)
	}
	if err != nil {
		return nil, httpError(err)
	}
	return res, nil
}

// notifier delivers pkg/jobs' callbacks with pkg/webhook.
type notifier struct{ *webhook.Sender }

// Notifier delivers async jobs' callbacks as cfg says (its secret,
// retries, timeout and allow-list): a cluster's workers send them.
func Notifier(cfg Config) jobs.Notifier { return notifier{CallbackSender(cfg, "")} }

// CallbackSender is the callbacks' sender cfg describes (its secret,
// retries, timeout and allow-list), sending with method (POST when "").
func CallbackSender(cfg Config, method string) *webhook.Sender {
	allow, _ := config.ParseAllowList(cfg.CallbackAllow) // checked by Config.Validate
	return webhook.New(webhook.Config{Secret: cfg.CallbackSecret, Retries: cfg.CallbackRetries, Method: method,
		RetryDelay: seconds(cfg.CallbackRetryDelaySeconds), Timeout: seconds(cfg.CallbackTimeoutSeconds), Allow: allow})
}

func (n notifier) Deliver(ctx context.Context, url, id string, body []byte, report func(jobs.Attempt)) (int, error) {
	return n.Sender.Deliver(ctx, url, id, body, func(a webhook.Attempt) { report(jobs.Attempt(a)) })
}

// jobError answers a job that pkg/jobs did not take, or cannot look up.
func (s *Server) jobError(w http.ResponseWriter, err error) {
	var e *jobs.Error
	if !errors.As(err, &e) {
		e = &jobs.Error{Kind: jobs.Unavailable, Msg: err.Error()}
	}
	switch e.Kind {
	case jobs.Invalid:
		s.reject(w, badRequest("%s", e.Msg), "invalid")
	case jobs.QueueFull:
		retryAfter(w, time.Second)
		s.reject(w, &requestError{http.StatusServiceUnavailable, e.Msg}, "async_queue_full")
	case jobs.KeyQueueFull:
		retryAfter(w, time.Second)
		s.reject(w, &requestError{http.StatusTooManyRequests, e.Msg}, "async_quota")
	case jobs.ResultQuotaFull:
		s.reject(w, &requestError{http.StatusInsufficientStorage, e.Msg}, "async_quota")
	default:
		s.metrics.Rejected.WithLabelValues("async_unavailable").Inc()
		jobStoreUnavailable(w, e)
	}
}

func jobStoreUnavailable(w http.ResponseWriter, err error) {
	retryAfter(w, 5*time.Second)
	writeError(w, http.StatusServiceUnavailable, "async executions are unavailable: "+err.Error())
}

// submitJob queues an admitted, prepared request and answers 202.
func (s *Server) submitJob(w http.ResponseWriter, r *http.Request, req *ExecuteRequest, key *apiKey) {
	if err := s.jobMgr.Available(r.Context()); err != nil {
		s.jobError(w, err)
		return
	}
	language, err := checkJobLanguage(s.x.Registry(), req.Language, req.Version)
	if err != nil {
		s.reject(w, err, "invalid")
		return
	}
	if req.CallbackURL != "" {
		if err := s.hooks.CheckURL(r.Context(), req.CallbackURL); err != nil {
			s.reject(w, badRequest("%s", err.Error()), "callback_refused")
			return
		}
	}
	js, err := s.jobMgr.Submit(r.Context(), key.id(), language, req)
	if err != nil {
		s.jobError(w, err)
		return
	}
	w.Header().Set("Location", "/api/sandbox/executions/"+js.ExecutionID)
	writeJSON(w, http.StatusAccepted, js)
}

// checkJobLanguage refuses, at submission, what the executor would refuse
// for its language, and returns the language's name.
func checkJobLanguage(reg *executor.Registry, name, version string) (string, error) {
	if reg == nil {
		return name, nil
	}
	lang, _, err := reg.Resolve(name, version)
	if err != nil {
		return "", badRequest("%s", err.Error())
	}
	return lang.Name, nil
}

// handleJob answers GET /api/sandbox/executions/{id}: wait=true holds the
// answer until the run is over or timeout (at most max_wait_seconds)
// passes.
func (s *Server) handleJob(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	q := r.URL.Query()
	wait := false
	if v := q.Get("wait"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("wait=%q: use true or false", v))
			return
		}
		wait = b
	}
	timeout := seconds(s.cfg.MaxWaitSeconds)
	if v := q.Get("timeout"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("timeout=%q: give a number of seconds", v))
			return
		}
		timeout = min(timeout, seconds(f))
	}
	if !wait {
		timeout = 0
	}
	a, err := s.jobMgr.Get(r.Context(), id, keyOf(r).id(), timeout)
	switch {
	case errors.Is(err, jobs.ErrNotFound):
		writeError(w, http.StatusNotFound, "no such execution: "+id)
	case err != nil:
		jobStoreUnavailable(w, err)
	case a.Done:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write(a.Result)
	default:
		writeJSON(w, http.StatusOK, a.Status)
	}
}
