package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sandbox-run/sandbox-run/internal/testkit/natstest"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// A test re-executes its own binary with these set to run a worker in a
// child process it can SIGKILL.
const (
	childURLsEnv    = "SR_CLUSTER_TEST_WORKER_URLS"
	childAckWaitEnv = "SR_CLUSTER_TEST_WORKER_ACKWAIT"
)

func TestMain(m *testing.M) {
	if urls := os.Getenv(childURLsEnv); urls != "" {
		childWorker(urls)
		return
	}
	os.Exit(m.Run())
}

// childWorker works with one slot: a run emits "started" and then hangs
// until the process is killed. It exits when its stdin closes (the test
// binary died), so it never outlives the test.
func childWorker(urls string) {
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(3)
	}()
	ackWait, _ := time.ParseDuration(os.Getenv(childAckWaitEnv))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	c, err := Connect(ctx, Options{URLs: strings.Split(urls, ","), Name: "child", AckWait: ackWait, Insecure: true,
		Keys: testKeys(nil, "worker")})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "child worker:", err)
		os.Exit(2)
	}
	_ = c.Work(context.Background(), 1, func(ctx context.Context, job Job, emit func(wire.Event)) (*wire.Result, error) {
		emit(wire.Event{Type: "stdout", Data: "started"})
		select {} // until SIGKILL
	})
	os.Exit(1)
}

const (
	testAckWait = 2 * time.Second
	bounded     = 60 * time.Second // every wait of these tests
)

type env struct {
	t  *testing.T
	nc *natstest.Cluster
}

func newEnv(t *testing.T) *env {
	return &env{t: t, nc: natstest.StartCluster(t, 3)}
}

// conn connects with the test ack wait; closed at cleanup.
func (e *env) conn(name string) *Conn {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()
	c, err := Connect(ctx, Options{URLs: e.nc.URLList(), Name: name, AckWait: testAckWait, Insecure: true, Keys: testKeys(e.t, name)})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(c.Close)
	return c
}

// The test cluster's signing keys (fixed: a child worker process signs
// with them too). Not secret: made for these tests only.
var (
	keysSeeds = [2]string{"SUALVMDRINE2MZABCU2WY2DFG3FF7JWCRAFNNC3D7KIELBGTDKV4EQ22ZE", "SUABY6GPORDXOKI6VT6OYQ5VCWSB6UNKSJZTZCL7GRTSGYLDSUUDREGHR4"}
	keysPubs  = map[string][]string{RoleAPI: {"UAODCZN4IUR2DRUMYVYDAWZGAQGBQK2VUTTABHOXPCQAKWZADWB2YCSD"},
		RoleWorker: {"UCCDAK5F3SEB7UFZETJLCCL2RNV7HPCH5V6VR6GMY5ABI5GYVCXDW7IX"}}
)

// testKeys are the signing keys of a node named name: a worker's when the
// name says so, else an API node's. Every test's nodes sign and check.
func testKeys(t testing.TB, name string) *Keys {
	if t != nil {
		t.Helper()
	}
	role, seed := RoleAPI, keysSeeds[0]
	if strings.HasPrefix(name, "worker") {
		role, seed = RoleWorker, keysSeeds[1]
	}
	k, err := NewKeys(role, seed, keysPubs)
	if err != nil {
		panic(err)
	}
	return k
}

// work runs c.Work in the background; it is stopped and waited for at
// cleanup.
func (e *env) work(c *Conn, slots int, run RunFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Work(ctx, slots, run) }()
	e.t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				e.t.Errorf("Work: %v", err)
			}
		case <-time.After(bounded):
			e.t.Errorf("Work did not return after its context ended")
		}
	})
}

type runOut struct {
	res    *wire.Result
	err    error
	events []wire.Event
}

// goRun runs job from api in the background.
func goRun(ctx context.Context, api *Conn, job Job) chan runOut {
	ch := make(chan runOut, 1)
	go func() {
		var o runOut
		o.res, o.err = api.Run(ctx, job, func(ev wire.Event) { o.events = append(o.events, ev) })
		ch <- o
	}()
	return ch
}

