package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/executor"
)

// Quotas per key beside the server's (files, sessions, async jobs and
// their stored results), the cap of a stored result, callbacks to IPv6
// forms of internal IPv4 addresses, and the callback's delivery state in
// the job's answers. Real servers on 127.0.0.1, real sandboxes.

// storedAnswer is a finished job's answer with the fields these tests read.
type storedAnswer struct {
	Status                executor.Status `json:"status"`
	ExitCode              int             `json:"exit_code"`
	Stdout                string          `json:"stdout"`
	StdoutEncoding        string          `json:"stdout_encoding"`
	StdoutTruncated       bool            `json:"stdout_truncated"`
	ResultTruncated       bool            `json:"result_truncated"`
	ResultTruncatedReason string          `json:"result_truncated_reason"`
	Callback              *CallbackStatus `json:"callback"`
}

func decodeAnswer(t testing.TB, data []byte) storedAnswer {
	t.Helper()
	var a storedAnswer
	if err := json.Unmarshal(data, &a); err != nil {
		t.Fatalf("%s: %v", truncate(data), err)
	}
	return a
}

// stdoutBytes is the answer's stdout as bytes, whichever its encoding.
func (a storedAnswer) stdoutBytes(t testing.TB) []byte {
	t.Helper()
	if a.StdoutEncoding == "base64" {
		b, err := base64.StdEncoding.DecodeString(a.Stdout)
		if err != nil {
			t.Fatalf("stdout base64: %v", err)
		}
		return b
	}
	return []byte(a.Stdout)
}

// submitAsync posts an async execution with key and returns the answer.
func (ts *testServer) submitAsync(t testing.TB, body map[string]any, key string) (*http.Response, []byte) {
	t.Helper()
	return ts.call(t, keyed(executeRequest(t, with(body, "async", true)), key))
}

// waitRunning waits until job id of key's runs.
func (ts *testServer) waitRunning(t testing.TB, id, key string) {
	t.Helper()
	if !waitFor(30*time.Second, func() bool {
		_, data := ts.getJob(t, id, "", key)
		return jobStatusOf(t, data) == "running"
	}) {
		t.Fatalf("job %s never ran", id)
	}
}

// A stored result is capped: one far above max_result_bytes (control
// bytes, which JSON escapes six times over) is stored cut down to the cap,
// with the flag and the reason, its status and exit code intact.
func TestAsyncResultCap(t *testing.T) {
	t.Parallel()
	cfg := jobsConfig(t)
	cfg.MaxResultBytes = 16 << 10
	ts := serveServer(t, cfg)
	js := ts.submit(t, py("import sys\nsys.stdout.write('\\x01' * 200000)"), "")
	_, data := ts.awaitJob(t, js.ExecutionID, "")
	// The answer is the stored result and the job's times.
	if len(data) > int(cfg.MaxResultBytes)+200 {
		t.Fatalf("the answer is %d bytes, above max_result_bytes %d", len(data), cfg.MaxResultBytes)
	}
	a := decodeAnswer(t, data)
	out := a.stdoutBytes(t)
	switch {
	case a.Status != executor.StatusCompleted || a.ExitCode != 0:
		t.Errorf("status %s, exit %d: %s", a.Status, a.ExitCode, truncate(data))
	case !a.ResultTruncated || !a.StdoutTruncated:
		t.Errorf("result_truncated %v, stdout_truncated %v", a.ResultTruncated, a.StdoutTruncated)
	case !strings.Contains(a.ResultTruncatedReason, "above max_result_bytes (16384)") || !strings.Contains(a.ResultTruncatedReason, "stdout cut to"):
		t.Errorf("result_truncated_reason %q", a.ResultTruncatedReason)
	case len(out) < 1000 || !bytes.Equal(out, bytes.Repeat([]byte{1}, len(out))):
		t.Errorf("stdout: %d bytes, want a prefix of the output", len(out))
	}
	// A small result is stored whole, without the flag.
	js = ts.submit(t, py("print('small')"), "")
	if _, data := ts.awaitJob(t, js.ExecutionID, ""); strings.Contains(string(data), "result_truncated") {
		t.Errorf("small result: %s", data)
	}
}

