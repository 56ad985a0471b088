package runner

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/records"
	"github.com/sandbox-run/sandbox-run/pkg/cluster"
	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// The run service in a cluster (pkg/cluster), both sides of it:
//   - on an API node that runs no sandboxes itself (UseCluster), Run sends
//     each run to the cluster's workers, after the same checks, with the
//     same admission answers (a full cluster is QueueFull), log line and
//     metrics, and its output streamed back to the transport's writers;
//   - on a worker, RunJob runs a job the cluster gave it through Run, as a
//     local request.
//
// Sessions (with UseCluster's sess): their metadata is the cluster's,
// their runs go to the worker that holds each (cluster.Sessions.Place),
// and the run service's session checks (UseSession) work as on one node.

// UseCluster makes s an API node of the cluster c: its runs go to c's
// workers, at most as many waiting as queue beyond their slots.
func (s *Service) UseCluster(c *cluster.Conn, queue int, sess *cluster.Sessions) {
	s.remote = c
	s.admission = c.Admission(queue)
	if sess != nil {
		s.sessions, s.sessionX = sess, sess
	}
}

// Cluster is the cluster s sends its runs to, or nil.
func (s *Service) Cluster() *cluster.Conn { return s.remote }

// clusterSlack is how long past its limits a job may wait for a worker
// before the worker refuses it.
const clusterSlack = 5 * time.Minute

// runRemote is Run on a cluster's API node.
func (s *Service) runRemote(ctx context.Context, r Run) (*executor.Result, error) {
	if r.Wire == nil {
		return nil, &Error{Kind: Internal, Msg: "this transport gives no request to send to a cluster"}
	}
	sess, _ := s.sessionX.(*cluster.Sessions)
	if r.Wire.SessionID != "" && sess == nil {
		return nil, invalid("this cluster's API node keeps no sessions")
	}
	queued := time.Now()
	sent, err := s.admission.Admit(ctx)
	if err != nil {
		var full *cluster.FullError
		if errors.As(err, &full) {
			s.metrics.Rejected.WithLabelValues("queue_full").Inc()
			return nil, &Error{Kind: QueueFull, Msg: err.Error(), Err: err}
		}
		if ctx.Err() != nil {
			return nil, &Error{Kind: Canceled, Msg: "execution canceled", Err: err}
		}
		s.metrics.Rejected.WithLabelValues("busy").Inc()
		return nil, &Error{Kind: Busy, Msg: "the cluster is unavailable: " + err.Error(), Err: err}
	}
	s.metrics.InFlight.Inc()
	defer s.metrics.InFlight.Dec()
	mx := s.cfg.App.Maximums
	job := cluster.Job{
		ID: records.NewID("exec_"), Tenant: r.Tenant, Request: *r.Wire, TimeoutAuto: r.Wire.TimeoutAuto,
		Deadline:    time.Now().Add(seconds(mx.TimeoutSeconds+mx.CompileTimeoutSeconds) + clusterSlack),
		OnSubmitted: sent,
	}
	xr := r.Request
	job.Stream = xr != nil && (xr.Stdout != nil || xr.Stderr != nil || xr.CompileOutput != nil)
	if r.Interactive && xr != nil && xr.Stdin != nil {
		// The whole of stdin (input_data first) goes from here.
		job.Interactive, job.Stdin, job.Request.InputData, job.Request.InputDataEncoding = true, xr.Stdin, "", ""
	}
	if job.Request.MaxResponseBytes == 0 {
		job.Request.MaxResponseBytes = s.cfg.MaxResponseBytes
	}
	if r.OnStart != nil {
		r.OnStart()
	}
	var onEvent func(wire.Event)
	if job.Stream {
		onEvent = func(ev wire.Event) {
			var w io.Writer
			switch ev.Type {
			case "stdout":
				w = xr.Stdout
			case "stderr":
				w = xr.Stderr
			case "compile":
				w = xr.CompileOutput
			}
			if w == nil {
				return
			}
			data := []byte(ev.Data)
			if ev.Encoding == "base64" {
				var derr error
				if data, derr = base64.StdEncoding.DecodeString(ev.Data); derr != nil {
					return
				}
			}
			_, _ = w.Write(data)
		}
	}
	start := time.Now()
	var res *wire.Result
	if id := r.Wire.SessionID; id != "" {
		// A session's runs go to the worker that holds it.
		job.Interpreter = r.Wire.Interpreter
		var gone []string
		for try := 0; try < 3; try++ {
			var worker string
			if worker, err = sess.Place(ctx, id, gone...); err != nil {
				break
			}
			if res, err = s.remote.RunOn(ctx, worker, job, onEvent); !cluster.IsWorkerGone(err) {
				break
			}
			gone = append(gone, worker)
		}
		if err == nil && job.Interpreter && sess.TakeMoved(ctx, id) {
			res.Restarted = true // its interpreter's state stayed with the worker that is gone
		}
	} else {
		res, err = s.remote.Run(ctx, job, onEvent)
	}
	if err != nil {
		return nil, s.remoteError(ctx, err)
	}
	s.observe(r, res, time.Since(queued), time.Since(start))
	return res, nil
}

