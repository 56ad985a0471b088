package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/runner"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
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
	if err := s.prepare(r.Context(), req, key); err != nil {
		reason := "invalid"
		if errors.Is(err, runner.ErrCallbackURL) {
			reason = "callback_refused"
		}
		s.reject(w, err, reason)
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

// admit passes the door for one run (origin, content, the key's rate and
// concurrency, the drain), then decodes and checks an execution request.
// When ok, leave must be called once the execution is over; otherwise the
// answer has been written.
func (s *Server) admit(w http.ResponseWriter, r *http.Request) (req *ExecuteRequest, key *runner.Key, leave func(), ok bool) {
	// The native API's wire format is JSON, whoever sends it.
	if err := checkContentType(r); err != nil {
		s.reject(w, err, "content_type")
		return nil, nil, nil, false
	}
	if r.ContentLength > s.cfg.MaxBodyBytes {
		s.reject(w, &requestError{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("request body of %d bytes is larger than %d", r.ContentLength, s.cfg.MaxBodyBytes)}, "too_large")
		return nil, nil, nil, false
	}
	if leave, ok = s.admitKey(w, r, 1, true); !ok {
		return nil, nil, nil, false
	}
	req, err := DecodeExecuteRequest(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes), &s.cfg)
	if err != nil {
		leave()
		s.reject(w, err, "invalid")
		return nil, nil, nil, false
	}
	return req, keyOf(r), leave, true
}

// admitKey passes r through the run service's door for n runs (the
// caller's origin and content, the drain, the key's rate and, when hold,
// its concurrency cap). When ok, leave must be called once the request is
// over; otherwise the answer has been written.
func (s *Server) admitKey(w http.ResponseWriter, r *http.Request, n int, hold bool) (leave func(), ok bool) {
	leave, err := s.run.Admit(runner.CallerOf(r.Context()), n, hold)
	if err != nil {
		s.writeExecuteError(w, httpError(err), nil)
		return nil, false
	}
	return leave, true
}

// prepare resolves what a request refers to (stored files, its session)
// before it runs.
func (s *Server) prepare(ctx context.Context, req *ExecuteRequest, key *runner.Key) error {
	if req.CallbackURL != "" && !req.Async {
		return badRequest("callback_url needs \"async\": true (or POST /api/sandbox/executions)")
	}
	if err := s.resolveFileRefs(req, key); err != nil {
		return err
	}
	// The run service's one sequence: bounds, the session (whose image
	// may be where the language is), the language, and what the executor
	// would refuse only when the run starts, refused before anything is
	// queued or streamed.
	return httpError(s.run.Prepare(ctx, req, key.ID()))
}

// errCanceled means a run ended because its context did: the client went
// away, or the server gave up on it at shutdown.
var errCanceled = errors.New("canceled")

// execute runs the request through the run service (pkg/runner) and says
// its failures in HTTP's terms.
func (s *Server) execute(ctx context.Context, r runner.Run) (*wire.Result, error) {
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
	case runner.QueueFull, runner.Busy, runner.Draining, runner.Unavailable:
		return &requestError{status: http.StatusServiceUnavailable, msg: e.Msg, retry: e.RetryAfter}
	case runner.RateLimited:
		return &requestError{status: http.StatusTooManyRequests, msg: e.Msg, retry: e.RetryAfter}
	case runner.Unauthorized:
		return &requestError{status: http.StatusUnauthorized, msg: e.Msg}
	case runner.Forbidden:
		return &requestError{status: http.StatusForbidden, msg: e.Msg}
	case runner.Unsupported:
		return &requestError{status: http.StatusUnsupportedMediaType, msg: e.Msg}
	case runner.Full:
		return &requestError{status: http.StatusInsufficientStorage, msg: e.Msg}
	case runner.NotFound:
		return &requestError{status: http.StatusNotFound, msg: e.Msg}
	case runner.Exists:
		return &requestError{status: http.StatusConflict, msg: e.Msg}
	case runner.Canceled:
		return errCanceled
	}
	return e
}

func (s *Server) executeSync(w http.ResponseWriter, r *http.Request, req *ExecuteRequest, key *runner.Key) {
	res, err := s.execute(r.Context(), runner.Run{Request: req, Tenant: key.ID(), Via: "rest"})
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
	if res.Status == wire.StatusSetupError {
		// The sandbox itself failed: the one case that is the server's fault.
		status = http.StatusInternalServerError
	}
	writeResult(w, status, res)
}

// writeExecuteError answers an execution that could not run or finish.
func (s *Server) writeExecuteError(w http.ResponseWriter, err error, res *wire.Result) {
	var re *requestError
	switch {
	case errors.As(err, &re):
		switch {
		case re.retry > 0:
			retryAfter(w, re.retry)
		case re.status == http.StatusServiceUnavailable, re.status == http.StatusTooManyRequests:
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
