package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/lib/records"
	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// The machinery without HTTP: real bbolt stores in temporary directories,
// runs by a fake RunFunc (pkg/api's tests run real sandboxes through it).

// testConfig is a configuration with a data dir of its own and a short
// grace period.
func testConfig(t testing.TB) config.Config {
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.Workers = 2
	cfg.ShutdownGraceSeconds = 0.5
	return cfg
}

// fakeRun runs a job by its code:
//
//	"block"            starts, then runs until it is killed
//	"wait for worker"  waits for a worker until canceled (never starts)
//	"no room"          no room in the pool while noRoom is set
//	"fail"             fails with "disk on fire"
//	anything else      prints its input
type fakeRun struct {
	noRoom atomic.Bool
	mu     sync.Mutex
	runs   map[string]int // runs started, by code
}

func (f *fakeRun) run(ctx context.Context, req *wire.ExecuteRequest, keyID string, onRun func()) (*executor.Result, error) {
	switch {
	case req.Code == "wait for worker":
		<-ctx.Done()
		return nil, ctx.Err()
	case req.Code == "no room" && f.noRoom.Load():
		return nil, ErrNoRoom
	}
	onRun()
	f.mu.Lock()
	if f.runs == nil {
		f.runs = map[string]int{}
	}
	f.runs[req.Code]++
	f.mu.Unlock()
	switch req.Code {
	case "block":
		<-ctx.Done()
		return nil, ctx.Err()
	case "fail":
		return nil, errors.New("disk on fire")
	}
	res := &executor.Result{ExecutionID: "exec_ignored", Language: req.Language, OutputFiles: executor.OutputFiles{}}
	res.Status, res.Stdout = executor.StatusCompleted, req.InputData
	return res, nil
}

func (f *fakeRun) count(code string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runs[code]
}

