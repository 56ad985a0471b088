package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/local"
)

// Async executions, their store, and callbacks: real servers (Serve) on
// 127.0.0.1, every answer checked against the OpenAPI document.

const testCallbackSecret = "test-callback-secret-0123456789"

// serverStopped is the error of a job that was running when its server
// stopped.
const serverStopped = "the server stopped while this execution was running"

// jobsConfig is testConfig with a data dir of its own and quick callbacks.
func jobsConfig(t testing.TB) Config {
	cfg := testConfig()
	cfg.DataDir = t.TempDir()
	cfg.ShutdownGraceSeconds = 0.5
	cfg.CallbackSecret = testCallbackSecret
	cfg.CallbackRetryDelaySeconds = 0.05
	cfg.CallbackTimeoutSeconds = 5
	return cfg
}

// submit posts an async execution and wants 202.
func (ts *testServer) submit(t testing.TB, body map[string]any, key string) JobStatus {
	t.Helper()
	r := executeRequest(t, with(body, "async", true))
	r.key = key
	resp, data := ts.call(t, r)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("async submit: %d %s", resp.StatusCode, data)
	}
	var js JobStatus
	if err := json.Unmarshal(data, &js); err != nil {
		t.Fatalf("202 body %s: %v", data, err)
	}
	if js.Status != "queued" || !regexp.MustCompile(`^exec_[0-9a-f]+$`).MatchString(js.ExecutionID) || js.CreatedAt.IsZero() {
		t.Errorf("202 body %s", data)
	}
	if loc := resp.Header.Get("Location"); loc != "/api/sandbox/executions/"+js.ExecutionID {
		t.Errorf("Location %q", loc)
	}
	return js
}

// getJob is GET /api/sandbox/executions/{id}[?query].
func (ts *testServer) getJob(t testing.TB, id, query, key string) (*http.Response, []byte) {
	t.Helper()
	path := "/api/sandbox/executions/" + id
	if query != "" {
		path += "?" + query
	}
	return ts.call(t, request{method: http.MethodGet, path: path, key: key})
}

// jobStatusOf returns the status field of a GET answer.
func jobStatusOf(t testing.TB, data []byte) string {
	t.Helper()
	var v struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	return v.Status
}

// awaitJob polls until the job is over and returns its result.
func (ts *testServer) awaitJob(t testing.TB, id, key string) (*executor.Result, []byte) {
	t.Helper()
	var data []byte
	ok := waitFor(60*time.Second, func() bool {
		var resp *http.Response
		resp, data = ts.getJob(t, id, "", key)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", id, resp.StatusCode, data)
		}
		s := jobStatusOf(t, data)
		return s != "queued" && s != "running"
	})
	if !ok {
		t.Fatalf("execution %s never finished: %s", id, data)
	}
	return decodeResult(t, data), data
}