// Each key has a quota of stored result bytes: the result that overflows
// it is cut to what is left (saying so), then the key's new jobs are
// refused with 507, while another key's run as before.
func TestAsyncKeyResultQuota(t *testing.T) {
	t.Parallel()
	cfg := storeConfig(t)
	cfg.MaxResultBytes = 16 << 10
	cfg.ResultQuotaBytesPerKey = 40 << 10
	ts := serveServer(t, cfg)
	body := py("print('x' * 15000, end='')")
	for i := range 2 {
		js := ts.submit(t, body, aliceKey)
		if _, data := ts.awaitJob(t, js.ExecutionID, aliceKey); decodeAnswer(t, data).ResultTruncated || len(decodeAnswer(t, data).Stdout) != 15000 {
			t.Fatalf("job %d within the quota: %s", i, truncate(data))
		}
	}
	js := ts.submit(t, body, aliceKey)
	_, data := ts.awaitJob(t, js.ExecutionID, aliceKey)
	a := decodeAnswer(t, data)
	if !a.ResultTruncated || !strings.Contains(a.ResultTruncatedReason, "key alice's stored async results use") ||
		!strings.Contains(a.ResultTruncatedReason, "its 40960-byte quota (result_quota_bytes_per_key)") ||
		len(a.Stdout) >= 15000 || strings.Trim(a.Stdout, "x") != "" || a.Status != executor.StatusCompleted {
		t.Errorf("the job past the quota: %s", truncate(data))
	}
	resp, data := ts.submitAsync(t, body, aliceKey)
	wantError(t, resp, data, http.StatusInsufficientStorage, "key alice's stored async results use", "40960-byte quota (result_quota_bytes_per_key)")
	// Bob's quota is his own.
	js = ts.submit(t, body, bobKey)
	if _, data := ts.awaitJob(t, js.ExecutionID, bobKey); decodeAnswer(t, data).ResultTruncated {
		t.Errorf("bob's job: %s", truncate(data))
	}
}

// Each key may have async_queue_per_key jobs queued (429 past it), beside
// the server's async_queue; without keys only the server's limit applies.
func TestAsyncKeyQueueQuota(t *testing.T) {
	t.Parallel()
	cfg := storeConfig(t)
	cfg.Workers, cfg.AsyncQueuePerKey, cfg.ShutdownGraceSeconds = 1, 2, 0.5
	ts := serveServer(t, cfg)
	long := ts.submit(t, py("import time\ntime.sleep(60)"), aliceKey)
	ts.waitRunning(t, long.ExecutionID, aliceKey)
	// The only worker is busy: these stay queued.
	ts.submit(t, py("print(1)"), aliceKey)
	ts.submit(t, py("print(2)"), aliceKey)
	resp, data := ts.submitAsync(t, py("print(3)"), aliceKey)
	wantError(t, resp, data, http.StatusTooManyRequests, "key alice has 2 async executions queued", "limit of 2 (async_queue_per_key)")
	if resp.Header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	if js := ts.submit(t, py("print(4)"), bobKey); js.QueuePosition != 3 {
		t.Errorf("bob's job: queue_position %d, want 3", js.QueuePosition)
	}

	// Without keys: one tenant, the server's limit.
	cfg = jobsConfig(t)
	cfg.Workers, cfg.AsyncQueuePerKey = 1, 1
	ts = serveServer(t, cfg)
	long = ts.submit(t, py("import time\ntime.sleep(60)"), "")
	ts.waitRunning(t, long.ExecutionID, "")
	for range 3 {
		ts.submit(t, py("print(1)"), "")
	}
}