// logBuffer keeps a manager's log lines, JSON.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// records returns the log lines with message msg.
func (b *logBuffer) records(t testing.TB, msg string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range bytes.Split(b.buf.Bytes(), []byte("\n")) {
		var rec map[string]any
		if json.Unmarshal(line, &rec) == nil && rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// server is a Manager under Serve.
type server struct {
	*Manager
	logs     *logBuffer
	draining atomic.Bool
	stop     context.CancelFunc
	done     chan struct{}
}

// serve starts a Manager on cfg, stopped at the end of the test.
func serve(t testing.TB, cfg config.Config, run RunFunc, n Notifier) *server {
	t.Helper()
	s := &server{logs: &logBuffer{}, done: make(chan struct{})}
	s.Manager = New(Config{App: cfg, Run: run, Notifier: n, Log: slog.New(slog.NewJSONHandler(s.logs, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	go func() {
		defer close(s.done)
		s.Serve(ctx, s.draining.Load)
	}()
	t.Cleanup(s.shutdown)
	if err := s.Available(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// shutdown drains and stops the manager and waits for Serve to return.
func (s *server) shutdown() {
	s.draining.Store(true)
	s.stop()
	<-s.done
}

func request(code, input string) *wire.ExecuteRequest {
	return &wire.ExecuteRequest{Language: "python", Code: code, InputData: input}
}

func (s *server) submit(t testing.TB, key string, req *wire.ExecuteRequest) wire.JobStatus {
	t.Helper()
	js, err := s.Submit(context.Background(), key, req.Language, req)
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	if js.Status != "queued" || !validID(js.ExecutionID) || js.CreatedAt.IsZero() {
		t.Errorf("submitted: %+v", js)
	}
	return js
}

// answer is a finished job's answer with the fields these tests read.
type answer struct {
	ExecutionID           string               `json:"execution_id"`
	Status                executor.Status      `json:"status"`
	Stdout                string               `json:"stdout"`
	Error                 string               `json:"error"`
	ResultTruncated       bool                 `json:"result_truncated"`
	ResultTruncatedReason string               `json:"result_truncated_reason"`
	CreatedAt             time.Time            `json:"created_at"`
	StartedAt             time.Time            `json:"started_at"`
	FinishedAt            time.Time            `json:"finished_at"`
	Callback              *wire.CallbackStatus `json:"callback"`
}

// await waits for job id of key's to be over and returns its answer.
func (s *server) await(t testing.TB, id, key string) answer {
	t.Helper()
	a, err := s.Get(context.Background(), id, key, 10*time.Second)
	if err != nil || !a.Done {
		t.Fatalf("job %s: %+v, %v", id, a.Status, err)
	}
	var ans answer
	if err := json.Unmarshal(a.Result, &ans); err != nil || !bytes.HasSuffix(a.Result, []byte("}\n")) {
		t.Fatalf("%s: %v", a.Result, err)
	}
	return ans
}

// waitFor polls cond until it holds or d passes.
func waitFor(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

func (s *server) state(t testing.TB, id, key string) string {
	t.Helper()
	a, err := s.Get(context.Background(), id, key, 0)
	if err != nil {
		t.Fatalf("job %s: %v", id, err)
	}
	if a.Done {
		return "done"
	}
	return a.Status.Status
}

func TestSubmitAndGet(t *testing.T) {
	t.Parallel()
	f := &fakeRun{}
	s := serve(t, testConfig(t), f.run, nil)
	js := s.submit(t, "", request("print(input())", "hello"))
	a := s.await(t, js.ExecutionID, "")
	if a.Status != executor.StatusCompleted || a.Stdout != "hello" || a.ExecutionID != js.ExecutionID || a.Callback != nil ||
		a.CreatedAt.IsZero() || a.StartedAt.Before(a.CreatedAt) || a.FinishedAt.Before(a.StartedAt) {
		t.Errorf("answer %+v", a)
	}
	if recs := s.logs.records(t, "async execution finished"); len(recs) != 1 || recs[0]["status"] != "completed" {
		t.Errorf("finished log: %v", recs)
	}

	// A run that fails ends as error_setup with the reason.
	js = s.submit(t, "", request("fail", ""))
	if a := s.await(t, js.ExecutionID, ""); a.Status != executor.StatusSetupError || a.Error != "disk on fire" {
		t.Errorf("failed run: %+v", a)
	}

	// Another key's job, or no job at all, is not found.
	for _, id := range []string{"exec_00000000000000000000dead", "nope", "exec_xyz"} {
		if _, err := s.Get(context.Background(), id, "", 0); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: %v", id, err)
		}
	}
	if _, err := s.Get(context.Background(), js.ExecutionID, "bob", 0); !errors.Is(err, ErrNotFound) {
		t.Errorf("another key's job: %v", err)
	}

	// A job waits for room in the pool, then runs; its status says where
	// it is meanwhile, and a short wait answers it.
	f.noRoom.Store(true)
	js = s.submit(t, "", request("no room", "at last"))
	start := time.Now()
	a2, err := s.Get(context.Background(), js.ExecutionID, "", 200*time.Millisecond)
	if err != nil || a2.Done || a2.Status.Status != "queued" || a2.Status.ExecutionID != js.ExecutionID || time.Since(start) < 150*time.Millisecond {
		t.Errorf("waiting for room: %+v, %v after %v", a2, err, time.Since(start))
	}
	f.noRoom.Store(false)
	if a := s.await(t, js.ExecutionID, ""); a.Stdout != "at last" || f.count("no room") != 1 {
		t.Errorf("after room: %+v, %d runs", a, f.count("no room"))
	}
}

// Without Serve there is no store.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	m := New(Config{App: testConfig(t), Run: (&fakeRun{}).run})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := m.Submit(ctx, "", "python", request("print(1)", ""))
	var e *Error
	if !errors.As(err, &e) || e.Kind != Unavailable {
		t.Errorf("submit without Serve: %v", err)
	}
	s := serve(t, testConfig(t), (&fakeRun{}).run, nil)
	s.shutdown()
	if _, err := s.Get(context.Background(), "exec_00", "", 0); !errors.As(err, &e) || e.Kind != Unavailable || e.Msg != "the server has stopped" {
		t.Errorf("after Serve: %v", err)
	}
}

// The queue's limits, each key's, and the quotas of stored results.
func TestQuotas(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Keys = []config.APIKey{{ID: "alice"}, {ID: "bob"}, {ID: "carol"}}
	cfg.Workers, cfg.AsyncQueue, cfg.AsyncQueuePerKey = 1, 3, 2
	cfg.MaxResultBytes, cfg.ResultQuotaBytesPerKey = config.MinResultBytes, 3*config.MinResultBytes
	s := serve(t, cfg, (&fakeRun{}).run, nil)
	kindOf := func(err error) Kind {
		var e *Error
		if errors.As(err, &e) {
			return e.Kind
		}
		return 0
	}

	// A result above max_result_bytes is cut; the key's quota fills up.
	big := strings.Repeat("x", 3*config.MinResultBytes)
	for i := range 3 {
		js := s.submit(t, "alice", request("print", big))
		a := s.await(t, js.ExecutionID, "alice")
		if !a.ResultTruncated || !strings.Contains(a.ResultTruncatedReason, "above max_result_bytes") || a.Status != executor.StatusCompleted {
			t.Errorf("result %d: truncated %v %q", i, a.ResultTruncated, a.ResultTruncatedReason)
		}
	}
	_, err := s.Submit(context.Background(), "alice", "python", request("print(1)", ""))
	if kindOf(err) != ResultQuotaFull || !strings.Contains(err.Error(), "key alice's stored async results use") {
		t.Errorf("past alice's result quota: %v", err)
	}

	// Bob's queue: his first job runs, two more wait, a third is his too
	// many. The queue holds three jobs of all keys.
	block := s.submit(t, "bob", request("block", ""))
	if !waitFor(10*time.Second, func() bool { return s.state(t, block.ExecutionID, "bob") == "running" }) {
		t.Fatal("the blocking job never ran")
	}
	s.submit(t, "bob", request("print(1)", ""))
	if js := s.submit(t, "bob", request("print(2)", "")); js.QueuePosition != 2 {
		t.Errorf("queue_position %d, want 2", js.QueuePosition)
	}
	_, err = s.Submit(context.Background(), "bob", "python", request("print(3)", ""))
	if kindOf(err) != KeyQueueFull || !strings.Contains(err.Error(), "key bob has 2 async executions queued, at its limit of 2 (async_queue_per_key)") {
		t.Errorf("bob's third queued job: %v", err)
	}
	s.submit(t, "carol", request("print(4)", ""))
	_, err = s.Submit(context.Background(), "carol", "python", request("print(5)", ""))
	if kindOf(err) != QueueFull || err.Error() != "the async queue is full (3 executions waiting); retry later" {
		t.Errorf("past the queue: %v", err)
	}
}

// The drain: a job waiting for a worker (in the pool's queue, or for room
// in it) stays queued and runs after the restart; a running job is killed
// at the end of the grace period and reported failed. None runs twice.
func TestDrainAndRestart(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Workers = 3
	f := &fakeRun{}
	f.noRoom.Store(true)
	s := serve(t, cfg, f.run, nil)
	running := s.submit(t, "", request("block", ""))
	if !waitFor(10*time.Second, func() bool { return s.state(t, running.ExecutionID, "") == "running" }) {
		t.Fatal("the blocking job never ran")
	}
	waiting := s.submit(t, "", request("wait for worker", ""))
	noRoom := s.submit(t, "", request("no room", "had room"))
	time.Sleep(100 * time.Millisecond)

	// A long poll ends when the drain begins.
	polled := make(chan Answer, 1)
	go func() {
		a, _ := s.Get(context.Background(), waiting.ExecutionID, "", 30*time.Second)
		polled <- a
	}()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	s.draining.Store(true)
	select {
	case a := <-polled:
		if a.Done || a.Status.Status != "queued" {
			t.Errorf("long poll at the drain: %+v", a)
		}
	case <-time.After(5 * time.Second):
		t.Error("the long poll did not end with the drain")
	}
	s.shutdown()
	if d := time.Since(start); d < 400*time.Millisecond || d > 5*time.Second {
		t.Errorf("Serve returned %v after the drain began, with a grace of 0.5 s", d)
	}
	if len(s.logs.records(t, "grace period over: killing running async executions")) != 1 {
		t.Error("no log line about killing the running job")
	}

	f.noRoom.Store(false)
	s2 := serve(t, cfg, f.run, nil)
	if a := s2.await(t, running.ExecutionID, ""); a.Status != executor.StatusSetupError || a.Error != reasonServerStopped {
		t.Errorf("the job running at the drain: %+v", a)
	}
	if a := s2.await(t, noRoom.ExecutionID, ""); a.Stdout != "had room" {
		t.Errorf("the job without room at the drain: %+v", a)
	}
	if st := s2.state(t, waiting.ExecutionID, ""); st != "queued" && st != "running" {
		t.Errorf("the job waiting for a worker at the drain: %s", st)
	}
	if f.count("block") != 1 || f.count("no room") != 1 {
		t.Errorf("runs: %v", f.runs)
	}
}

// After a crash the store holds a job in state running: the next start
// reports it failed with the reason, and re-queues the queued one.
func TestRecoverAfterCrash(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	st, err := openStore(cfg.DataDir, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	running := &Record{ID: records.NewID("exec_"), Language: "python", State: jobQueued, CreatedAt: jobNow()}
	queued := &Record{ID: records.NewID("exec_"), Language: "python", State: jobQueued, CreatedAt: jobNow()}
	for _, rec := range []*Record{running, queued} {
		if err := st.create(rec, mustJSON(t, request("print(input())", "after the crash"))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.update(running.ID, func(r *Record) { r.State, r.StartedAt = jobRunning, jobNow() }); err != nil {
		t.Fatal(err)
	}
	st.close() // the crash

	f := &fakeRun{}
	s := serve(t, cfg, f.run, nil)
	if a := s.await(t, running.ID, ""); a.Status != executor.StatusSetupError || a.Error != "the server stopped while this execution was running" {
		t.Errorf("the job running at the crash: %+v", a)
	}
	if a := s.await(t, queued.ID, ""); a.Stdout != "after the crash" {
		t.Errorf("the queued job: %+v", a)
	}
	if recs := s.logs.records(t, "async executions recovered"); len(recs) != 1 || recs[0]["failed"] != float64(1) || recs[0]["queued"] != float64(1) {
		t.Errorf("recovery log: %v", recs)
	}
	if f.count("print(input())") != 1 {
		t.Errorf("runs: %v", f.runs)
	}
}

// fakeNotifier records deliveries; while hold is set, a delivery waits
// for its context to end.
type fakeNotifier struct {
	hold      atomic.Bool
	mu        sync.Mutex
	delivered []string // bodies
}

func (n *fakeNotifier) Deliver(ctx context.Context, url, id string, body []byte, report func(Attempt)) (int, error) {
	if n.hold.Load() {
		<-ctx.Done()
		return 1, ctx.Err()
	}
	report(Attempt{At: time.Now(), HTTPStatus: 500, Err: errors.New("the receiver answered 500"), Retry: time.Millisecond})
	n.mu.Lock()
	n.delivered = append(n.delivered, string(body))
	n.mu.Unlock()
	report(Attempt{At: time.Now(), HTTPStatus: 204})
	return 2, nil
}

func (n *fakeNotifier) bodies() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.delivered...)
}

// A callback's state is stored after every attempt and shown in the
// answers; a delivery the shutdown cuts short is made after the restart.
func TestCallbacks(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	n := &fakeNotifier{}
	s := serve(t, cfg, (&fakeRun{}).run, n)
	req := request("print(input())", "called back")
	req.CallbackURL = "http://receiver.example/hook"
	js := s.submit(t, "", req)
	if js.Callback == nil || js.Callback.Status != "pending" {
		t.Errorf("submitted: callback %+v", js.Callback)
	}
	var a answer
	if !waitFor(10*time.Second, func() bool { a = s.await(t, js.ExecutionID, ""); return a.Callback.Status != "pending" }) {
		t.Fatalf("callback %+v", a.Callback)
	}
	if cb := a.Callback; cb.Status != "delivered" || cb.Attempts != 2 || cb.LastHTTPStatus != 204 || cb.DeliveredAt.IsZero() || cb.Error != "" {
		t.Errorf("delivered: %+v", cb)
	}
	if b := n.bodies(); len(b) != 1 || !strings.Contains(b[0], `"stdout":"called back"`) || strings.Contains(b[0], `"callback"`) {
		t.Errorf("bodies %q", b)
	}
	s.shutdown()

	// Without a notifier, the delivery fails at once.
	cfg2 := testConfig(t)
	s2 := serve(t, cfg2, (&fakeRun{}).run, nil)
	js = s2.submit(t, "", req)
	if !waitFor(10*time.Second, func() bool { a = s2.await(t, js.ExecutionID, ""); return a.Callback.Status != "pending" }) {
		t.Fatalf("callback %+v", a.Callback)
	}
	if cb := a.Callback; cb.Status != "failed" || cb.Attempts != 0 || cb.FailedAt.IsZero() || cb.Error == "" {
		t.Errorf("without a notifier: %+v", cb)
	}

	// Cut short by the shutdown: pending, then delivered after the restart.
	n.hold.Store(true)
	s = serve(t, cfg, (&fakeRun{}).run, n)
	js = s.submit(t, "", req)
	if a := s.await(t, js.ExecutionID, ""); a.Callback.Status != "pending" {
		t.Errorf("held: %+v", a.Callback)
	}
	s.shutdown()
	n.hold.Store(false)
	s = serve(t, cfg, (&fakeRun{}).run, n)
	if !waitFor(10*time.Second, func() bool { return s.await(t, js.ExecutionID, "").Callback.Status == "delivered" }) {
		t.Error("the interrupted callback was never delivered")
	}
	if recs := s.logs.records(t, "async executions recovered"); len(recs) != 1 || recs[0]["callbacks"] != float64(1) {
		t.Errorf("recovery log: %v", recs)
	}
}

// Results expire after result_ttl_seconds, freeing their bytes.
func TestExpiry(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.ResultTTLSeconds = 0.2
	s := serve(t, cfg, (&fakeRun{}).run, nil)
	js := s.submit(t, "", request("print", "short-lived"))
	s.await(t, js.ExecutionID, "")
	if !waitFor(5*time.Second, func() bool {
		_, err := s.Get(context.Background(), js.ExecutionID, "", 0)
		return errors.Is(err, ErrNotFound) && len(s.logs.records(t, "async results expired")) > 0
	}) {
		t.Error("the result never expired")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.resultBytes != 0 {
		t.Errorf("%d result bytes still counted", s.resultBytes)
	}
}

// TestKindsAndRuns: a job of a transport's own kind keeps its Meta and
// Kind, runs its request Runs times with the runs' average time and
// memory in the stored result (stopping at a compile error), and sends its
// callback with its kind's body and notifier, not the native one.
func TestKindsAndRuns(t *testing.T) {
	var calls atomic.Int64
	run := func(ctx context.Context, req *wire.ExecuteRequest, keyID string, onRun func()) (*wire.Result, error) {
		onRun()
		n := calls.Add(1)
		res := &wire.Result{Language: req.Language, OutputFiles: wire.OutputFiles{}}
		res.Status, res.CPUTimeMs, res.DurationMs, res.MemoryUsedMB = wire.StatusCompleted, float64(10*n), float64(20*n), float64(n)
		if req.Code == "broken" {
			res.Status = wire.StatusCompileError
		}
		return res, nil
	}
	native, own := &fakeNotifier{}, &fakeNotifier{}
	s := serve(t, testConfig(t), run, native)
	s.SetKind("peer", KindHooks{Notifier: own, Body: func(rec *Record) []byte { return []byte("peer:" + string(rec.Meta)) }})

	req := request("x", "")
	req.CallbackURL = "http://127.0.0.1:1/hook"
	js, err := s.SubmitWith(context.Background(), "", "python", req, Options{Kind: "peer", Meta: json.RawMessage(`{"n":3}`), Runs: 3})
	if err != nil {
		t.Fatal(err)
	}
	ans := s.await(t, js.ExecutionID, "")
	a, _ := s.Get(context.Background(), js.ExecutionID, "", 0)
	var res wire.Result
	json.Unmarshal(a.Record.Result, &res)
	if calls.Load() != 3 || ans.Status != executor.StatusCompleted || res.CPUTimeMs != 20 || res.DurationMs != 40 || res.MemoryUsedMB != 2 {
		t.Fatalf("3 runs: %d calls, %+v (want the averages 20 ms CPU, 40 ms, 2 MiB)", calls.Load(), res)
	}
	if a.Record.Kind != "peer" || string(a.Record.Meta) != `{"n":3}` {
		t.Fatalf("the record: kind %q meta %s", a.Record.Kind, a.Record.Meta)
	}
	if !waitFor(10*time.Second, func() bool { return len(own.bodies()) == 1 }) || own.bodies()[0] != `peer:{"n":3}` || len(native.bodies()) != 0 {
		t.Fatalf("callbacks: the kind's %q, the native %q", own.bodies(), native.bodies())
	}

	calls.Store(0)
	js, err = s.SubmitWith(context.Background(), "", "python", request("broken", ""), Options{Kind: "peer", Meta: json.RawMessage(`{}`), Runs: 5})
	if err != nil {
		t.Fatal(err)
	}
	if ans := s.await(t, js.ExecutionID, ""); calls.Load() != 1 || ans.Status != executor.StatusCompileError {
		t.Fatalf("a compile error ends the runs: %d calls, %s", calls.Load(), ans.Status)
	}
}