func TestAsyncExecute(t *testing.T) {
	t.Parallel()
	ts := serveServer(t, jobsConfig(t))

	// "async": true, polled to its end.
	js := ts.submit(t, py("import time\ntime.sleep(0.5)\nprint('async')"), "")
	sawRunning := waitFor(20*time.Second, func() bool {
		_, data := ts.getJob(t, js.ExecutionID, "", "")
		return jobStatusOf(t, data) != "queued"
	})
	if !sawRunning {
		t.Fatal("the job never left the queue")
	}
	res, data := ts.awaitJob(t, js.ExecutionID, "")
	if res.Status != executor.StatusCompleted || res.Stdout != "async\n" {
		t.Errorf("result %s", data)
	}
	if res.ExecutionID != js.ExecutionID {
		t.Errorf("execution_id %s, want the job's %s", res.ExecutionID, js.ExecutionID)
	}
	var times struct{ CreatedAt, StartedAt, FinishedAt time.Time }
	json.Unmarshal(data, &struct {
		C *time.Time `json:"created_at"`
		S *time.Time `json:"started_at"`
		F *time.Time `json:"finished_at"`
	}{&times.CreatedAt, &times.StartedAt, &times.FinishedAt})
	if times.CreatedAt.IsZero() || times.StartedAt.Before(times.CreatedAt) || times.FinishedAt.Sub(times.StartedAt) < 400*time.Millisecond {
		t.Errorf("times %+v", times)
	}

	// POST /api/sandbox/executions, then wait=true: the result in one call.
	r := request{method: http.MethodPost, path: "/api/sandbox/executions", body: mustJSON(t, with(py("import time\ntime.sleep(0.3)\nprint(input())"), "input_data", "waited"))}
	resp, data := ts.call(t, r)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /api/sandbox/executions: %d %s", resp.StatusCode, data)
	}
	id := decodeResult(t, data).ExecutionID
	resp, data = ts.getJob(t, id, "wait=true&timeout=30", "")
	if res := decodeResult(t, data); resp.StatusCode != http.StatusOK || res.Stdout != "waited\n" || res.Status != executor.StatusCompleted {
		t.Errorf("wait=true: %d %s", resp.StatusCode, data)
	}

	// wait=true with a short timeout answers the current state.
	js = ts.submit(t, py("import time\ntime.sleep(3)"), "")
	start := time.Now()
	_, data = ts.getJob(t, js.ExecutionID, "wait=1&timeout=0.3", "")
	if s := jobStatusOf(t, data); (s != "queued" && s != "running") || time.Since(start) > 2*time.Second {
		t.Errorf("wait with timeout 0.3: %s after %v", data, time.Since(start))
	}

	// Errors.
	resp, data = ts.getJob(t, js.ExecutionID, "wait=maybe", "")
	wantError(t, resp, data, http.StatusBadRequest, "wait")
	resp, data = ts.getJob(t, js.ExecutionID, "wait=true&timeout=-1", "")
	wantError(t, resp, data, http.StatusBadRequest, "timeout")
	for _, bad := range []string{"exec_00000000000000000000dead", "nope", "exec_xyz"} {
		resp, data = ts.getJob(t, bad, "", "")
		wantError(t, resp, data, http.StatusNotFound, "no such execution")
	}
	resp, data = ts.execute(t, with(py("print(1)"), "async", true, "language", "cobol-1959"))
	wantError(t, resp, data, http.StatusBadRequest, "cobol-1959")
	if len(ts.logs.records(t, "async execution finished")) < 2 {
		t.Error("no async execution finished log lines")
	}
}

func TestAsyncOwnership(t *testing.T) {
	t.Parallel()
	cfg := keyConfig(APIKey{ID: "alice", Key: "alice-key", Scopes: []string{ScopeExecute}},
		APIKey{ID: "bob", Key: "bob-key", Scopes: []string{ScopeExecute}})
	cfg.DataDir = t.TempDir()
	ts := serveServer(t, cfg)
	js := ts.submit(t, py("print('mine')"), "alice-key")
	res, _ := ts.awaitJob(t, js.ExecutionID, "alice-key")
	if res.Stdout != "mine\n" {
		t.Errorf("owner: %+v", res)
	}
	resp, data := ts.getJob(t, js.ExecutionID, "", "bob-key")
	wantError(t, resp, data, http.StatusNotFound, "no such execution")
	resp, data = ts.getJob(t, js.ExecutionID, "", "")
	wantError(t, resp, data, http.StatusUnauthorized, "API key")
}

