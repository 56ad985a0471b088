package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/jobs"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// workWith runs c.WorkWith(o) in the background until stop (also called
// at cleanup), which waits for it to return; id is the worker's.
func (e *env) workWith(c *Conn, o WorkOptions) (id string, stop func()) {
	e.t.Helper()
	ids := make(chan string, 1)
	onStart := o.OnStart
	o.OnStart = func(id string) {
		ids <- id
		if onStart != nil {
			onStart(id)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.WorkWith(ctx, o) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					e.t.Errorf("WorkWith: %v", err)
				}
			case <-time.After(bounded):
				e.t.Errorf("WorkWith did not return after its context ended")
			}
		})
	}
	e.t.Cleanup(stop)
	select {
	case id = <-ids:
	case err := <-done:
		e.t.Fatalf("WorkWith returned before it started: %v", err)
	case <-time.After(bounded):
		e.t.Fatal("timed out waiting for the worker to start")
	}
	return id, stop
}

// waitWorkers waits until the live workers are exactly ids.
func waitWorkers(t *testing.T, c *Conn, ids ...string) {
	t.Helper()
	eventually(t, fmt.Sprintf("workers %v", ids), func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ws, err := c.Workers(ctx)
		if err != nil || len(ws) != len(ids) {
			return false, fmt.Sprint(ws, err)
		}
		for _, w := range ws {
			found := false
			for _, id := range ids {
				found = found || w.ID == id
			}
			if !found {
				return false, fmt.Sprint(ws)
			}
		}
		return true, ""
	})
}

// recordingNotifier is a jobs.Notifier that accepts every callback at
// once (HTTP 200), but refuses to try URLs with "refuse" in them.
type recordingNotifier struct {
	mu    sync.Mutex
	calls []notifyCall
}

type notifyCall struct {
	url, id string
	body    []byte
}

func (n *recordingNotifier) Deliver(ctx context.Context, url, id string, body []byte, report func(jobs.Attempt)) (int, error) {
	n.mu.Lock()
	n.calls = append(n.calls, notifyCall{url: url, id: id, body: append([]byte(nil), body...)})
	n.mu.Unlock()
	if strings.Contains(url, "refuse") {
		return 0, errors.New("callback URL refused: not an allowed host")
	}
	report(jobs.Attempt{At: time.Now(), HTTPStatus: 200})
	return 1, nil
}

func (n *recordingNotifier) callsFor(id string) []notifyCall {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []notifyCall
	for _, c := range n.calls {
		if c.id == id {
			out = append(out, c)
		}
	}
	return out
}

// doneJob is the part of a finished job's answer the tests look at.
type doneJob struct {
	ExecutionID           string               `json:"execution_id"`
	Status                string               `json:"status"`
	ExitCode              int                  `json:"exit_code"`
	Stdout                string               `json:"stdout"`
	StdoutTruncated       bool                 `json:"stdout_truncated"`
	Error                 string               `json:"error"`
	ResultTruncated       bool                 `json:"result_truncated"`
	ResultTruncatedReason string               `json:"result_truncated_reason"`
	CreatedAt             time.Time            `json:"created_at"`
	StartedAt             time.Time            `json:"started_at"`
	FinishedAt            time.Time            `json:"finished_at"`
	Callback              *wire.CallbackStatus `json:"callback"`
}