// Files: each key has a quota of bytes and of files beside the store's;
// one key that fills its own leaves room for the others.
func TestFileKeyQuotas(t *testing.T) {
	t.Parallel()
	cfg := storeConfig(t)
	cfg.MaxFileBytes = 1000
	cfg.FileQuotaBytes = 10000
	cfg.FileQuotaFiles = 6
	cfg.FileQuotaBytesPerKey = 2500
	cfg.FileQuotaFilesPerKey = 4
	ts := startServer(t, cfg)
	k := bytes.Repeat([]byte("k"), 1000)

	ts.stored(t, aliceKey, k, "")
	ts.stored(t, aliceKey, k, "")
	resp, body := ts.upload(t, aliceKey, k, "")
	wantError(t, resp, body, http.StatusInsufficientStorage, "key alice's files use 2000 bytes of its 2500-byte quota (file_quota_bytes_per_key), no room for 1000 more")
	resp, body = ts.call(t, request{method: http.MethodPost, path: "/api/sandbox/files", body: k, chunked: true, contentType: "none", key: aliceKey})
	wantError(t, resp, body, http.StatusInsufficientStorage, "file_quota_bytes_per_key")
	mp, ct := multipartBody(t, [3]string{"file", "k.bin", string(k)})
	resp, body = ts.call(t, request{method: http.MethodPost, path: "/api/sandbox/files", body: mp, contentType: ct, key: aliceKey})
	wantError(t, resp, body, http.StatusInsufficientStorage, "file_quota_bytes_per_key")
	// Bob is not blocked by alice's files.
	b1 := ts.stored(t, bobKey, k, "")

	ts.stored(t, aliceKey, k[:400], "")
	a4 := ts.stored(t, aliceKey, k[:50], "")
	resp, body = ts.upload(t, aliceKey, k[:1], "")
	wantError(t, resp, body, http.StatusInsufficientStorage, "key alice has 4 stored files, at its limit of 4 (file_quota_files_per_key)")

	// The store's count: 6 files of all keys.
	ts.stored(t, bobKey, k[:1], "")
	resp, body = ts.upload(t, bobKey, k[:1], "")
	wantError(t, resp, body, http.StatusInsufficientStorage, "6 files stored, at its limit of 6 (file_quota_files)")
	// Deleting makes room.
	ts.call(t, request{method: http.MethodDelete, path: "/api/sandbox/files/" + a4.FileID, key: aliceKey})
	ts.stored(t, aliceKey, k[:50], "")
	ts.call(t, request{method: http.MethodDelete, path: "/api/sandbox/files/" + b1.FileID, key: bobKey})
	ts.stored(t, bobKey, k, "")

	// A restart counts the files again.
	ts2 := startServer(t, cfg)
	resp, body = ts2.upload(t, aliceKey, k[:1], "")
	wantError(t, resp, body, http.StatusInsufficientStorage, "key alice has 4 stored files")

	// Without keys: one tenant, the store's quotas.
	cfg = testConfig()
	cfg.DataDir = t.TempDir()
	cfg.MaxFileBytes, cfg.FileQuotaBytesPerKey, cfg.FileQuotaFilesPerKey = 1000, 1000, 1
	ts = startServer(t, cfg)
	for range 3 {
		ts.stored(t, "", k, "")
	}
}

// Sessions: the disk of all of one key's sessions is bounded
// (session_quota_bytes_per_key) beside each session's cap.
func TestSessionKeyDiskQuota(t *testing.T) {
	t.Parallel()
	cfg := storeConfig(t)
	cfg.SessionQuotaBytesPerKey = 3000
	ts := startServer(t, cfg)
	a := ts.createSession(t, aliceKey, map[string]any{"language": "python"}).SessionID
	b := ts.createSession(t, aliceKey, map[string]any{"language": "python"}).SessionID
	in := func(id, code string) map[string]any {
		return map[string]any{"language": "python", "code": code, "session_id": id}
	}
	ts.runIn(t, aliceKey, in(a, "open('a.txt','w').write('a' * 2000)"))
	ts.runIn(t, aliceKey, in(b, "open('b.txt','w').write('b' * 1500)"))
	for _, id := range []string{a, b} {
		resp, data := ts.call(t, keyed(executeRequest(t, in(id, "print(1)")), aliceKey))
		wantError(t, resp, data, http.StatusInsufficientStorage, "the sessions of key alice hold ", "at or above its quota of 3000 (session_quota_bytes_per_key)")
	}
	// Bob's sessions are his own.
	c := ts.createSession(t, bobKey, map[string]any{"language": "python"}).SessionID
	ts.runIn(t, bobKey, in(c, "open('c.txt','w').write('c' * 2500)"))
	ts.runIn(t, bobKey, in(c, "print(1)"))
	// Freeing space makes room.
	resp, data := ts.call(t, request{method: http.MethodDelete, path: "/api/sandbox/sessions/" + b + "/file?path=b.txt", key: aliceKey})
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE file: %d %s", resp.StatusCode, data)
	}
	if res := ts.runIn(t, aliceKey, in(a, "print(len(open('a.txt').read()))")); res.Stdout != "2000\n" {
		t.Errorf("after freeing space: %q", res.Stdout)
	}
}

