package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
)

// The synchronous run: POST /api/sandbox/execute, its admission (key,
// rate and concurrency limits, the worker pool) and its answers.

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
	if req.CallbackURL != "" && !req.Async {
		return badRequest("callback_url needs \"async\": true (or POST /api/sandbox/executions)")
	}
	if err := s.resolveFileRefs(req, key); err != nil {
		return err
	}
	if err := s.checkSession(req, key); err != nil {
		return err
	}
	// An unknown language is refused before anything is queued or
	// streamed (after the session, whose image may be where it is).
	if err := s.run.CheckLanguage(req); err != nil {
		return httpError(err)
	}
	// What the executor would refuse only when the run starts is refused
	// now too.
	return httpError(s.run.Validate(req))
}

// errCanceled means a run ended because its context did: the client went
// away, or the server gave up on it at shutdown.
var errCanceled = errors.New("canceled")

// execute runs the request through the run service (pkg/runner) and says
// its failures in HTTP's terms.
func (s *Server) execute(ctx context.Context, r runner.Run) (*executor.Result, error) {
	r.Session = r.Request.SessionID
	res, err := s.run.Run(ctx, r)
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
	res, err := s.execute(r.Context(), runner.Run{Request: toExecutor(req), Wire: req, Tenant: key.id(), Via: "rest"})
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