func wait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(bounded):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// eventually polls cond until it holds, for a bounded time.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(bounded)
	lastState := ""
	for {
		ok, state := cond()
		if ok {
			return
		}
		if state != lastState {
			t.Logf("waiting for %s: %s", what, state)
			lastState = state
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s (last: %s)", what, state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func job(id string) Job {
	return Job{ID: id, Tenant: "t1", Request: wire.ExecuteRequest{Language: "python", Code: "print(1)"}, Deadline: time.Now().Add(5 * time.Minute)}
}

func result(id, stdout string) *wire.Result {
	r := &wire.Result{ExecutionID: id}
	r.Stdout = stdout
	return r
}

func waitEmpty(t *testing.T, c *Conn) {
	t.Helper()
	eventually(t, "no job pending", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		n, err := c.Pending(ctx)
		if err != nil {
			return false, err.Error()
		}
		info, err := c.stream.Info(ctx)
		if err != nil {
			return false, err.Error()
		}
		return n == 0 && info.State.Msgs == 0, fmt.Sprintf("pending %d, stream msgs %d", n, info.State.Msgs)
	})
}

func TestRunRoundTrip(t *testing.T) {
	e := newEnv(t)
	api, wk := e.conn("api"), e.conn("worker")
	var got Job
	e.work(wk, 2, func(ctx context.Context, j Job, emit func(wire.Event)) (*wire.Result, error) {
		got = j
		for i := range 3 {
			emit(wire.Event{Type: "stdout", Offset: int64(i), Data: fmt.Sprint(i)})
		}
		return result(j.ID, "012"), nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()
	var events []wire.Event
	j := job("exec-1")
	j.Request.Files = map[string]wire.FileData{"a.txt": wire.FileData("data"), "b.bin": {0xff, 0}}
	res, err := api.Run(ctx, j, func(ev wire.Event) { events = append(events, ev) })
	if err != nil {
		t.Fatal(err)
	}
	if res.ExecutionID != "exec-1" || res.Stdout != "012" {
		t.Fatalf("result %+v", res)
	}
	if len(events) != 3 {
		t.Fatalf("events %+v", events)
	}
	for i, ev := range events {
		if ev.Data != fmt.Sprint(i) || ev.Offset != int64(i) {
			t.Fatalf("event %d = %+v", i, ev)
		}
	}
	if got.Tenant != "t1" || got.Request.Code != "print(1)" || string(got.Request.Files["a.txt"]) != "data" || string(got.Request.Files["b.bin"]) != "\xff\x00" ||
		got.Attempt != 1 || !got.Deadline.Equal(j.Deadline) {
		t.Fatalf("the worker got %+v", got)
	}
	waitEmpty(t, api)
}

func TestRunErrorIsTyped(t *testing.T) {
	e := newEnv(t)
	api, wk := e.conn("api"), e.conn("worker")
	e.work(wk, 1, func(ctx context.Context, j Job, emit func(wire.Event)) (*wire.Result, error) {
		if j.Request.Language == "cobol" {
			return nil, Invalid("unknown language cobol")
		}
		return nil, errors.New("disk full")
	})
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()
	j := job("exec-invalid")
	j.Request.Language = "cobol"
	_, err := api.Run(ctx, j, nil)
	var re *RunError
	if !errors.As(err, &re) || re.Kind != KindInvalid || re.Msg != "unknown language cobol" {
		t.Fatalf("err = %#v", err)
	}
	_, err = api.Run(ctx, job("exec-internal"), nil)
	if !errors.As(err, &re) || re.Kind != KindInternal || re.Msg != "disk full" {
		t.Fatalf("err = %#v", err)
	}
	j = job("exec-late")
	j.Deadline = time.Now().Add(-time.Second)
	_, err = api.Run(ctx, j, nil)
	if !errors.As(err, &re) || re.Kind != KindDeadline {
		t.Fatalf("err = %#v", err)
	}
	if _, err := api.Run(ctx, Job{ID: "a.b"}, nil); err == nil {
		t.Fatal("a job id with a dot was accepted")
	}

	// A job the worker cannot read (a field from a newer API node): the
	// caller is told, not left waiting.
	sub, err := api.nc.SubscribeSync(replyPrefix + "exec-new")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	future := []byte(`{"id":"exec-new","request":{"language":"python","code":"1","from_the_future":1}}`)
	if _, err := api.js.Publish(ctx, syncSubject, api.seal(kindJob, "exec-new", future)); err != nil {
		t.Fatal(err)
	}
	msg, err := sub.NextMsgWithContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = msg.Respond(nil)
	if !strings.Contains(string(msg.Data), `"kind":"invalid"`) || !strings.Contains(string(msg.Data), "from_the_future") {
		t.Fatalf("reply %s", msg.Data)
	}
	waitEmpty(t, api)
}

func TestCapacity(t *testing.T) {
	e := newEnv(t)
	api, wk := e.conn("api"), e.conn("worker")
	started := make(chan string, 2)
	release := map[string]chan struct{}{"exec-a": make(chan struct{}), "exec-b": make(chan struct{})}
	e.work(wk, 1, func(ctx context.Context, j Job, emit func(wire.Event)) (*wire.Result, error) {
		started <- j.ID
		<-release[j.ID]
		return result(j.ID, j.ID), nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()
	eventually(t, "the worker announced", func() (bool, string) {
		ws, err := api.Workers(ctx)
		return err == nil && len(ws) == 1 && ws[0].Free == 1 && ws[0].Slots == 1, fmt.Sprint(ws, err)
	})
	a := goRun(ctx, api, job("exec-a"))
	b := goRun(ctx, api, job("exec-b"))
	first := wait(t, started, "a job started")
	second := map[string]string{"exec-a": "exec-b", "exec-b": "exec-a"}[first]

	// While the only slot is busy the other job stays in the stream: one
	// taken (ack pending), one waiting, none handed out.
	eventually(t, "one running, one waiting", func() (bool, string) {
		info, err := wk.cons.Info(ctx)
		if err != nil {
			return false, err.Error()
		}
		return info.NumAckPending == 1 && info.NumPending == 1, fmt.Sprintf("ack pending %d, pending %d", info.NumAckPending, info.NumPending)
	})
	eventually(t, "the worker shows no free slot", func() (bool, string) {
		ws, err := api.Workers(ctx)
		return err == nil && len(ws) == 1 && ws[0].Free == 0, fmt.Sprint(ws, err)
	})
	if n, err := api.Pending(ctx); err != nil || n != 2 {
		t.Fatalf("Pending = %d, %v; want 2", n, err)
	}
	select {
	case id := <-started:
		t.Fatalf("%s started while the only slot was busy", id)
	default:
	}

	close(release[first])
	if got := wait(t, started, "the second job started"); got != second {
		t.Fatalf("started %s, want %s", got, second)
	}
	close(release[second])
	for _, ch := range []chan runOut{a, b} {
		o := wait(t, ch, "a result")
		if o.err != nil {
			t.Fatal(o.err)
		}
	}
	waitEmpty(t, api)
	eventually(t, "the slot free again", func() (bool, string) {
		ws, err := api.Workers(ctx)
		return err == nil && len(ws) == 1 && ws[0].Free == 1, fmt.Sprint(ws, err)
	})
}

func TestCancel(t *testing.T) {
	e := newEnv(t)
	api, wk := e.conn("api"), e.conn("worker")
	started := make(chan struct{})
	canceled := make(chan time.Time, 1)
	e.work(wk, 1, func(ctx context.Context, j Job, emit func(wire.Event)) (*wire.Result, error) {
		close(started)
		select {
		case <-ctx.Done():
			canceled <- time.Now()
			return nil, ctx.Err()
		case <-time.After(bounded):
			return result(j.ID, "not canceled"), nil
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	out := goRun(ctx, api, job("exec-cancel"))
	wait(t, started, "the run started")
	cancel()
	at := time.Now()
	o := wait(t, out, "Run to return")
	if !errors.Is(o.err, context.Canceled) {
		t.Fatalf("Run: %v, %+v", o.err, o.res)
	}
	when := wait(t, canceled, "the run's context to end")
	// "Within a second", with a margin for a busy machine.
	d := when.Sub(at)
	if d > 3*time.Second {
		t.Fatalf("the run was canceled %v after Run's context", d)
	}
	t.Logf("canceled %v after Run's context", d)
	waitEmpty(t, api)
}

func TestCancelQueuedJobIsWithdrawn(t *testing.T) {
	e := newEnv(t)
	api := e.conn("api")
	// No worker: the job waits in the stream until Run gives up.
	ctx, cancel := context.WithCancel(context.Background())
	out := goRun(ctx, api, job("exec-queued"))
	eventually(t, "the job queued", func() (bool, string) {
		n, err := api.Pending(context.Background())
		return err == nil && n == 1, fmt.Sprint(n, err)
	})
	cancel()
	if o := wait(t, out, "Run to return"); !errors.Is(o.err, context.Canceled) {
		t.Fatal(o.err)
	}
	waitEmpty(t, api)
}

// TestWorkerDies SIGKILLs a worker process mid-run: the job goes to
// another worker after the ack wait and Run gets that one's result.
func TestWorkerDies(t *testing.T) {
	e := newEnv(t)
	api := e.conn("api")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command(exe, "-test.run=^$")
	child.Env = append(os.Environ(), childURLsEnv+"="+e.nc.URLs(), childAckWaitEnv+"="+testAckWait.String())
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var childOut strings.Builder
	child.Stdout, child.Stderr = &childOut, &childOut
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	childDone := make(chan struct{})
	var childErr error
	go func() { childErr = child.Wait(); close(childDone) }()
	t.Cleanup(func() {
		_ = child.Process.Kill()
		stdin.Close()
		wait(t, childDone, "the child worker to exit")
	})

	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()
	events := make(chan wire.Event, 16)
	out := make(chan runOut, 1)
	go func() {
		res, err := api.Run(ctx, job("exec-dies"), func(ev wire.Event) { events <- ev })
		out <- runOut{res: res, err: err}
	}()
	if ev := wait(t, events, "the child worker to start the run"); ev.Data != "started" {
		t.Fatalf("event %+v", ev)
	}
	if err := child.Process.Kill(); err != nil { // SIGKILL, by PID
		t.Fatal(err)
	}
	if wait(t, childDone, "the child worker to die"); childErr == nil {
		t.Fatalf("the child worker exited cleanly: %s", childOut.String())
	}

	var runs atomic.Int32
	var attempt atomic.Int32
	wk := e.conn("worker2")
	e.work(wk, 1, func(ctx context.Context, j Job, emit func(wire.Event)) (*wire.Result, error) {
		runs.Add(1)
		attempt.Store(int32(j.Attempt))
		emit(wire.Event{Type: "stdout", Data: "started"}) // seq 1: the caller had it
		emit(wire.Event{Type: "stdout", Data: "more"})
		return result(j.ID, "second worker"), nil
	})
	o := wait(t, out, "the redelivered run's result")
	if o.err != nil || o.res.Stdout != "second worker" {
		t.Fatalf("Run: %+v, %v", o.res, o.err)
	}
	if ev := wait(t, events, "the new event"); ev.Data != "more" {
		t.Fatalf("event after redelivery %+v (the repeated one should be dropped)", ev)
	}
	if runs.Load() != 1 || attempt.Load() != 2 {
		t.Fatalf("the second worker ran it %d times, attempt %d", runs.Load(), attempt.Load())
	}
	waitEmpty(t, api)
	select {
	case ev := <-events:
		t.Fatalf("extra event %+v", ev)
	default:
	}
}

// TestNodeKilled kills the NATS node the worker is connected to while
// jobs run: with R3 streams every job still completes.
func TestNodeKilled(t *testing.T) {
	e := newEnv(t)
	api, wk := e.conn("api"), e.conn("worker")
	const jobs = 6
	started := make(chan string, 2*jobs)
	release := make(chan struct{})
	var mu sync.Mutex
	runs := map[string]int{}
	e.work(wk, 3, func(ctx context.Context, j Job, emit func(wire.Event)) (*wire.Result, error) {
		mu.Lock()
		runs[j.ID]++
		mu.Unlock()
		select {
		case started <- j.ID:
		default: // a run again (redelivered): nobody counts it
		}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		emit(wire.Event{Type: "stdout", Data: j.ID})
		return result(j.ID, j.ID), nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()
	var outs []chan runOut
	for i := range jobs {
		outs = append(outs, goRun(ctx, api, job(fmt.Sprintf("exec-%d", i))))
	}
	for range 3 {
		wait(t, started, "3 jobs started")
	}
	victim := -1
	for i, u := range e.nc.URLList() {
		if u == wk.ConnectedURL() {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatalf("the worker is connected to %q, not a node", wk.ConnectedURL())
	}
	e.nc.Kill(victim)
	close(release)
	for i, ch := range outs {
		o := wait(t, ch, "a result")
		if o.err != nil || o.res.Stdout != fmt.Sprintf("exec-%d", i) {
			t.Fatalf("job %d: %+v, %v", i, o.res, o.err)
		}
	}
	waitEmpty(t, api)
	t.Logf("killed node %d; runs per job: %v", victim, runs)
}

// TestSubmitDedupe submits a job id twice: it runs once.
func TestSubmitDedupe(t *testing.T) {
	e := newEnv(t)
	api, wk := e.conn("api"), e.conn("worker")
	var runs atomic.Int32
	started := make(chan struct{}, 2)
	release := make(chan struct{})
	open := sync.OnceFunc(func() { close(release) })
	defer open() // before the worker is stopped at cleanup, should the test fail
	e.work(wk, 2, func(ctx context.Context, j Job, emit func(wire.Event)) (*wire.Result, error) {
		runs.Add(1)
		started <- struct{}{}
		<-release
		return result(j.ID, "once"), nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()
	first := goRun(ctx, api, job("exec-dup"))
	wait(t, started, "the run started")
	// A retried submit (same id) while it runs is not stored again.
	j := job("exec-dup")
	data, err := api.sealJob(&j)
	if err != nil {
		t.Fatal(err)
	}
	ack, err := api.submit(ctx, j.ID, false, data)
	if err != nil || !ack.Duplicate {
		t.Fatalf("second submit: %+v, %v", ack, err)
	}
	open()
	if o := wait(t, first, "the result"); o.err != nil || o.res.Stdout != "once" {
		t.Fatalf("%+v, %v", o.res, o.err)
	}
	waitEmpty(t, api)
	if n := runs.Load(); n != 1 {
		t.Fatalf("ran %d times", n)
	}
}

// TestRetryable: the errors a submit asks again after are the passing
// ones, among them a retried submit that met its first still in process
// (seen in CI: the second submit of TestSubmitDedupe failed with it).
func TestRetryable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&jetstream.APIError{Code: 409, ErrorCode: errCodeMsgIDInProcess, Description: "duplicate message id is in process"}, true},
		{fmt.Errorf("nats: %w", &jetstream.APIError{Code: 503, ErrorCode: 10008}), true},
		{&jetstream.APIError{Code: 500, ErrorCode: errCodeNoPeers}, true},
		{context.DeadlineExceeded, true},
		{fmt.Errorf("bucket: %w", jetstream.ErrStreamNameAlreadyInUse), true},
		{&jetstream.APIError{Code: 400, ErrorCode: 10060, Description: "expected stream does not match"}, false},
		{&jetstream.APIError{Code: 400, ErrorCode: 10054, Description: "maximum messages exceeded"}, false},
		{errors.New("other"), false},
	} {
		if got := retryable(c.err); got != c.want {
			t.Errorf("retryable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestWorkStops stops a worker while it runs a job: the job finishes and
// reports, the worker leaves SR_WORKERS and takes nothing more; a job
// queued after it stopped waits for another worker.
func TestWorkStops(t *testing.T) {
	e := newEnv(t)
	api, wk := e.conn("api"), e.conn("worker")
	started := make(chan string, 1)
	release := make(chan struct{})
	wctx, stop := context.WithCancel(context.Background())
	defer stop()
	workDone := make(chan error, 1)
	go func() {
		workDone <- wk.Work(wctx, 2, func(ctx context.Context, j Job, emit func(wire.Event)) (*wire.Result, error) {
			started <- j.ID
			<-release
			return result(j.ID, "finished"), nil
		})
	}()
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()
	a := goRun(ctx, api, job("exec-a"))
	wait(t, started, "the run started")
	stop()
	select {
	case err := <-workDone:
		t.Fatalf("Work returned (%v) while a run was going on", err)
	default:
	}
	close(release)
	if o := wait(t, a, "the result"); o.err != nil || o.res.Stdout != "finished" {
		t.Fatalf("%+v, %v", o.res, o.err)
	}
	if err := wait(t, workDone, "Work to return"); err != nil {
		t.Fatal(err)
	}
	if ws, err := api.Workers(ctx); err != nil || len(ws) != 0 {
		t.Fatalf("workers after stop: %v, %v", ws, err)
	}

	b := goRun(ctx, api, job("exec-b"))
	eventually(t, "the job queued", func() (bool, string) {
		n, err := api.Pending(ctx)
		return err == nil && n == 1, fmt.Sprint(n, err)
	})
	e.work(e.conn("worker2"), 1, func(ctx context.Context, j Job, emit func(wire.Event)) (*wire.Result, error) {
		return result(j.ID, "worker2"), nil
	})
	if o := wait(t, b, "the result"); o.err != nil || o.res.Stdout != "worker2" {
		t.Fatalf("%+v, %v", o.res, o.err)
	}
	waitEmpty(t, api)

	// A worker on a closed connection says so.
	wk.Close()
	if err := wk.Work(context.Background(), 1, nil); err == nil {
		t.Fatal("Work on a closed connection returned nil")
	}
}

// TestReadOnlyConnect: a read-only connection (cluster status) finds the
// assets and changes none of their settings; without them it says so.
func TestReadOnlyConnect(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()
	if _, err := Connect(ctx, Options{URLs: e.nc.URLList(), ReadOnly: true, Insecure: true}); err == nil || !strings.Contains(err.Error(), "no node") {
		t.Fatalf("read-only connect to an empty cluster: %v", err)
	}
	e.conn("node") // testAckWait
	ro, err := Connect(ctx, Options{URLs: e.nc.URLList(), ReadOnly: true, AckWait: time.Hour, Insecure: true, Keys: testKeys(t, "api")})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	info, err := ro.cons.Info(ctx)
	if err != nil || info.Config.AckWait != testAckWait {
		t.Fatalf("ack wait after a read-only connect: %v, %v", info.Config.AckWait, err)
	}
	if _, err := ro.Workers(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestAsyncGivenUp: a job that JetStream stops delivering (here: taken
// maxDeliver times and never acknowledged, as by workers that died) is
// given up with a result that says so, not left running.
func TestAsyncGivenUp(t *testing.T) {
	e := newEnv(t)
	api := e.conn("api")
	j := api.Jobs(JobsConfig{ResultTTL: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()
	go j.Serve(ctx, func() bool { return false })
	st, err := j.Submit(ctx, "", "bash", &wire.ExecuteRequest{Language: "bash", Code: "true", CallbackURL: "http://127.0.0.1:9/"})
	if err != nil {
		t.Fatal(err)
	}
	for taken := 0; taken < maxDeliver; {
		batch, err := api.acons.Fetch(1, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for range batch.Messages() {
			taken++ // and never acknowledged: delivered again after the ack wait
		}
		if ctx.Err() != nil {
			t.Fatal("not delivered maxDeliver times")
		}
	}
	// JetStream sees the limit when it would deliver once more: to a
	// worker asking (workers always are).
	pulling := make(chan struct{})
	pctx, stopPulling := context.WithCancel(ctx)
	defer func() { stopPulling(); <-pulling }()
	go func() {
		defer close(pulling)
		for pctx.Err() == nil {
			if batch, err := api.acons.Fetch(1, jetstream.FetchMaxWait(time.Second)); err == nil {
				for range batch.Messages() {
					t.Error("delivered past maxDeliver")
				}
			}
		}
	}()
	a, err := j.Get(ctx, st.ExecutionID, "", 30*time.Second)
	if err != nil || !a.Done || !strings.Contains(string(a.Result), "given up") || !strings.Contains(string(a.Result), `"status":"failed"`) {
		t.Fatalf("the given-up job: %v %s", err, a.Result)
	}
	if n, err := api.PendingJobs(ctx); err != nil || n != 0 {
		t.Fatalf("pending after giving up: %d %v", n, err)
	}
}

// TestFirstConnectsRace: nodes that start together against a fresh NATS
// all make the streams and buckets at once (an API node and a worker on
// one nats-server, as in a first install). A node whose create of a
// bucket loses to another's tries again and binds it, rather than
// exiting: each round starts a fresh server and connects four nodes at
// once, each also opening SR_LIVE as a worker does.
func TestFirstConnectsRace(t *testing.T) {
	for round := range 10 {
		nc := natstest.StartCluster(t, 1)
		ctx, cancel := context.WithTimeout(context.Background(), bounded)
		errs := make(chan error, 6)
		for i := range 6 {
			name := fmt.Sprintf("node-%d", i)
			go func() {
				c, err := Connect(ctx, Options{URLs: nc.URLList(), Name: name, AckWait: testAckWait, Insecure: true, Keys: testKeys(t, name)})
				if err == nil {
					_, err = c.Live(ctx)
					c.Close()
				}
				errs <- err
			}()
		}
		for range 6 {
			if err := <-errs; err != nil {
				t.Errorf("round %d: %v", round, err)
			}
		}
		cancel()
		nc.Kill(0)
	}
}

// TestWatchedRequest: a request whose responder goes away without
// answering ends with "no responders" once a probe finds nobody, not at
// its deadline; a slow responder that is still there is waited for.
func TestWatchedRequest(t *testing.T) {
	e := newEnv(t)
	api, worker := e.conn("api-1"), e.conn("worker-1")
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()
	probe := func() []byte { return []byte("ping") }
	// listening waits until subject's responder is known to api's server
	// (the two connections may be on different servers).
	listening := func(subject string) {
		t.Helper()
		if err := retry(ctx, func(ctx context.Context) error {
			_, err := api.nc.RequestWithContext(ctx, subject, probe())
			return err
		}); err != nil {
			t.Fatalf("%s: %v", subject, err)
		}
	}

	// It answers pings, then dies as the work reaches it.
	var sub *nats.Subscription
	got := make(chan struct{}, 1)
	sub, err := worker.nc.Subscribe("sr-test.dying", func(m *nats.Msg) {
		if string(m.Data) != "work" {
			m.Respond(nil)
			return
		}
		sub.Unsubscribe()
		got <- struct{}{}
	})
	if err != nil {
		t.Fatal(err)
	}
	listening("sr-test.dying")
	if _, err := api.watchedRequest(ctx, "sr-test.dying", []byte("work"), "sr-test.dying", probe); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("a responder gone: %v; want no responders (ctx: %v)", err, ctx.Err())
	}
	select {
	case <-got:
	default:
		t.Fatal("the work never reached the responder")
	}

	// It takes longer than a few probes to answer, and answers them.
	_, err = worker.nc.Subscribe("sr-test.slow", func(m *nats.Msg) {
		if string(m.Data) == "work" {
			go func() { time.Sleep(3 * probeEvery); m.Respond([]byte("done")) }()
			return
		}
		m.Respond(nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	listening("sr-test.slow")
	if m, err := api.watchedRequest(ctx, "sr-test.slow", []byte("work"), "sr-test.slow", probe); err != nil || string(m.Data) != "done" {
		t.Fatalf("a slow responder: %v, %v", m, err)
	}
}