// The sessions of all keys are bounded too (max_sessions), beside each
// key's max_sessions_per_key.
func TestSessionServerLimit(t *testing.T) {
	t.Parallel()
	cfg := storeConfig(t)
	cfg.MaxSessions, cfg.MaxSessionsPerKey = 3, 2
	ts := startServer(t, cfg)
	ts.createSession(t, aliceKey, map[string]any{"language": "python"})
	ts.createSession(t, aliceKey, map[string]any{"language": "python"})
	resp, data := ts.call(t, request{method: http.MethodPost, path: "/api/sandbox/sessions", body: []byte(`{"language":"python"}`), key: aliceKey})
	wantError(t, resp, data, http.StatusInsufficientStorage, "key alice has 2 sessions, at its limit of 2 (max_sessions_per_key)")
	b := ts.createSession(t, bobKey, map[string]any{"language": "python"})
	resp, data = ts.call(t, request{method: http.MethodPost, path: "/api/sandbox/sessions", body: []byte(`{"language":"python"}`), key: bobKey})
	wantError(t, resp, data, http.StatusInsufficientStorage, "this server has 3 sessions, at its limit of 3 (max_sessions)")
	ts.call(t, request{method: http.MethodDelete, path: "/api/sandbox/sessions/" + b.SessionID, key: bobKey})
	ts.createSession(t, bobKey, map[string]any{"language": "python"})
}

// IPv6 forms of internal IPv4 addresses are refused at submission like
// the IPv4 forms (pkg/webhook tests the policy and the dial-time check).
func TestCallbackEmbeddedIPv4(t *testing.T) {
	t.Parallel()
	ts := serveServer(t, jobsConfig(t))
	rc := newReceiver(t)
	port := rc.URL[strings.LastIndex(rc.URL, ":")+1:]
	for _, host := range []string{"[::127.0.0.1]", "[::ffff:0:7f00:1]", "[::ffff:0:127.0.0.1]", "[64:ff9b::7f00:1]"} {
		resp, data := ts.execute(t, with(py("print(1)"), "async", true, "callback_url", "http://"+host+":"+port+"/"))
		wantError(t, resp, data, http.StatusBadRequest, "callback_url refused", "loopback")
	}
	if n := len(rc.received()); n != 0 {
		t.Errorf("the receiver got %d calls", n)
	}
}

// The callback's delivery state is in the job's answers: pending while
// the job waits and while a retry is due, then delivered or failed, with
// the attempts, the last HTTP status or error, and when.
func TestAsyncCallbackState(t *testing.T) {
	t.Parallel()
	cfg := jobsConfig(t)
	cfg.CallbackAllow = []string{"127.0.0.1/32"}
	cfg.Workers = 1
	ts := serveServer(t, cfg)
	callbackOf := func(id string) *CallbackStatus {
		t.Helper()
		_, data := ts.getJob(t, id, "", "")
		var v struct {
			Status   string          `json:"status"`
			Callback *CallbackStatus `json:"callback"`
		}
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		if v.Callback == nil {
			t.Fatalf("no callback object: %s", truncate(data))
		}
		return v.Callback
	}
	awaitCallback := func(id string, done func(*CallbackStatus) bool) *CallbackStatus {
		t.Helper()
		var cb *CallbackStatus
		if !waitFor(30*time.Second, func() bool { cb = callbackOf(id); return done(cb) }) {
			t.Fatalf("callback of %s: %+v", id, cb)
		}
		return cb
	}

	// Delivered at the second attempt, after a 500. While the job waits
	// behind a running one, the callback is pending.
	long := ts.submit(t, py("import time\ntime.sleep(3)"), "")
	ts.waitRunning(t, long.ExecutionID, "")
	rc := newReceiver(t, http.StatusInternalServerError)
	js := ts.submit(t, with(py("print('ok')"), "callback_url", rc.URL), "")
	if js.Callback == nil || js.Callback.Status != "pending" || js.Callback.Attempts != 0 {
		t.Errorf("202: callback %+v", js.Callback)
	}
	_, data := ts.getJob(t, js.ExecutionID, "", "")
	if s := jobStatusOf(t, data); s == "queued" || s == "running" {
		if cb := decodeAnswer(t, data).Callback; cb == nil || cb.Status != "pending" || cb.Attempts != 0 {
			t.Errorf("%s: callback %+v", s, cb)
		}
	}
	cb := awaitCallback(js.ExecutionID, func(cb *CallbackStatus) bool { return cb.Status != "pending" })
	if cb.Status != "delivered" || cb.Attempts != 2 || cb.LastHTTPStatus != http.StatusNoContent || cb.Error != "" ||
		cb.DeliveredAt.IsZero() || cb.LastAttemptAt.IsZero() || cb.DeliveredAt.Before(cb.LastAttemptAt) || !cb.NextAttemptAt.IsZero() || !cb.FailedAt.IsZero() {
		t.Errorf("delivered: %+v", cb)
	}
	if n := len(rc.received()); n != 2 {
		t.Errorf("%d deliveries, want 2", n)
	}

	// Refused with 410: given up at once.
	rc410 := newReceiver(t, http.StatusGone)
	js = ts.submit(t, with(py("print('gone')"), "callback_url", rc410.URL), "")
	cb = awaitCallback(js.ExecutionID, func(cb *CallbackStatus) bool { return cb.Status != "pending" })
	if cb.Status != "failed" || cb.Attempts != 1 || cb.LastHTTPStatus != http.StatusGone || !strings.Contains(cb.Error, "410") ||
		cb.FailedAt.IsZero() || !cb.DeliveredAt.IsZero() || !cb.NextAttemptAt.IsZero() {
		t.Errorf("failed: %+v", cb)
	}

	// A retry due later: pending, with the failed attempt and when the
	// next one comes.
	cfg2 := jobsConfig(t)
	cfg2.CallbackAllow = []string{"127.0.0.1/32"}
	cfg2.CallbackRetryDelaySeconds = 3600
	ts = serveServer(t, cfg2)
	rc503 := newReceiver(t, http.StatusServiceUnavailable)
	js = ts.submit(t, with(py("print('later')"), "callback_url", rc503.URL), "")
	cb = awaitCallback(js.ExecutionID, func(cb *CallbackStatus) bool { return cb.Attempts > 0 })
	if cb.Status != "pending" || cb.Attempts != 1 || cb.LastHTTPStatus != http.StatusServiceUnavailable ||
		!strings.Contains(cb.Error, "503") || !cb.NextAttemptAt.After(cb.LastAttemptAt) || !cb.DeliveredAt.IsZero() || !cb.FailedAt.IsZero() {
		t.Errorf("retry due: %+v", cb)
	}
}

