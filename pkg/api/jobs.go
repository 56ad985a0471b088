package api

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

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
		s.jobMgr = c.Jobs
	} else {
		s.jobMgr = jobs.New(jobs.Config{App: s.cfg, Run: s.run.RunAsync, Notifier: runner.Notifier(s.hooks), Log: s.log})
	}

	s.run.UseJobs(s.jobMgr)
	s.route("POST /api/sandbox/executions", ScopeExecute, s.handleExecute)
	s.route("GET /api/sandbox/executions/{id}", ScopeExecute, s.handleJob)
	s.background = append(s.background, func(ctx context.Context) { s.jobMgr.Serve(ctx, s.run.Draining) })
}

// Notifier delivers async jobs' callbacks as cfg says (its secret,
// retries, timeout and allow-list): a cluster's workers send them.
func Notifier(cfg Config) jobs.Notifier { return runner.Notifier(CallbackSender(cfg, "")) }

// CallbackSender is runner.CallbackSender.
func CallbackSender(cfg Config, method string) *webhook.Sender {
	return runner.CallbackSender(cfg, method)
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
		s.reject(w, &requestError{status: http.StatusServiceUnavailable, msg: e.Msg}, "async_queue_full")
	case jobs.KeyQueueFull:
		retryAfter(w, time.Second)
		s.reject(w, &requestError{status: http.StatusTooManyRequests, msg: e.Msg}, "async_quota")
	case jobs.ResultQuotaFull:
		s.reject(w, &requestError{status: http.StatusInsufficientStorage, msg: e.Msg}, "async_quota")
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
func (s *Server) submitJob(w http.ResponseWriter, r *http.Request, req *ExecuteRequest, key *runner.Key) {
	if err := s.jobMgr.Available(r.Context()); err != nil {
		s.jobError(w, err)
		return
	}
	language := req.Language // checked by Prepare: its name is the language's
	if l, ok := s.run.Lookup(req.Language); ok {
		language = l.Name
	}
	js, err := s.jobMgr.SubmitWith(r.Context(), key.ID(), language, req, jobs.Options{})
	if err != nil {
		s.jobError(w, err)
		return
	}
	w.Header().Set("Location", "/api/sandbox/executions/"+js.ExecutionID)
	writeJSON(w, http.StatusAccepted, js)
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
	a, err := s.jobMgr.Get(r.Context(), id, keyOf(r).ID(), timeout)
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