// asyncRun is the RunFunc of the async jobs' workers, by the request's
// code.
func asyncRunFunc(release <-chan struct{}) RunFunc {
	return func(ctx context.Context, j Job, emit func(wire.Event)) (*wire.Result, error) {
		if !j.Async {
			return nil, Invalid("not an async job")
		}
		switch j.Request.Code {
		case "fail":
			return nil, errors.New("boom: the sandbox could not be built")
		case "nil":
			return nil, nil
		case "big":
			return result("not-the-job-id", strings.Repeat("x", 20000)), nil
		case "slow":
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		// Not the job's id: the stored result gets it.
		return result("not-the-job-id", "hi "+j.Tenant+" "+j.Request.Code), nil
	}
}

// TestAsyncJobs runs async jobs end to end: submitted by an API node,
// run by a worker, their results and callbacks' states answered by Get.
func TestAsyncJobs(t *testing.T) {
	e := newEnv(t)
	api := e.conn("api")
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()
	jb := api.Jobs(JobsConfig{ResultTTL: time.Hour})
	release := make(chan struct{})
	var releaseOnce sync.Once
	releaseSlow := func() { releaseOnce.Do(func() { close(release) }) }
	defer releaseSlow()

	if err := jb.Available(ctx); err != nil {
		t.Fatal(err)
	}
	submit := func(jb *Jobs, key, code, callback string) string {
		t.Helper()
		st, err := jb.Submit(ctx, key, "python", &wire.ExecuteRequest{Language: "python", Code: code, CallbackURL: callback})
		if err != nil {
			t.Fatalf("Submit %s: %v", code, err)
		}
		if !strings.HasPrefix(st.ExecutionID, "exec_") || st.Status != jobs.StateQueued || st.CreatedAt.IsZero() {
			t.Fatalf("submitted: %+v", st)
		}
		if (callback != "") != (st.Callback != nil) || (st.Callback != nil && st.Callback.Status != jobs.CallbackPending) {
			t.Fatalf("submitted with callback %q: %+v", callback, st.Callback)
		}
		return st.ExecutionID
	}
	get := func(id, key string) doneJob {
		t.Helper()
		a, err := jb.Get(ctx, id, key, bounded)
		if err != nil || !a.Done {
			t.Fatalf("Get %s: %+v, %v", id, a, err)
		}
		var d doneJob
		if err := json.Unmarshal(a.Result, &d); err != nil {
			t.Fatalf("answer %s: %v", a.Result, err)
		}
		if d.ExecutionID != id || d.CreatedAt.IsZero() || d.StartedAt.IsZero() || d.FinishedAt.IsZero() ||
			d.StartedAt.Before(d.CreatedAt) || d.FinishedAt.Before(d.StartedAt) {
			t.Fatalf("answer of %s: %s", id, a.Result)
		}
		return d
	}
	// callbackState waits until job id's callback is no longer pending.
	callbackState := func(id, key string) *wire.CallbackStatus {
		t.Helper()
		var cb *wire.CallbackStatus
		eventually(t, "the callback of "+id+" settled", func() (bool, string) {
			d := get(id, key)
			cb = d.Callback
			if cb == nil {
				t.Fatalf("job %s has no callback state", id)
			}
			return cb.Status != jobs.CallbackPending, cb.Status
		})
		return cb
	}

	// A worker without a notifier: a callback fails.
	wkA := e.conn("worker-a")
	_, stopA := e.workWith(wkA, WorkOptions{Slots: 1, Run: asyncRunFunc(release)})
	id := submit(jb, "key1", "print(1)", "http://127.0.0.1:9/hook")
	if d := get(id, "key1"); d.Stdout != "hi key1 print(1)" {
		t.Fatalf("the job's result: %+v", d)
	}
	if cb := callbackState(id, "key1"); cb.Status != jobs.CallbackFailed || !strings.Contains(cb.Error, "sends no callbacks") || cb.FailedAt.IsZero() {
		t.Fatalf("the callback without a notifier: %+v", cb)
	}
	eventually(t, "the job acknowledged", func() (bool, string) {
		n, err := api.PendingJobs(ctx)
		return err == nil && n == 0, fmt.Sprint(n, err)
	})
	stopA()

	// A worker with a notifier and a small result cap.
	notify := &recordingNotifier{}
	wkB := e.conn("worker-b")
	idB, _ := e.workWith(wkB, WorkOptions{Slots: 2, Run: asyncRunFunc(release), Notify: notify, MaxResultBytes: 4096,
		Log: slog.New(slog.DiscardHandler)})
	waitWorkers(t, api, idB)

	id = submit(jb, "key1", "print(2)", "")
	d := get(id, "key1")
	if d.Stdout != "hi key1 print(2)" || d.Status != "" || d.Callback != nil || d.ResultTruncated {
		t.Fatalf("the job's result: %+v", d)
	}
	// Only its key sees it.
	for _, c := range []struct{ id, key string }{{id, "key2"}, {id, ""}, {"exec_nosuchjob", "key1"}, {"exec.bad", "key1"}, {strings.Repeat("x", 65), "key1"}} {
		if _, err := jb.Get(ctx, c.id, c.key, 0); !errors.Is(err, jobs.ErrNotFound) {
			t.Fatalf("Get %s as %q: %v", c.id, c.key, err)
		}
	}
	// A result whose TTL passed is gone.
	if _, err := api.Jobs(JobsConfig{ResultTTL: time.Nanosecond}).Get(ctx, id, "key1", 0); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("Get of an expired result: %v", err)
	}

	// The run's error, or no result, is a failed result.
	id = submit(jb, "key1", "fail", "")
	if d := get(id, "key1"); d.Status != string(wire.StatusSetupError) || d.ExitCode != -1 || !strings.Contains(d.Error, "boom") {
		t.Fatalf("a failed run's result: %+v", d)
	}
	id = submit(jb, "key1", "nil", "")
	if d := get(id, "key1"); d.Status != string(wire.StatusSetupError) || !strings.Contains(d.Error, "no result") {
		t.Fatalf("no result: %+v", d)
	}

	// A result past MaxResultBytes is cut down.
	id = submit(jb, "key1", "big", "")
	a, err := jb.Get(ctx, id, "key1", bounded)
	if err != nil || !a.Done {
		t.Fatalf("Get: %+v, %v", a, err)
	}
	if len(a.Result) > 4096+1024 {
		t.Fatalf("the capped result is %d bytes", len(a.Result))
	}
	if d := get(id, "key1"); !d.ResultTruncated || !d.StdoutTruncated || len(d.Stdout) >= 20000 || !strings.HasPrefix(d.Stdout, "xxx") ||
		!strings.Contains(d.ResultTruncatedReason, "larger than a cluster stores") {
		t.Fatalf("the big result: truncated %v, stdout %d bytes, reason %q", d.ResultTruncated, len(d.Stdout), d.ResultTruncatedReason)
	}

	// A callback is delivered once, and its state stored.
	id = submit(jb, "key2", "print(3)", "http://receiver.example/hook")
	if d := get(id, "key2"); d.Stdout != "hi key2 print(3)" {
		t.Fatalf("the job's result: %+v", d)
	}
	cb := callbackState(id, "key2")
	if cb.Status != jobs.CallbackDelivered || cb.Attempts != 1 || cb.LastHTTPStatus != 200 || cb.DeliveredAt.IsZero() || cb.LastAttemptAt.IsZero() || cb.Error != "" {
		t.Fatalf("the delivered callback: %+v", cb)
	}
	eventually(t, "the job acknowledged", func() (bool, string) {
		n, err := api.PendingJobs(ctx)
		return err == nil && n == 0, fmt.Sprint(n, err)
	})
	calls := notify.callsFor(id)
	if len(calls) != 1 || calls[0].url != "http://receiver.example/hook" {
		t.Fatalf("deliveries: %+v", calls)
	}
	var body doneJob
	if err := json.Unmarshal(calls[0].body, &body); err != nil || body.ExecutionID != id || body.Stdout != "hi key2 print(3)" ||
		body.FinishedAt.IsZero() || body.Callback != nil {
		t.Fatalf("the callback's body %s: %v", calls[0].body, err)
	}

	// A notifier that refuses to try: failed, with its reason.
	id = submit(jb, "key2", "print(4)", "http://refuse.example/hook")
	if cb := callbackState(id, "key2"); cb.Status != jobs.CallbackFailed || !strings.Contains(cb.Error, "refused") || cb.Attempts != 0 {
		t.Fatalf("the refused callback: %+v", cb)
	}

	// A long poll returns once the job is done; a bounded queue refuses
	// a job past it.
	id = submit(jb, "key1", "slow", "")
	polled := make(chan jobs.Answer, 1)
	go func() {
		a, err := jb.Get(ctx, id, "key1", bounded)
		if err != nil {
			t.Errorf("long poll: %v", err)
		}
		polled <- a
	}()
	eventually(t, "the slow job running", func() (bool, string) {
		a, err := jb.Get(ctx, id, "key1", 0)
		if err != nil {
			return false, err.Error()
		}
		if a.Done {
			t.Fatalf("the slow job finished before it was released: %s", a.Result)
		}
		return a.Status.Status == jobs.StateRunning && a.Status.ExecutionID == id && !a.Status.StartedAt.IsZero(), fmt.Sprintf("%+v", a.Status)
	})
	eventually(t, "the slow job counted", func() (bool, string) {
		n, err := api.PendingJobs(ctx)
		return err == nil && n == 1, fmt.Sprint(n, err)
	})
	_, err = api.Jobs(JobsConfig{Queue: 1}).Submit(ctx, "key1", "python", &wire.ExecuteRequest{Language: "python", Code: "print(5)"})
	var je *jobs.Error
	if !errors.As(err, &je) || je.Kind != jobs.QueueFull || !strings.Contains(je.Msg, "1 async executions are queued") {
		t.Fatalf("Submit past the queue: %#v", err)
	}
	select {
	case a := <-polled:
		t.Fatalf("the long poll returned while the job ran: %+v", a)
	default:
	}
	releaseSlow()
	if a := wait(t, polled, "the long poll"); !a.Done || !strings.Contains(string(a.Result), `"stdout":"hi key1 slow"`) {
		t.Fatalf("the long poll: %+v %s", a, a.Result)
	}
	eventually(t, "no async job pending", func() (bool, string) {
		n, err := api.PendingJobs(ctx)
		return err == nil && n == 0, fmt.Sprint(n, err)
	})

	// A node that lost its connection says the jobs are unavailable.
	closed := e.conn("closed")
	closed.Close()
	cj := closed.Jobs(JobsConfig{Queue: 10})
	for what, err := range map[string]error{
		"Available": cj.Available(ctx),
		"Submit": func() error {
			_, err := cj.Submit(ctx, "key1", "python", &wire.ExecuteRequest{Language: "python"})
			return err
		}(),
		"Get": func() error { _, err := cj.Get(ctx, id, "key1", 0); return err }(),
	} {
		if !errors.As(err, &je) || je.Kind != jobs.Unavailable {
			t.Fatalf("%s on a closed connection: %#v", what, err)
		}
	}
}