func TestAsyncQueueFull(t *testing.T) {
	t.Parallel()
	cfg := jobsConfig(t)
	cfg.Workers, cfg.AsyncQueue = 1, 1
	ts := serveServer(t, cfg)
	first := ts.submit(t, py("import time\ntime.sleep(2)"), "")
	if !waitFor(20*time.Second, func() bool {
		_, data := ts.getJob(t, first.ExecutionID, "", "")
		return jobStatusOf(t, data) == "running"
	}) {
		t.Fatal("the first job never ran")
	}
	second := ts.submit(t, py("print(2)"), "")
	if second.QueuePosition != 1 {
		t.Errorf("queue_position %d, want 1", second.QueuePosition)
	}
	resp, data := ts.execute(t, with(py("print(3)"), "async", true))
	wantError(t, resp, data, http.StatusServiceUnavailable, "async queue is full")
	if resp.Header.Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	// The queue drains: the second job runs after the first.
	if res, data := ts.awaitJob(t, second.ExecutionID, ""); res.Stdout != "2\n" {
		t.Errorf("second job: %s", data)
	}
	_, m := ts.get(t, "/metrics", "")
	if v := metric(string(m), "sandbox_run_rejected_total", `{reason="async_queue_full"}`); v != 1 {
		t.Errorf("rejected_total{async_queue_full} = %v, want 1", v)
	}
}

// receiver is a callback receiver on 127.0.0.1 that answers the first
// len(statuses) calls with them, then 200.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	calls    []receivedCall
	statuses []int
}

type receivedCall struct {
	header http.Header
	body   []byte
}

func newReceiver(t testing.TB, statuses ...int) *receiver {
	rc := &receiver{statuses: statuses}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		n := len(rc.calls)
		rc.calls = append(rc.calls, receivedCall{r.Header.Clone(), body})
		rc.mu.Unlock()
		if n < len(rc.statuses) {
			w.WriteHeader(rc.statuses[n])
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) received() []receivedCall {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]receivedCall(nil), rc.calls...)
}

func TestAsyncCallback(t *testing.T) {
	t.Parallel()
	cfg := jobsConfig(t)
	cfg.CallbackAllow = []string{"127.0.0.1/32"}
	ts := serveServer(t, cfg)

	// Two 500s, then accepted: three signed deliveries of the same body.
	rc := newReceiver(t, http.StatusInternalServerError, http.StatusBadGateway)
	js := ts.submit(t, with(py("print('called back')"), "callback_url", rc.URL+"/hook?x=1"), "")
	if !waitFor(20*time.Second, func() bool { return len(rc.received()) >= 3 }) {
		t.Fatalf("%d callbacks received, want 3", len(rc.received()))
	}
	_, final := ts.getJob(t, js.ExecutionID, "", "")
	time.Sleep(200 * time.Millisecond) // no fourth
	calls := rc.received()
	if len(calls) != 3 {
		t.Errorf("%d callbacks, want 3", len(calls))
	}
	for i, c := range calls {
		ts := c.header.Get("X-Sandbox-Run-Timestamp")
		sec, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || time.Since(time.Unix(sec, 0)).Abs() > time.Minute {
			t.Errorf("call %d: timestamp %q", i, ts)
		}
		mac := hmac.New(sha256.New, []byte(testCallbackSecret))
		mac.Write([]byte(ts + "."))
		mac.Write(c.body)
		want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
		if got := c.header.Get("X-Sandbox-Run-Signature"); !hmac.Equal([]byte(got), []byte(want)) {
			t.Errorf("call %d: signature %q, want %q", i, got, want)
		}
		if c.header.Get("X-Sandbox-Run-Execution-Id") != js.ExecutionID || c.header.Get("Content-Type") != "application/json" {
			t.Errorf("call %d: headers %v", i, c.header)
		}
		if err := testDoc.validate("/components/schemas/ExecuteResponse", c.body); err != nil {
			t.Errorf("call %d: body does not match ExecuteResponse: %v\n%s", i, err, c.body)
		}
		if got, want := withoutCallback(t, c.body), withoutCallback(t, final); got != want {
			t.Errorf("call %d: body %s, want the GET answer %s without its callback object", i, c.body, final)
		}
	}
	if res := decodeResult(t, calls[0].body); res.Stdout != "called back\n" || res.ExecutionID != js.ExecutionID {
		t.Errorf("callback result %s", calls[0].body)
	}
	if !waitFor(5*time.Second, func() bool { return len(ts.logs.records(t, "callback delivered")) == 1 }) {
		t.Error("no callback delivered log line")
	} else if a := ts.logs.records(t, "callback delivered")[0]["attempts"]; a != float64(3) {
		t.Errorf("attempts %v, want 3", a)
	}

	// A 4xx ends the delivery at once.
	rc4 := newReceiver(t, http.StatusGone, http.StatusGone, http.StatusGone)
	ts.submit(t, with(py("print(1)"), "callback_url", rc4.URL), "")
	if !waitFor(20*time.Second, func() bool { return len(ts.logs.records(t, "callback failed")) == 1 }) {
		t.Fatal("no callback failed log line")
	}
	time.Sleep(200 * time.Millisecond)
	if n := len(rc4.received()); n != 1 {
		t.Errorf("%d deliveries after a 410, want 1", n)
	}
}

