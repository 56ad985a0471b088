package clusternode

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/lib/records"
	"github.com/sandbox-run/sandbox-run/pkg/cluster"
	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// The run service in a cluster (pkg/cluster), both sides of it:
//   - on an API node that runs no sandboxes itself (Remote), runner.Run sends
//     each run to the cluster's workers, after the same checks, with the
//     same admission answers (a full cluster is QueueFull), log line and
//     metrics, and its output streamed back to the transport's writers;
//   - on a worker, runJob runs a job the cluster gave it through Run, as a
//     local request.
//
// Sessions (with Remote's sess): their metadata is the cluster's,
// their runs go to the worker that holds each (cluster.Sessions.Place),
// and the run service's session checks (UseSession) work as on one node.

// remote sends an API node's runs to the cluster's workers: a
// runner.Remote, with the cluster's admission (a full cluster is
// QueueFull) and its sessions (their runs go to the worker that holds
// each).
type remote struct {
	c         *cluster.Conn
	admission *cluster.Admission
	sess      *cluster.Sessions
	cfg       config.Config
	log       *slog.Logger
}

var _ runner.Remote = (*remote)(nil)

// Remote is the runner.Remote of an API node of c: at most queue runs
// wait beyond the workers' slots; sess (nil: none) keeps its sessions.
func Remote(c *cluster.Conn, queue int, sess *cluster.Sessions, cfg config.Config, log *slog.Logger) runner.Remote {
	return &remote{c: c, admission: c.Admission(queue), sess: sess, cfg: cfg, log: log}
}

func (s *remote) Sessions() bool { return s.sess != nil }

// clusterSlack is how long past its limits a job may wait for a worker
// before the worker refuses it.
const clusterSlack = 5 * time.Minute

// Run sends r to the cluster's workers and streams its output back to
// r's writers.
func (s *remote) Run(ctx context.Context, r *runner.Run) (*wire.Result, error) {
	sess := s.sess
	if r.Request.SessionID != "" && sess == nil {
		return nil, &runner.Error{Kind: runner.Invalid, Msg: "this cluster's API node keeps no sessions"}
	}
	sent, err := s.admission.Admit(ctx)
	if err != nil {
		var full *cluster.FullError
		if errors.As(err, &full) {
			return nil, &runner.Error{Kind: runner.QueueFull, Msg: err.Error(), Err: err}
		}
		if ctx.Err() != nil {
			return nil, &runner.Error{Kind: runner.Canceled, Msg: "execution canceled", Err: err}
		}
		return nil, &runner.Error{Kind: runner.Busy, Msg: "the cluster is unavailable: " + err.Error(), Err: err}
	}
	mx := s.cfg.Maximums
	job := cluster.Job{
		ID: records.NewID("exec_"), Tenant: r.Tenant, Request: *r.Request, TimeoutAuto: r.Request.TimeoutAuto,
		Deadline:    time.Now().Add(time.Duration((mx.TimeoutSeconds+mx.CompileTimeoutSeconds)*float64(time.Second)) + clusterSlack),
		OnSubmitted: sent,
	}
	job.Stream = r.Stdout != nil || r.Stderr != nil || r.CompileOutput != nil
	if r.Interactive && r.Stdin != nil {
		// The whole of stdin (input_data first) goes from here.
		job.Interactive, job.Stdin, job.Request.InputData, job.Request.InputDataEncoding = true, r.Stdin, "", ""
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
				w = r.Stdout
			case "stderr":
				w = r.Stderr
			case "compile":
				w = r.CompileOutput
			case "progress":
				w = r.Progress
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
	var res *wire.Result
	if id := r.Request.SessionID; id != "" {
		// A session's runs go to the worker that holds it.
		job.Interpreter = r.Request.Interpreter
		var gone []string
		for try := 0; try < 3; try++ {
			var worker string
			if worker, err = sess.Place(ctx, id, gone...); err != nil {
				break
			}
			if res, err = s.c.RunOn(ctx, worker, job, onEvent); !cluster.IsWorkerGone(err) {
				break
			}
			gone = append(gone, worker)
		}
		if err == nil && job.Interpreter && sess.TakeMoved(ctx, id) {
			res.Restarted = true // its interpreter's state stayed with the worker that is gone
		}
	} else {
		res, err = s.c.Run(ctx, job, onEvent)
	}
	if err != nil {
		return nil, s.remoteError(ctx, err)
	}
	return res, nil
}

// remoteError is an error of cluster.Conn.Run as a *runner.Error.
func (s *remote) remoteError(ctx context.Context, err error) error {
	var re *cluster.RunError
	switch {
	case ctx.Err() != nil:
		return &runner.Error{Kind: runner.Canceled, Msg: "execution canceled", Err: err}
	case !errors.As(err, &re):
		s.log.Error("cluster run failed", "error", err)
		return &runner.Error{Kind: runner.Busy, Msg: "the cluster is unavailable: " + err.Error(), Err: err}
	case re.Kind == cluster.KindInvalid:
		return &runner.Error{Kind: runner.Invalid, Msg: re.Msg, Err: err}
	case re.Kind == cluster.KindBusy, re.Kind == cluster.KindDeadline:
		return &runner.Error{Kind: runner.Busy, Msg: re.Msg, Err: err}
	}
	s.log.Error("cluster run failed", "error", err)
	return &runner.Error{Kind: runner.Internal, Msg: "execution failed: " + re.Msg, Err: err}
}

// runJob runs a job the cluster gave this worker through s: checked against
// this worker's own configuration as a request to its API would be, then
// run through s.Run, its output sent as events when the job asks for them.
func runJob(s *runner.Service, cfg *config.Config) func(ctx context.Context, job cluster.Job, emit func(wire.Event)) (*wire.Result, error) {
	return func(ctx context.Context, job cluster.Job, emit func(wire.Event)) (*wire.Result, error) {
		return runJobWith(ctx, s, cfg, job, emit)
	}
}

func runJobWith(ctx context.Context, s *runner.Service, cfg *config.Config, job cluster.Job, emit func(wire.Event)) (*wire.Result, error) {
	req := job.Request
	req.TimeoutAuto, req.Interpreter = job.TimeoutAuto, job.Interpreter
	if req.SessionID != "" && !job.Pinned {
		return nil, cluster.Invalid("a session's run must go to the worker that holds the session")
	}
	if err := runner.Check(&req, cfg); err != nil {
		return nil, cluster.Invalid(err.Error())
	}
	if err := s.CheckRun(&req); err != nil { // its session is this worker's, pinned
		return nil, cluster.Invalid(err.Error())
	}
	run := runner.Run{Request: &req, Tenant: job.Tenant, Via: "cluster"}
	if job.Interactive {
		run.Stdin = job.Stdin
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
		run.Stdout, run.Stderr, run.CompileOutput, run.Progress = stream("stdout"), stream("stderr"), stream("compile"), stream("progress")
	}
	res, err := s.Run(ctx, run)
	if err != nil {
		switch runner.KindOf(err) {
		case runner.Invalid:
			return nil, cluster.Invalid(err.Error())
		case runner.QueueFull, runner.Busy, runner.Draining, runner.Full:
			return nil, &cluster.RunError{Kind: cluster.KindBusy, Msg: err.Error()}
		}
		return nil, err
	}
	res.ExecutionID = job.ID
	return res, nil
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