// remoteError is an error of cluster.Conn.Run as an *Error.
func (s *Service) remoteError(ctx context.Context, err error) error {
	var re *cluster.RunError
	switch {
	case ctx.Err() != nil:
		return &Error{Kind: Canceled, Msg: "execution canceled", Err: err}
	case !errors.As(err, &re):
		s.log.Error("cluster run failed", "error", err)
		return &Error{Kind: Busy, Msg: "the cluster is unavailable: " + err.Error(), Err: err}
	case re.Kind == cluster.KindInvalid:
		s.metrics.Rejected.WithLabelValues("invalid").Inc()
		return &Error{Kind: Invalid, Msg: re.Msg, Err: err}
	case re.Kind == cluster.KindBusy:
		s.metrics.Rejected.WithLabelValues("busy").Inc()
		return &Error{Kind: Busy, Msg: re.Msg, Err: err}
	case re.Kind == cluster.KindDeadline:
		return &Error{Kind: Busy, Msg: re.Msg, Err: err}
	}
	s.log.Error("cluster run failed", "error", err)
	return &Error{Kind: Internal, Msg: "execution failed: " + re.Msg, Err: err}
}

// RunJob runs a job the cluster gave this worker: checked against this
// worker's own configuration as a request to its API would be, then run
// through Run, its output sent as events when the job asks for them.
func (s *Service) RunJob(ctx context.Context, job cluster.Job, emit func(wire.Event)) (*wire.Result, error) {
	req := job.Request
	req.TimeoutAuto, req.Interpreter = job.TimeoutAuto, job.Interpreter
	if req.SessionID != "" && !job.Pinned {
		return nil, cluster.Invalid("a session's run must go to the worker that holds the session")
	}
	for _, check := range []func() error{
		func() error { return Check(&req, &s.cfg.App) },
		func() error { return s.CheckLanguage(&req) },
		func() error { return s.Validate(&req) },
	} {
		if err := check(); err != nil {
			return nil, cluster.Invalid(err.Error())
		}
	}
	xreq := ToExecutor(&req)
	if job.Interactive {
		xreq.Stdin = job.Stdin
	}
	if job.Stream {
		var mu sync.Mutex
		offsets := map[string]int64{}
		stream := func(name string) io.Writer {
			return writerFunc(func(p []byte) (int, error) {
				mu.Lock()
				defer mu.Unlock()
				ev := wire.Event{Type: name, Offset: offsets[name]}
				ev.Data, ev.Encoding = wire.EncodeOutput(p)
				offsets[name] += int64(len(p))
				emit(ev)
				return len(p), nil
			})
		}
		xreq.Stdout, xreq.Stderr, xreq.CompileOutput = stream("stdout"), stream("stderr"), stream("compile")
	}
	res, err := s.Run(ctx, Run{Request: xreq, Tenant: job.Tenant, Via: "cluster"})
	if err != nil {
		switch KindOf(err) {
		case Invalid:
			return nil, cluster.Invalid(err.Error())
		case QueueFull, Busy, Draining, Full:
			return nil, &cluster.RunError{Kind: cluster.KindBusy, Msg: err.Error()}
		}
		return nil, err
	}
	res.ExecutionID = job.ID
	return res, nil
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