// withoutCallback is a job's answer without its "callback" object, as
// the callback's body is, re-encoded to compare.
func withoutCallback(t testing.TB, body []byte) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	delete(m, "callback")
	return string(mustJSON(t, m))
}

func TestAsyncCallbackRefused(t *testing.T) {
	t.Parallel()
	cfg := jobsConfig(t) // no callback_allow
	ts := serveServer(t, cfg)
	rc := newReceiver(t)
	port := rc.URL[strings.LastIndex(rc.URL, ":")+1:]
	for _, tt := range []struct{ url, want string }{
		{rc.URL, "loopback"},
		{"http://localhost:" + port + "/", "loopback"},
		{"http://[::1]:" + port + "/", "loopback"},
		{"http://[::ffff:127.0.0.1]:" + port + "/", "loopback"},
		{"http://10.1.2.3/", "private"},
		{"https://192.168.0.10/", "private"},
		{"http://[fd00::1]/", "private"},
		{"http://169.254.169.254/latest/meta-data/", "link-local"},
		{"http://100.64.0.1/", "CGNAT"},
		{"http://0.0.0.0:" + port + "/", "unspecified"},
		{"http://224.0.0.1/", "multicast"},
		{"ftp://example.com/x", "http or https"},
		{"http://user:pw@example.com/", "credentials"},
		{"/relative", "absolute"},
		{"http://:80/", "no host"},
	} {
		resp, data := ts.execute(t, with(py("print(1)"), "async", true, "callback_url", tt.url))
		wantError(t, resp, data, http.StatusBadRequest, tt.want)
	}
	if n := len(rc.received()); n != 0 {
		t.Errorf("the receiver got %d calls", n)
	}
	// Without a secret, callbacks go unsigned.
	cfg2 := jobsConfig(t)
	cfg2.CallbackSecret = ""
	cfg2.CallbackAllow = []string{"127.0.0.1"}
	ts2 := serveServer(t, cfg2)
	resp, data := ts2.execute(t, with(py("print(1)"), "async", true, "callback_url", rc.URL))
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("without a secret: %d %s", resp.StatusCode, data)
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(rc.received()) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := rc.received(); len(got) != 1 || got[0].header.Get("X-Sandbox-Run-Signature") != "" {
		t.Errorf("without a secret: %d calls, %v", len(got), got)
	}
}