func TestQuotaConfig(t *testing.T) {
	t.Parallel()
	for name, change := range map[string]func(*Config){
		"file_quota_files":            func(c *Config) { c.FileQuotaFiles = 0 },
		"file_quota_files_per_key":    func(c *Config) { c.FileQuotaFilesPerKey = 0 },
		"file_quota_bytes_per_key":    func(c *Config) { c.FileQuotaBytesPerKey = c.MaxFileBytes - 1 },
		"session_quota_bytes_per_key": func(c *Config) { c.SessionQuotaBytesPerKey = 0 },
		"max_sessions":                func(c *Config) { c.MaxSessions = 0 },
		"async_queue_per_key":         func(c *Config) { c.AsyncQueuePerKey = 0 },
		"max_result_bytes":            func(c *Config) { c.MaxResultBytes = 100 },
		"result_quota_bytes":          func(c *Config) { c.ResultQuotaBytes = c.MaxResultBytes - 1 },
		"result_quota_bytes_per_key":  func(c *Config) { c.ResultQuotaBytesPerKey = c.MaxResultBytes - 1 },
	} {
		cfg := testConfig()
		change(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
	path := writeFile(t, `
file_quota_files: 50
file_quota_bytes_per_key: 33554432
file_quota_files_per_key: 20
session_quota_bytes_per_key: 1048576
max_sessions: 9
async_queue_per_key: 7
max_result_bytes: 65536
result_quota_bytes: 1048576
result_quota_bytes_per_key: 131072
`)
	cfg, err := LoadConfig(path, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.FileQuotaFiles != 50 || cfg.FileQuotaBytesPerKey != 32<<20 || cfg.FileQuotaFilesPerKey != 20 || cfg.SessionQuotaBytesPerKey != 1<<20 || cfg.MaxSessions != 9 ||
		cfg.AsyncQueuePerKey != 7 || cfg.MaxResultBytes != 64<<10 || cfg.ResultQuotaBytes != 1<<20 || cfg.ResultQuotaBytesPerKey != 128<<10 {
		t.Errorf("loaded %+v", cfg)
	}
	d := DefaultConfig()
	if d.FileQuotaBytesPerKey*2 > d.FileQuotaBytes || d.AsyncQueuePerKey*2 > d.AsyncQueue || d.ResultQuotaBytesPerKey*2 > d.ResultQuotaBytes {
		t.Errorf("a default per-key share leaves no room for a second key: %+v", d)
	}
}