func TestAsyncRestart(t *testing.T) {
	t.Parallel()
	cfg := jobsConfig(t)
	cfg.Workers = 1
	cfg.CallbackAllow = []string{"127.0.0.1/32"}
	rc := newReceiver(t)
	ts := serveServer(t, cfg)
	long := ts.submit(t, with(py("import time\ntime.sleep(60)"), "callback_url", rc.URL), "")
	if !waitFor(20*time.Second, func() bool {
		_, data := ts.getJob(t, long.ExecutionID, "", "")
		return jobStatusOf(t, data) == "running"
	}) {
		t.Fatal("the long job never ran")
	}
	var queued []JobStatus
	for i := range 3 {
		queued = append(queued, ts.submit(t, py("print('queued "+strconv.Itoa(i)+"')"), ""))
	}
	start := time.Now()
	ts.cancel()
	ts.waitServeDone(t, 15*time.Second)
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("Serve took %v to return with a grace of 0.5 s", d)
	}
	if len(ts.logs.records(t, "grace period over: killing running async executions")) != 1 {
		t.Error("no log line about killing the running job")
	}

	// A new server on the same data dir: the queued jobs run, the one that
	// was running is reported failed, with the reason; none is lost.
	ts2 := serveServer(t, cfg)
	res, data := ts2.awaitJob(t, long.ExecutionID, "")
	if res.Status != executor.StatusSetupError || res.Error != serverStopped || res.ExecutionID != long.ExecutionID {
		t.Errorf("the job running at shutdown: %s", data)
	}
	for i, js := range queued {
		res, data := ts2.awaitJob(t, js.ExecutionID, "")
		if res.Status != executor.StatusCompleted || res.Stdout != "queued "+strconv.Itoa(i)+"\n" {
			t.Errorf("queued job %d: %s", i, data)
		}
	}
	// Its callback was sent, by one server or the other, with the failure.
	if !waitFor(10*time.Second, func() bool { return len(rc.received()) >= 1 }) {
		t.Fatal("no callback for the failed job")
	}
	if res := decodeResult(t, rc.received()[0].body); res.Error != serverStopped {
		t.Errorf("callback %s", rc.received()[0].body)
	}
}

func TestAsyncResultTTL(t *testing.T) {
	t.Parallel()
	cfg := jobsConfig(t)
	cfg.ResultTTLSeconds = 0.3
	ts := serveServer(t, cfg)
	js := ts.submit(t, py("print('short-lived')"), "")
	resp, data := ts.getJob(t, js.ExecutionID, "wait=true", "")
	if resp.StatusCode != http.StatusOK || decodeResult(t, data).Stdout != "short-lived\n" {
		t.Fatalf("wait=true: %d %s", resp.StatusCode, data)
	}
	if !waitFor(5*time.Second, func() bool {
		resp, _ := ts.getJob(t, js.ExecutionID, "", "")
		return resp.StatusCode == http.StatusNotFound
	}) {
		t.Error("the result never expired")
	}
	if !waitFor(5*time.Second, func() bool { return len(ts.logs.records(t, "async results expired")) > 0 }) {
		t.Error("the janitor never removed the result")
	}
}

// Without Serve there is no job store: async requests answer 503.
func TestAsyncWithoutServe(t *testing.T) {
	t.Parallel()
	ts := startServer(t, jobsConfig(t))
	resp, data := ts.execute(t, with(py("print(1)"), "async", true))
	wantError(t, resp, data, http.StatusServiceUnavailable, "async executions are unavailable")
}

func TestJobsConfig(t *testing.T) {
	t.Parallel()
	for name, change := range map[string]func(*Config){
		"negative queue":  func(c *Config) { c.AsyncQueue = -1 },
		"zero ttl":        func(c *Config) { c.ResultTTLSeconds = 0 },
		"negative wait":   func(c *Config) { c.MaxWaitSeconds = -1 },
		"short secret":    func(c *Config) { c.CallbackSecret = "short" },
		"bad allow":       func(c *Config) { c.CallbackAllow = []string{"example.com"} },
		"negative retry":  func(c *Config) { c.CallbackRetries = -1 },
		"infinite delay":  func(c *Config) { c.CallbackRetryDelaySeconds = inf() },
		"zero cb timeout": func(c *Config) { c.CallbackTimeoutSeconds = 0 },
	} {
		cfg := testConfig()
		change(&cfg)
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	cfg, err := LoadConfig("", envOf(map[string]string{"SANDBOX_RUN_CALLBACK_SECRET": testCallbackSecret}))
	if err != nil || cfg.CallbackSecret != testCallbackSecret {
		t.Errorf("SANDBOX_RUN_CALLBACK_SECRET: %v %q", err, cfg.CallbackSecret)
	}
	if b, _ := json.Marshal(cfg); strings.Contains(string(b), testCallbackSecret) {
		t.Error("the callback secret is in the configuration's JSON")
	}
}

func inf() float64 { f, _ := strconv.ParseFloat("+Inf", 64); return f }

// serveWith runs Serve for a server with its own executor.
func serveWith(t testing.TB, cfg Config, x Executor) *testServer {
	t.Helper()
	ts := newTestServer(t, cfg)
	ts.s = New(cfg, local.New(x), ts.s.log)
	ts.serve(t)
	return ts
}

// A job the executor cannot run ends as error_setup with the reason.
func TestAsyncExecutorError(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		x    failingExecutor
		want string
	}{
		{"error", failingExecutor{Executor: testExec, err: errors.New("disk on fire")}, "execution failed: disk on fire"},
		{"setup_error", failingExecutor{Executor: testExec, status: executor.StatusSetupError}, "clone: operation not permitted"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ts := serveWith(t, jobsConfig(t), tt.x)
			js := ts.submit(t, py("print(1)"), "")
			res, data := ts.awaitJob(t, js.ExecutionID, "")
			if res.Status != executor.StatusSetupError || !strings.Contains(res.Error, tt.want) || res.ExecutionID != js.ExecutionID {
				t.Errorf("%s, want error_setup with %q", data, tt.want)
			}
		})
	}
}

// Async jobs share the worker pool with synchronous requests: a job whose
// turn comes while the pool's queue is full waits, then runs; one still
// waiting when the server drains stays queued and runs after the restart.
func TestAsyncSharesWorkers(t *testing.T) {
	t.Parallel()
	cfg := jobsConfig(t)
	cfg.Workers, cfg.Queue = 1, 0
	ts := serveServer(t, cfg)
	syncDone := make(chan struct{})
	go func() {
		defer close(syncDone)
		resp, data, err := ts.send(t, executeRequest(t, py("import time\ntime.sleep(1)\nprint('sync')")))
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("sync request: %v %s", err, data)
		}
	}()
	ts.waitInFlight(t, 1)
	js := ts.submit(t, py("print('after the sync one')"), "")
	res, data := ts.awaitJob(t, js.ExecutionID, "")
	if res.Stdout != "after the sync one\n" {
		t.Errorf("async job: %s", data)
	}
	<-syncDone

	// Now the drain: a sync run holds the worker, the job waits for it.
	cfg.Queue, cfg.DataDir = 4, t.TempDir()
	ts = serveServer(t, cfg)
	go func() {
		ts.send(t, executeRequest(t, py("import time\ntime.sleep(30)")))
	}()
	ts.waitInFlight(t, 1)
	js = ts.submit(t, py("print('survived the drain')"), "")
	if !waitFor(10*time.Second, func() bool { _, m := ts.ready(t); return m["queued"] == float64(1) }) {
		t.Fatal("the job never waited for the worker")
	}
	// A long poll ends when the server drains.
	polled := make(chan string, 1)
	go func() {
		_, data, err := ts.send(t, request{method: http.MethodGet, path: "/api/sandbox/executions/" + js.ExecutionID + "?wait=true&timeout=30"})
		if err != nil {
			polled <- err.Error()
			return
		}
		polled <- string(data)
	}()
	time.Sleep(100 * time.Millisecond)
	ts.cancel()
	select {
	case data := <-polled:
		if !strings.Contains(data, `"status":"queued"`) {
			t.Errorf("long poll at the drain: %s", data)
		}
	case <-time.After(5 * time.Second):
		t.Error("the long poll did not end with the drain")
	}
	err := <-ts.done
	ts.done <- err
	ts2 := serveServer(t, cfg)
	if res, data := ts2.awaitJob(t, js.ExecutionID, ""); res.Stdout != "survived the drain\n" {
		t.Errorf("the job after the restart: %s", data)
	}
}
