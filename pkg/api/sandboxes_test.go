package api

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sandbox-run/sandbox-run/internal/testkit/imagetest"
	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// Live sandboxes over the native API (sandboxes.go), in real sandboxes:
// the agent they run first is this test binary (init below).

// sandboxServer is a server with two keys, alice's and bob's (the keys
// of files_test.go).
func sandboxServer(t *testing.T, configure ...func(*Config)) *testServer {
	t.Helper()
	cfg := keyConfig(
		APIKey{ID: "alice", Key: aliceKey, Scopes: []string{ScopeExecute}},
		APIKey{ID: "bob", Key: bobKey, Scopes: []string{ScopeExecute}},
	)
	for _, c := range configure {
		c(&cfg)
	}
	return startServer(t, cfg)
}

// sbx is one live sandbox of alice's on a test server.
type sbx struct {
	t  *testing.T
	ts *testServer
	wire.Sandbox
}

// path is the sandbox's URL path with suffix.
func (b *sbx) path(suffix string) string { return sandboxesPath + "/" + b.ID + suffix }

// newSandbox creates a sandbox of alice's (body: a wire.SandboxRequest),
// deleted when the test ends.
func newSandbox(t *testing.T, ts *testServer, body any) *sbx {
	t.Helper()
	resp, data := ts.call(t, request{method: "POST", path: sandboxesPath, body: mustJSON(t, body), key: aliceKey})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", resp.StatusCode, data)
	}
	b := &sbx{t: t, ts: ts}
	if err := json.Unmarshal(data, &b.Sandbox); err != nil {
		t.Fatal(err)
	}
	if loc := resp.Header.Get("Location"); loc != b.path("") {
		t.Errorf("Location %q, want %q", loc, b.path(""))
	}
	t.Cleanup(func() {
		ts.send(t, request{method: "DELETE", path: b.path(""), key: aliceKey})
	})
	return b
}

// do calls method on the sandbox's suffix with alice's key.
func (b *sbx) do(method, suffix string, body any) (*http.Response, []byte) {
	b.t.Helper()
	r := request{method: method, path: b.path(suffix), key: aliceKey}
	if body != nil {
		r.body = mustJSON(b.t, body)
	}
	return b.ts.call(b.t, r)
}

// want calls and wants status, decoding a JSON answer into out (if any).
func (b *sbx) want(status int, method, suffix string, body, out any) []byte {
	b.t.Helper()
	resp, data := b.do(method, suffix, body)
	if resp.StatusCode != status {
		b.t.Fatalf("%s %s: %d, want %d: %s", method, suffix, resp.StatusCode, status, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			b.t.Fatalf("%s %s: %v: %s", method, suffix, err, data)
		}
	}
	return data
}

// run runs a process and waits for its end.
func (b *sbx) run(body any) wire.ProcessResult {
	b.t.Helper()
	var res wire.ProcessResult
	b.want(http.StatusOK, "POST", "/processes", body, &res)
	return res
}

// raw sends body as is (Content-Type none) to the sandbox's suffix.
func (b *sbx) raw(method, suffix string, body []byte) (*http.Response, []byte) {
	b.t.Helper()
	return b.ts.call(b.t, request{method: method, path: b.path(suffix), key: aliceKey, body: body, contentType: "application/octet-stream"})
}

// sseStream is an event stream being read; every event is checked
// against the document's schema for it.
type sbxStream struct {
	t      *testing.T
	method string
	path   string
	resp   *http.Response
	sc     *bufio.Scanner
	body   bytes.Buffer
	cancel context.CancelFunc
	events chan sseEvent
	done   chan struct{}
}

// eventSchemas are the schemas of the sandboxes' events.
var eventSchemas = map[string]string{"start": "", "stdout": "ProcessOutput", "stderr": "ProcessOutput", "pty": "ProcessOutput",
	"exit": "ProcessResult", "fs": "FSEvent", "error": "Error"}

// openStream opens an event stream with alice's key (body: JSON, or nil).
func (b *sbx) openStream(method, suffix string, body any) *sbxStream {
	b.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(mustJSON(b.t, body))
	}
	req, _ := http.NewRequestWithContext(ctx, method, b.ts.url+b.path(suffix), rd)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+aliceKey)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := b.ts.client.Do(req)
	if err != nil {
		cancel()
		b.t.Fatalf("%s %s: %v", method, suffix, err)
	}
	s := &sbxStream{t: b.t, method: method, path: b.path(suffix), resp: resp, cancel: cancel, events: make(chan sseEvent, 1024), done: make(chan struct{})}
	b.t.Cleanup(s.close)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		data, _ := io.ReadAll(resp.Body)
		b.t.Fatalf("%s %s: %d %s: %s", method, suffix, resp.StatusCode, resp.Header.Get("Content-Type"), data)
	}
	s.sc = bufio.NewScanner(io.TeeReader(resp.Body, &s.body))
	s.sc.Buffer(make([]byte, 1<<20), 4<<20)
	go s.read()
	return s
}

func (s *sbxStream) read() {
	defer close(s.done)
	defer close(s.events)
	var cur sseEvent
	for s.sc.Scan() {
		line := s.sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			cur = sseEvent{name: strings.TrimPrefix(line, "event: ")}
		case strings.HasPrefix(line, "data: "):
			cur.data = []byte(strings.TrimPrefix(line, "data: "))
		case line == "" && cur.name != "":
			s.events <- cur
			cur = sseEvent{}
		}
	}
}

// next is the next event, or false once the stream ended; it fails the
// test after a minute without one.
func (s *sbxStream) next() (sseEvent, bool) {
	s.t.Helper()
	select {
	case ev, ok := <-s.events:
		if !ok {
			return ev, false
		}
		schema, known := eventSchemas[ev.name]
		if !known {
			s.t.Errorf("unknown event %q: %s", ev.name, ev.data)
		}
		if schema != "" {
			if err := testDoc.validate("/components/schemas/"+schema, ev.data); err != nil {
				s.t.Errorf("%s event does not match %s: %v: %s", ev.name, schema, err, ev.data)
			}
		}
		return ev, true
	case <-time.After(time.Minute):
		s.t.Fatalf("no event for a minute on %s", s.path)
		return sseEvent{}, false
	}
}

// all reads the events to the end of the stream, which is then checked
// against the document as a whole.
func (s *sbxStream) all() []sseEvent {
	s.t.Helper()
	var out []sseEvent
	for {
		ev, ok := s.next()
		if !ok {
			break
		}
		out = append(out, ev)
	}
	<-s.done
	testDoc.check(s.t, s.method, s.path, s.resp, s.body.Bytes())
	return out
}

func (s *sbxStream) close() {
	s.cancel()
	s.resp.Body.Close()
	<-s.done
}

// outputOf concatenates a stream's output events, and returns its exit.
func outputOf(t *testing.T, events []sseEvent) (stdout, stderr string, exit wire.ProcessResult) {
	t.Helper()
	if len(events) == 0 || events[0].name != "start" || events[len(events)-1].name != "exit" {
		t.Fatalf("events %v: want start first and exit last", eventNames(events))
	}
	var out, errb strings.Builder
	for i, ev := range events {
		var o processOutput
		switch ev.name {
		case "stdout", "stderr":
			json.Unmarshal(ev.data, &o)
			if ev.name == "stdout" {
				out.WriteString(o.Data)
			} else {
				errb.WriteString(o.Data)
			}
		case "exit":
			if i != len(events)-1 {
				t.Errorf("exit event at %d of %d", i, len(events))
			}
			json.Unmarshal(ev.data, &exit)
		}
	}
	return out.String(), errb.String(), exit
}

func eventNames(events []sseEvent) []string {
	var out []string
	for _, ev := range events {
		out = append(out, ev.name+" "+string(ev.data))
	}
	return out
}

// waitUntil polls cond every 50 ms for up to a minute.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !waitFor(time.Minute, func() bool {
		ok := cond()
		if !ok {
			time.Sleep(30 * time.Millisecond)
		}
		return ok
	}) {
		t.Fatalf("%s: not within a minute", what)
	}
}

// processes lists the sandbox's processes.
func (b *sbx) processes() []wire.ProcessInfo {
	b.t.Helper()
	var list struct{ Processes []wire.ProcessInfo }
	b.want(http.StatusOK, "GET", "/processes", nil, &list)
	return list.Processes
}

func (b *sbx) running(pid int) bool {
	return slices.ContainsFunc(b.processes(), func(p wire.ProcessInfo) bool { return p.PID == pid })
}

// ---------------------------------------------------------------------------

// TestSandboxLifecycle: create (a template, its languages), get, list,
// move the timeout, delete; refusals of bad requests.
func TestSandboxLifecycle(t *testing.T) {
	ts := sandboxServer(t)
	b := newSandbox(t, ts, map[string]any{"template": "code-interpreter-v1", "metadata": map[string]string{"user": "alice"},
		"timeout_seconds": 120, "memory_mb": 256})
	if b.AccessToken == "" || b.State != "running" || b.Template != "code-interpreter-v1" || b.MemoryMB != 256 ||
		!slices.Equal(b.Languages, []string{"python", "javascript", "bash"}) || b.Metadata["user"] != "alice" {
		t.Errorf("created %+v", b.Sandbox)
	}
	if d := b.EndAt.Sub(b.StartedAt); d < 119*time.Second || d > 121*time.Second {
		t.Errorf("end_at %v after started_at, want 120 s", d)
	}

	var got wire.Sandbox
	b.want(http.StatusOK, "GET", "", nil, &got)
	if got.ID != b.ID || got.AccessToken != "" || !got.EndAt.Equal(b.EndAt) {
		t.Errorf("get %+v, created %+v", got, b.Sandbox)
	}

	// The default template; then the key's list, oldest first.
	b2 := newSandbox(t, ts, map[string]any{})
	if b2.Template != "base" || len(b2.Languages) != 0 {
		t.Errorf("default sandbox %+v", b2.Sandbox)
	}
	var list struct{ Sandboxes []wire.Sandbox }
	resp, data := ts.call(t, request{method: "GET", path: sandboxesPath, key: aliceKey})
	if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &list) != nil || len(list.Sandboxes) != 2 ||
		list.Sandboxes[0].ID != b.ID || list.Sandboxes[1].ID != b2.ID {
		t.Errorf("list: %d %s", resp.StatusCode, data)
	}
	resp, data = ts.call(t, request{method: "GET", path: sandboxesPath, key: bobKey})
	if resp.StatusCode != http.StatusOK || string(data) != "{\"sandboxes\":[]}\n" {
		t.Errorf("bob's list: %d %s", resp.StatusCode, data)
	}

	// The timeout moves the end.
	var moved wire.Sandbox
	b.want(http.StatusOK, "POST", "/timeout", map[string]any{"timeout_seconds": 3600}, &moved)
	if d := time.Until(moved.EndAt); d < 3500*time.Second || d > 3601*time.Second {
		t.Errorf("end_at %v from now, want an hour", d)
	}
	for _, body := range []string{`{"timeout_seconds": 0}`, `{"timeout_seconds": -1}`, `{"timeout": 5}`, `{"timeout_seconds": 1e12}`} {
		resp, data := b.do("POST", "/timeout", body)
		wantError(t, resp, data, http.StatusBadRequest)
	}

	// Refusals.
	for body, want := range map[string]string{
		`{"languages": ["klingon"]}`:                "unknown language",
		`{"template": "nonesuch"}`:                  "unknown template",
		`{"languagez": ["python"]}`:                 "unknown field",
		`{"Template": "base"}`:                      "unknown field",
		`{"timeout_seconds": -5}`:                   "timeout_seconds",
		`{"memory_mb": -1}`:                         "memory_mb",
		`{"idle_pause_seconds": -1}`:                "idle_pause_seconds",
		`{"isolation": "vm"}`:                       "isolation",
		`{"env": {"A=B": "x"}}`:                     "env",
		`{"timeout_seconds": 100000000}`:            "timeout",
		`[1]`:                                       "JSON object",
		`{"template": "base"} {"template": "base"}`: "more than one value",
	} {
		resp, data := ts.call(t, request{method: "POST", path: sandboxesPath, body: []byte(body), key: aliceKey})
		wantError(t, resp, data, http.StatusBadRequest, want)
	}
	resp, data = ts.call(t, request{method: "POST", path: sandboxesPath, body: []byte(`{}`), contentType: "text/plain", key: aliceKey})
	wantError(t, resp, data, http.StatusUnsupportedMediaType)
	resp, data = ts.call(t, request{method: "POST", path: sandboxesPath, body: []byte(`{}`)})
	wantError(t, resp, data, http.StatusUnauthorized)
	resp, data = ts.call(t, request{method: "PATCH", path: b.path(""), key: aliceKey})
	wantError(t, resp, data, http.StatusMethodNotAllowed)

	// Delete: it is gone.
	resp, data = b.do("DELETE", "", nil)
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: %d %s", resp.StatusCode, data)
	}
	for _, m := range []string{"GET", "DELETE"} {
		resp, data := b.do(m, "", nil)
		wantError(t, resp, data, http.StatusNotFound, "no such sandbox")
	}
	resp, data = b.do("POST", "/processes", map[string]any{"command": "true"})
	wantError(t, resp, data, http.StatusNotFound)
	if resp, data := b2.do("DELETE", "", nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: %d %s", resp.StatusCode, data)
	}
	wantNoSandbox(t)
}

// TestSandboxPause: pause freezes a sandbox (409 a second time), GET says
// paused, resume lets it go on with a new timeout or what was left of it,
// a call that needs it running resumes it, evict writes it to disk and a
// call brings it back, a paused sandbox is deleted as any other;
// auto_pause makes its timeout pause it.
func TestSandboxPause(t *testing.T) {
	ts := sandboxServer(t)
	b := newSandbox(t, ts, map[string]any{"timeout_seconds": 600})
	var got wire.Sandbox
	b.want(http.StatusOK, "POST", "/pause", nil, &got)
	if got.State != "paused" {
		t.Fatalf("paused: %+v", got)
	}
	resp, data := b.do("POST", "/pause", nil)
	wantError(t, resp, data, http.StatusConflict, "paused already")
	b.want(http.StatusOK, "GET", "", nil, &got)
	if got.State != "paused" {
		t.Errorf("get of a paused sandbox: %+v", got)
	}
	b.want(http.StatusOK, "POST", "/resume", map[string]any{"timeout_seconds": 60}, &got)
	if d := time.Until(got.EndAt); got.State != "running" || d < 50*time.Second || d > 61*time.Second {
		t.Errorf("resumed for 60 s: %s, ends in %v", got.State, d)
	}
	b.want(http.StatusOK, "POST", "/resume", nil, &got) // running: left so
	resp, data = b.do("POST", "/resume", map[string]any{"timeout_seconds": -1})
	wantError(t, resp, data, http.StatusBadRequest, "timeout_seconds")

	// A process resumes it.
	b.want(http.StatusOK, "POST", "/pause", nil, nil)
	if res := b.run(map[string]any{"command": "echo awake"}); res.Stdout != "awake\n" {
		t.Errorf("a process in a paused sandbox: %+v", res)
	}
	if b.want(http.StatusOK, "GET", "", nil, &got); got.State != "running" {
		t.Errorf("after a process: %s", got.State)
	}

	// Evicted to disk: its memory given back, its files there again on
	// the next call.
	b.run(map[string]any{"command": "echo kept > kept.txt"})
	b.want(http.StatusOK, "POST", "/pause", map[string]any{"evict": true}, &got)
	if !got.Evicted || got.State != "paused" {
		t.Errorf("evicted: %+v", got)
	}
	b.want(http.StatusOK, "POST", "/pause", map[string]any{"evict": true}, nil) // evicted already: left so
	resp, data = b.do("POST", "/pause", map[string]any{"evict": "yes"})
	wantError(t, resp, data, http.StatusBadRequest)
	if res := b.run(map[string]any{"command": "cat kept.txt"}); res.Stdout != "kept\n" {
		t.Errorf("a process in an evicted sandbox: %+v", res)
	}
	got = wire.Sandbox{}
	if b.want(http.StatusOK, "GET", "", nil, &got); got.State != "running" || got.Evicted {
		t.Errorf("back from disk: %+v", got)
	}

	b.want(http.StatusOK, "POST", "/pause", nil, nil)
	if resp, data := b.do("DELETE", "", nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete of a paused sandbox: %d %s", resp.StatusCode, data)
	}

	a := newSandbox(t, ts, map[string]any{"timeout_seconds": 1, "auto_pause": true})
	if !a.AutoPause {
		t.Errorf("created %+v", a.Sandbox)
	}
	waitUntil(t, "its timeout pauses it", func() bool {
		a.want(http.StatusOK, "GET", "", nil, &got)
		return got.State == "paused"
	})
}

// TestSandboxOtherKey: another key's sandbox does not exist for a key,
// on every route; it is left as it was.
func TestSandboxOtherKey(t *testing.T) {
	ts := sandboxServer(t)
	b := newSandbox(t, ts, map[string]any{})
	var started wire.ProcessResult
	b.want(http.StatusCreated, "POST", "/processes", map[string]any{"command": "sleep 300", "background": true}, &started)
	pid := "/processes/" + strconv.Itoa(started.PID)
	for _, r := range []request{
		{method: "GET", path: ""},
		{method: "DELETE", path: ""},
		{method: "POST", path: "/timeout", body: []byte(`{"timeout_seconds": 5}`)},
		{method: "POST", path: "/processes", body: []byte(`{"command": "touch /work/bob-was-here"}`)},
		{method: "GET", path: "/processes"},
		{method: "GET", path: pid + "/events"},
		{method: "POST", path: pid + "/stdin", body: []byte("x"), contentType: "application/octet-stream"},
		{method: "POST", path: pid + "/signal", body: []byte(`{"signal": "SIGKILL"}`)},
		{method: "POST", path: pid + "/resize", body: []byte(`{"cols": 10, "rows": 10}`)},
		{method: "GET", path: "/files?path=/etc/hostname"},
		{method: "PUT", path: "/files?path=bob.txt", body: []byte("x"), contentType: "application/octet-stream"},
		{method: "DELETE", path: "/files?path=/work"},
		{method: "GET", path: "/files/list"},
		{method: "GET", path: "/files/stat?path=/work"},
		{method: "POST", path: "/files/mkdir", body: []byte(`{"path": "bob"}`)},
		{method: "POST", path: "/files/move", body: []byte(`{"from": "/work", "to": "/tmp/w"}`)},
		{method: "GET", path: "/files/watch"},
		{method: "GET", path: "/ports/8000/x"},
		{method: "POST", path: "/ports/8000/x", body: []byte(`{}`)},
	} {
		r.path, r.key = b.path(r.path), bobKey
		resp, data := ts.call(t, r)
		wantError(t, resp, data, http.StatusNotFound, "no such sandbox")
	}
	// The terminal, over a WebSocket handshake.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(ts.url, "http")+b.path("/pty"),
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + bobKey}}})
	if err == nil {
		c.CloseNow()
		t.Fatal("bob opened alice's terminal")
	}
	body, _ := io.ReadAll(resp.Body)
	testDoc.check(t, "GET", b.path("/pty"), resp, body)
	wantError(t, resp, body, http.StatusNotFound, "no such sandbox")

	// Alice's sandbox is as it was.
	if !b.running(started.PID) {
		t.Errorf("alice's process %d is gone", started.PID)
	}
	resp2, data := b.do("GET", "/files/stat?path=/work/bob-was-here", nil)
	wantError(t, resp2, data, http.StatusNotFound)
	var got wire.Sandbox
	b.want(http.StatusOK, "GET", "", nil, &got)
	if !got.EndAt.Equal(b.EndAt) {
		t.Errorf("end_at moved: %v, was %v", got.EndAt, b.EndAt)
	}
}

// TestSandboxProcesses: a waited-for process's outputs and exit code;
// args; a timeout; refusals.
func TestSandboxProcesses(t *testing.T) {
	ts := sandboxServer(t, func(c *Config) { c.MaxResponseBytes = 256 << 10 })
	b := newSandbox(t, ts, map[string]any{"env": map[string]string{"WHO": "sandbox"}})

	res := b.run(map[string]any{"command": "echo out $WHO $MINE; echo err >&2; pwd; exit 7", "env": map[string]string{"MINE": "mine"}})
	if res.Stdout != "out sandbox mine\n/work\n" || res.Stderr != "err\n" || res.ExitCode == nil || *res.ExitCode != 7 ||
		res.Status != "exit status 7" || res.TimedOut || res.Error != "" || res.PID < 1 {
		t.Errorf("result %+v", res)
	}
	res = b.run(map[string]any{"args": []string{"python3", "-c", "import os; print(6*7, os.getcwd())"}, "cwd": "sub/.."})
	if res.Stdout != "42 /work\n" || res.ExitCode == nil || *res.ExitCode != 0 {
		t.Errorf("args: %+v", res)
	}
	res = b.run(map[string]any{"args": []string{"pwd"}, "cwd": "/tmp"})
	if res.Stdout != "/tmp\n" {
		t.Errorf("cwd: %+v", res)
	}

	// timeout_seconds kills it.
	start := time.Now()
	res = b.run(map[string]any{"command": "echo before; sleep 300", "timeout_seconds": 1})
	if !res.TimedOut || res.ExitCode == nil || *res.ExitCode != -1 || res.Stdout != "before\n" || res.Error == "" {
		t.Errorf("timed out: %+v", res)
	}
	if d := time.Since(start); d > 2*time.Minute {
		t.Errorf("a 1 s timeout took %v", d)
	}

	// Outputs are cut at max_response_bytes, and say so.
	limit := ts.cfg.MaxResponseBytes
	res = b.run(map[string]any{"command": fmt.Sprintf("head -c %d /dev/zero | tr '\\0' x; echo small >&2", limit+1000)})
	if !res.StdoutTruncated || int64(len(res.Stdout)) != limit || res.StderrTruncated || res.Stderr != "small\n" {
		t.Errorf("cut: stdout %d bytes (truncated %v), stderr %q (truncated %v)", len(res.Stdout), res.StdoutTruncated, res.Stderr, res.StderrTruncated)
	}

	// A program that cannot start; refusals.
	resp, data := b.do("POST", "/processes", map[string]any{"args": []string{"/no/such/program"}})
	wantError(t, resp, data, http.StatusBadRequest)
	for body, want := range map[string]string{
		`{}`:                                    "give the process",
		`{"command": "true", "args": ["true"]}`: "not both",
		`{"command": "true", "env": {"": "x"}}`: "env",
		`{"command": "true", "pty": {"cols": 0, "rows": 5}}`: "terminal",
		`{"command": "true", "timeout_seconds": -1}`:         "timeout_seconds",
		`{"command": "true", "shell": "zsh"}`:                "unknown field",
	} {
		resp, data := b.do("POST", "/processes", body)
		wantError(t, resp, data, http.StatusBadRequest, want)
	}
}

// TestSandboxProcessStreams: a process's events as they come (the first
// output before the rest is even written), exit last; a client that goes
// kills its process.
func TestSandboxProcessStreams(t *testing.T) {
	ts := sandboxServer(t)
	b := newSandbox(t, ts, map[string]any{})

	// "b" is written only once the test has read "a": the gate file.
	st := b.openStream("POST", "/processes", map[string]any{"command": "echo a; echo warn >&2; until [ -e gate ]; do sleep 0.05; done; echo b"})
	ev, _ := st.next()
	if ev.name != "start" {
		t.Fatalf("first event %s %s", ev.name, ev.data)
	}
	var events = []sseEvent{ev}
	for !strings.Contains(string(ev.data), `"a\n"`) {
		var ok bool
		if ev, ok = st.next(); !ok {
			t.Fatalf("no a: %v", eventNames(events))
		}
		events = append(events, ev)
	}
	if ev.name != "stdout" {
		t.Fatalf("a came as %s", ev.name)
	}
	if resp, data := b.raw("PUT", "/files?path=gate", nil); resp.StatusCode != http.StatusCreated {
		t.Fatalf("gate: %d %s", resp.StatusCode, data)
	}
	events = append(events, st.all()...)
	stdout, stderr, exit := outputOf(t, events)
	if stdout != "a\nb\n" || stderr != "warn\n" || exit.ExitCode == nil || *exit.ExitCode != 0 || exit.Stdout != "" {
		t.Errorf("stdout %q stderr %q exit %+v: %v", stdout, stderr, exit, eventNames(events))
	}

	// A terminal's output comes as pty events, base64.
	st = b.openStream("POST", "/processes", map[string]any{"command": "stty size; tty", "pty": map[string]int{"cols": 91, "rows": 17}})
	var term []byte
	events = st.all()
	for _, ev := range events {
		if ev.name == "pty" {
			var o ptyOutput
			json.Unmarshal(ev.data, &o)
			term = append(term, o.Data...)
		}
	}
	if !strings.Contains(string(term), "17 91") || !strings.Contains(string(term), "/dev/pts/") {
		t.Errorf("terminal output %q: %v", term, eventNames(events))
	}

	// A timeout in a stream.
	_, _, exit = outputOf(t, b.openStream("POST", "/processes", map[string]any{"command": "sleep 300", "timeout_seconds": 0.5}).all())
	if !exit.TimedOut || exit.ExitCode == nil || *exit.ExitCode != -1 {
		t.Errorf("timed out: %+v", exit)
	}

	// The caller goes: its process is killed.
	st = b.openStream("POST", "/processes", map[string]any{"command": "sleep 300", "tag": "mine"})
	ev, _ = st.next()
	var started processStart
	json.Unmarshal(ev.data, &started)
	if !b.running(started.PID) {
		t.Fatalf("process %d is not running: %v", started.PID, b.processes())
	}
	st.close()
	waitUntil(t, "the process of a caller gone ends", func() bool { return !b.running(started.PID) })
}

// TestSandboxBackground: a background process, listed, attached to, fed
// stdin, closed, signalled.
func TestSandboxBackground(t *testing.T) {
	ts := sandboxServer(t)
	b := newSandbox(t, ts, map[string]any{})

	var started wire.ProcessResult
	b.want(http.StatusCreated, "POST", "/processes", map[string]any{"command": "read line; echo got:$line; cat; exit 3",
		"stdin": true, "background": true, "tag": "reader"}, &started)
	if started.PID < 1 || started.ExitCode != nil {
		t.Fatalf("started %+v", started)
	}
	var info *wire.ProcessInfo
	for _, p := range b.processes() {
		if p.PID == started.PID {
			info = &p
		}
	}
	if info == nil || info.Tag != "reader" || info.Cwd != "/work" || info.PTY ||
		!slices.Equal(info.Args, []string{"bash", "-l", "-c", "read line; echo got:$line; cat; exit 3"}) {
		t.Fatalf("listed %+v", info)
	}
	pid := "/processes/" + strconv.Itoa(started.PID)
	st := b.openStream("GET", pid+"/events", nil)
	if ev, _ := st.next(); ev.name != "start" || string(ev.data) != fmt.Sprintf("{\"pid\":%d}", started.PID) {
		t.Fatalf("first event %s %s", ev.name, ev.data)
	}
	// Attached: what it writes now comes.
	if resp, data := b.raw("POST", pid+"/stdin", []byte("hello\n")); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("stdin: %d %s", resp.StatusCode, data)
	}
	if ev, _ := st.next(); ev.name != "stdout" || string(ev.data) != `{"data":"got:hello\n"}` {
		t.Fatalf("after stdin: %s %s", ev.name, ev.data)
	}
	if resp, data := b.raw("POST", pid+"/stdin?close=true", []byte("the end")); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("stdin and close: %d %s", resp.StatusCode, data)
	}
	events := st.all()
	var out strings.Builder
	var exit wire.ProcessResult
	for _, ev := range events {
		var o processOutput
		switch ev.name {
		case "stdout":
			json.Unmarshal(ev.data, &o)
			out.WriteString(o.Data)
		case "exit":
			json.Unmarshal(ev.data, &exit)
		}
	}
	if out.String() != "the end" || events[len(events)-1].name != "exit" || exit.ExitCode == nil || *exit.ExitCode != 3 {
		t.Errorf("after close: %q %+v: %v", out.String(), exit, eventNames(events))
	}
	waitUntil(t, "the ended process leaves the list", func() bool { return !b.running(started.PID) })
	for _, r := range [][2]string{{"GET", pid + "/events"}, {"POST", pid + "/stdin"}} {
		resp, data := b.raw(r[0], r[1], []byte("x"))
		wantError(t, resp, data, http.StatusNotFound)
	}
	resp, data := b.do("POST", pid+"/signal", map[string]any{"signal": "SIGTERM"})
	wantError(t, resp, data, http.StatusNotFound)
	resp, data = b.do("GET", "/processes/x/events", nil)
	wantError(t, resp, data, http.StatusNotFound)

	// Signals, by name and by number.
	for _, sig := range []any{"SIGTERM", "int", 9} {
		b.want(http.StatusCreated, "POST", "/processes", map[string]any{"args": []string{"sleep", "300"}, "background": true}, &started)
		pid := "/processes/" + strconv.Itoa(started.PID)
		st := b.openStream("GET", pid+"/events", nil)
		st.next() // start
		resp, data := b.do("POST", pid+"/signal", map[string]any{"signal": sig})
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("signal %v: %d %s", sig, resp.StatusCode, data)
		}
		_, _, exit := outputOf(t, append([]sseEvent{{name: "start"}}, st.all()...))
		want := map[any]string{"SIGTERM": "signal: terminated", "int": "signal: interrupt", 9: "signal: killed"}[sig]
		if exit.ExitCode == nil || *exit.ExitCode != -1 || exit.Status != want {
			t.Errorf("signal %v: %+v", sig, exit)
		}
	}
	for _, body := range []string{`{"signal": "SIGNOPE"}`, `{"signal": 0}`, `{"signal": 65}`, `{}`, `{"signal": true}`} {
		resp, data := b.do("POST", "/processes/1/signal", body)
		wantError(t, resp, data, http.StatusBadRequest, "signal")
	}

	// A background process's timeout.
	b.want(http.StatusCreated, "POST", "/processes", map[string]any{"command": "sleep 300", "background": true, "timeout_seconds": 0.5}, &started)
	waitUntil(t, "a background process's timeout", func() bool { return !b.running(started.PID) })

	// Resizing needs a terminal.
	b.want(http.StatusCreated, "POST", "/processes", map[string]any{"command": "sleep 300", "background": true, "pty": map[string]int{"cols": 80, "rows": 24}}, &started)
	pid = "/processes/" + strconv.Itoa(started.PID)
	if resp, data := b.do("POST", pid+"/resize", map[string]int{"cols": 132, "rows": 50}); resp.StatusCode != http.StatusNoContent {
		t.Errorf("resize: %d %s", resp.StatusCode, data)
	}
	resp, data = b.do("POST", pid+"/resize", map[string]int{"cols": 0, "rows": 50})
	wantError(t, resp, data, http.StatusBadRequest)
	b.want(http.StatusCreated, "POST", "/processes", map[string]any{"command": "sleep 300", "background": true}, &started)
	resp, data = b.do("POST", "/processes/"+strconv.Itoa(started.PID)+"/resize", map[string]int{"cols": 10, "rows": 10})
	wantError(t, resp, data, http.StatusBadRequest, "no terminal")
	resp, data = b.raw("POST", "/processes/"+strconv.Itoa(started.PID)+"/stdin", []byte("x"))
	wantError(t, resp, data, http.StatusBadRequest, "without stdin")
}

// TestSandboxFiles: files written and read byte for byte, listed,
// stat'ed, directories made, moved, removed; what is missing is 404.
func TestSandboxFiles(t *testing.T) {
	ts := sandboxServer(t)
	b := newSandbox(t, ts, map[string]any{})

	blob := make([]byte, 1<<20)
	rand.Read(blob)
	resp, data := b.raw("PUT", "/files?path=data/blob.bin", blob)
	var e wire.FileEntry
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(data, &e) != nil {
		t.Fatalf("put: %d %s", resp.StatusCode, data)
	}
	if e.Name != "blob.bin" || e.Path != "/work/data/blob.bin" || e.Type != "file" || e.Size != 1<<20 || e.Mode != "-rw-r--r--" ||
		time.Since(e.ModTime) > time.Hour {
		t.Errorf("put: %+v", e)
	}
	resp, data = b.do("GET", "/files?path=/work/data/blob.bin", nil)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(data, blob) || resp.Header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("get: %d, %d bytes, equal %v", resp.StatusCode, len(data), bytes.Equal(data, blob))
	}
	// A file of several of the agent's chunks, sent without a length.
	big := make([]byte, 2*agent.MaxChunk+12345)
	rand.Read(big)
	resp, data = ts.call(t, request{method: "PUT", path: b.path("/files?path=big.bin"), key: aliceKey, body: big, contentType: "application/octet-stream", chunked: true})
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(data, &e) != nil || e.Size != int64(len(big)) {
		t.Fatalf("put big: %d %s", resp.StatusCode, data)
	}
	if resp, data = b.do("GET", "/files?path=big.bin", nil); resp.StatusCode != http.StatusOK || !bytes.Equal(data, big) {
		t.Fatalf("get big: %d, %d bytes, equal %v", resp.StatusCode, len(data), bytes.Equal(data, big))
	}
	// A command sees it.
	if res := b.run(map[string]any{"command": "sha256sum data/blob.bin | cut -c1-64"}); len(res.Stdout) != 65 {
		t.Errorf("sha256sum: %+v", res)
	}

	b.raw("PUT", "/files?path=data/small.txt", []byte("small"))
	var list struct{ Entries []wire.FileEntry }
	b.want(http.StatusOK, "GET", "/files/list?path=data", nil, &list)
	names := func() []string {
		var out []string
		for _, e := range list.Entries {
			out = append(out, e.Path)
		}
		slices.Sort(out)
		return out
	}
	if got := names(); !slices.Equal(got, []string{"/work/data/blob.bin", "/work/data/small.txt"}) {
		t.Errorf("list: %v", got)
	}
	b.want(http.StatusOK, "GET", "/files/list?depth=2", nil, &list)
	if got := names(); !slices.Contains(got, "/work/data") || !slices.Contains(got, "/work/data/small.txt") {
		t.Errorf("list depth 2: %v", got)
	}
	b.want(http.StatusOK, "GET", "/files/stat?path=data", nil, &e)
	if e.Type != "dir" || e.Mode != "drwxr-xr-x" || e.Path != "/work/data" {
		t.Errorf("stat: %+v", e)
	}
	b.run(map[string]any{"command": "ln -s data/small.txt link"})
	b.want(http.StatusOK, "GET", "/files/stat?path=link", nil, &e)
	if e.Type != "symlink" || e.Target != "data/small.txt" || !strings.HasPrefix(e.Mode, "l") {
		t.Errorf("stat of a symlink: %+v", e)
	}

	b.want(http.StatusCreated, "POST", "/files/mkdir", map[string]string{"path": "a/b/c"}, &e)
	if e.Type != "dir" || e.Path != "/work/a/b/c" {
		t.Errorf("mkdir: %+v", e)
	}
	resp, data = b.do("POST", "/files/mkdir", map[string]string{"path": "/work/a/b/c"})
	wantError(t, resp, data, http.StatusConflict)

	b.want(http.StatusOK, "POST", "/files/move", map[string]string{"from": "data/small.txt", "to": "a/b/c/moved.txt"}, &e)
	if e.Path != "/work/a/b/c/moved.txt" || e.Size != 5 {
		t.Errorf("move: %+v", e)
	}
	resp, data = b.do("GET", "/files?path=a/b/c/moved.txt", nil)
	if resp.StatusCode != http.StatusOK || string(data) != "small" {
		t.Errorf("moved: %d %q", resp.StatusCode, data)
	}
	resp, data = b.do("GET", "/files?path=data/small.txt", nil)
	wantError(t, resp, data, http.StatusNotFound)

	if resp, data := b.do("DELETE", "/files?path=a", nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: %d %s", resp.StatusCode, data)
	}
	for _, p := range []string{"/files/stat?path=a", "/files/stat?path=a/b/c/moved.txt", "/files?path=nope", "/files/list?path=nope"} {
		resp, data := b.do("GET", p, nil)
		wantError(t, resp, data, http.StatusNotFound)
	}
	resp, data = b.do("DELETE", "/files?path=a", nil)
	wantError(t, resp, data, http.StatusNotFound)
	resp, data = b.do("POST", "/files/move", map[string]string{"from": "nope", "to": "x"})
	wantError(t, resp, data, http.StatusNotFound)
	for _, p := range []string{"/files", "/files/stat", "/files?path=data", "/files/list?path=data&depth=0", "/files/list?path=data/blob.bin"} {
		resp, data := b.do("GET", p, nil)
		wantError(t, resp, data, http.StatusBadRequest)
	}
	resp, data = b.do("POST", "/files/mkdir", map[string]string{})
	wantError(t, resp, data, http.StatusBadRequest)

	// A body declared over 64 MiB is refused before it comes.
	conn, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "PUT %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n",
		b.path("/files?path=huge"), ts.addr, aliceKey, 64<<20+1)
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	resp, err = http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	data, _ = io.ReadAll(resp.Body)
	testDoc.check(t, "PUT", b.path("/files"), resp, data)
	wantError(t, resp, data, http.StatusRequestEntityTooLarge, "64 MiB")
	resp, data = b.do("GET", "/files?path=/etc/shadow", nil)
	if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusNotFound {
		t.Errorf("/etc/shadow: %d %s", resp.StatusCode, data)
	}
}

// TestSandboxWatch: a watch sees a file a command creates.
func TestSandboxWatch(t *testing.T) {
	ts := sandboxServer(t)
	b := newSandbox(t, ts, map[string]any{})
	b.want(http.StatusCreated, "POST", "/files/mkdir", map[string]string{"path": "watched/sub"}, nil)
	st := b.openStream("GET", "/files/watch?path=watched&recursive=true", nil) // in place once it answers
	b.run(map[string]any{"command": "echo hi > watched/sub/new.txt"})
	for {
		ev, ok := st.next()
		if !ok {
			t.Fatal("the watch ended")
		}
		var fe fsEvent
		json.Unmarshal(ev.data, &fe)
		if ev.name == "fs" && fe.Name == "sub/new.txt" && fe.Path == "/work/watched/sub/new.txt" && fe.Op == "create" {
			break
		}
	}
	resp, data := b.do("GET", "/files/watch?path=nope", nil)
	wantError(t, resp, data, http.StatusNotFound)
	resp, data = b.do("GET", "/files/watch?recursive=maybe", nil)
	wantError(t, resp, data, http.StatusBadRequest)
}

// TestSandboxStreamsEndAtShutdown: the event streams of a process and of
// a watch end when the server begins to shut down, with an error event
// (503): the shutdown does not wait for them, and the process runs on
// until the sandboxes end.
func TestSandboxStreamsEndAtShutdown(t *testing.T) {
	cfg := keyConfig(APIKey{ID: "alice", Key: aliceKey, Scopes: []string{ScopeExecute}})
	cfg.Live.EndOnShutdown = true
	cfg.ShutdownGraceSeconds = 30
	ts := serveServer(t, cfg)
	b := newSandbox(t, ts, map[string]any{})
	var started wire.ProcessResult
	b.want(http.StatusCreated, "POST", "/processes", map[string]any{"command": "sleep 600", "background": true}, &started)
	follow := b.openStream("GET", "/processes/"+strconv.Itoa(started.PID)+"/events", nil)
	if ev, _ := follow.next(); ev.name != "start" {
		t.Fatalf("first event %s %s", ev.name, ev.data)
	}
	// A character cut in two is held back, then sent before the end.
	fg := b.openStream("POST", "/processes", map[string]any{"command": "printf 'caf\\xc3'; sleep 600"})
	if ev, _ := fg.next(); ev.name != "start" {
		t.Fatalf("first event %s %s", ev.name, ev.data)
	}
	if ev, _ := fg.next(); ev.name != "stdout" || string(ev.data) != `{"data":"caf"}` {
		t.Fatalf("output %s %s", ev.name, ev.data)
	}
	watch := b.openStream("GET", "/files/watch", nil)

	begun := time.Now()
	ts.cancel()
	for _, st := range []*sbxStream{follow, fg, watch} {
		events := st.all()
		last := events[len(events)-1]
		var e wire.StreamError
		if json.Unmarshal(last.data, &e); last.name != "error" || e.Status != http.StatusServiceUnavailable || !strings.Contains(e.Error, "shutting down") {
			t.Errorf("%s ended with %v", st.path, eventNames(events))
		}
		if st == fg && (len(events) != 2 || events[0].name != "stdout") {
			t.Errorf("the foreground process's last events: %v", eventNames(events))
		}
	}
	select {
	case err := <-ts.done:
		ts.done <- err // for the cleanup
	case <-time.After(20 * time.Second):
		t.Fatal("the shutdown waits for the streams")
	}
	if d := time.Since(begun); d > 20*time.Second {
		t.Errorf("the shutdown took %v", d)
	}
}

// TestSandboxPTY: a shell on a terminal over a WebSocket: input, output,
// resize, exit; a client that closes ends its shell.
func TestSandboxPTY(t *testing.T) {
	ts := sandboxServer(t)
	b := newSandbox(t, ts, map[string]any{})
	dial := func(h http.Header, subprotocols ...string) *websocket.Conn {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(ts.url, "http")+b.path("/pty?cols=100&rows=30"),
			&websocket.DialOptions{HTTPHeader: h, Subprotocols: subprotocols})
		if resp != nil {
			var body []byte
			if resp.Body != nil {
				body, _ = io.ReadAll(resp.Body)
			}
			testDoc.check(t, "GET", b.path("/pty"), resp, body)
		}
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		if c.Subprotocol() != WSSubprotocol && len(subprotocols) > 0 {
			t.Errorf("subprotocol %q", c.Subprotocol())
		}
		t.Cleanup(func() { c.CloseNow() })
		return c
	}
	// A browser's way to give the key.
	c := dial(nil, WSSubprotocol, WSBearerPrefix+aliceKey)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var screen bytes.Buffer
	send := func(typ websocket.MessageType, s string) {
		t.Helper()
		if err := c.Write(ctx, typ, []byte(s)); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	readUntil := func(want string) {
		t.Helper()
		for !strings.Contains(screen.String(), want) {
			typ, data, err := c.Read(ctx)
			if err != nil {
				t.Fatalf("waiting for %q: %v; the screen: %q", want, err, screen.String())
			}
			if typ != websocket.MessageBinary {
				t.Fatalf("a %v message: %q", typ, data)
			}
			screen.Write(data)
		}
	}
	send(websocket.MessageBinary, "echo marker-$((6*7))\n")
	readUntil("marker-42")
	send(websocket.MessageBinary, "stty size; echo $TERM\n")
	readUntil("30 100")
	readUntil("xterm-256color")
	send(websocket.MessageText, `{"resize": {"cols": 120, "rows": 40}}`)
	send(websocket.MessageBinary, "stty size\n")
	readUntil("40 120")
	send(websocket.MessageBinary, "exit\n")
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			var ce websocket.CloseError
			if !errors.As(err, &ce) || ce.Code != websocket.StatusNormalClosure || ce.Reason != "exit 0" {
				t.Fatalf("the end: %v", err)
			}
			break
		}
		screen.Write(data)
	}

	// A client that closes: its shell ends.
	before := len(b.processes())
	c = dial(http.Header{"Authorization": {"Bearer " + aliceKey}})
	waitUntil(t, "the second shell is listed", func() bool {
		return slices.ContainsFunc(b.processes(), func(p wire.ProcessInfo) bool { return p.PTY })
	})
	c.Close(websocket.StatusNormalClosure, "")
	waitUntil(t, "the shell of a client gone ends", func() bool { return len(b.processes()) == before })

	// A browser page of another site may not, key or not.
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel2()
	c2, resp, err := websocket.Dial(ctx2, "ws"+strings.TrimPrefix(ts.url, "http")+b.path("/pty"), &websocket.DialOptions{
		HTTPHeader: http.Header{"Origin": {"https://evil.example"}}, Subprotocols: []string{WSSubprotocol, WSBearerPrefix + aliceKey}})
	if err == nil {
		c2.CloseNow()
		t.Fatal("a cross-origin handshake was accepted")
	}
	if resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-origin handshake: %v %v", resp, err)
	}

	// Refusals before the handshake.
	for _, r := range []request{
		{method: "GET", path: b.path("/pty")},
		{method: "GET", path: b.path("/pty"), key: aliceKey},
		{method: "GET", path: b.path("/pty?cols=70000&rows=5"), key: aliceKey, header: http.Header{"Upgrade": {"websocket"}, "Connection": {"Upgrade"}}},
	} {
		resp, data := ts.call(t, r)
		want := map[string]int{"": http.StatusUnauthorized, aliceKey: http.StatusUpgradeRequired}[r.key]
		if r.header != nil {
			want = http.StatusBadRequest
		}
		wantError(t, resp, data, want)
	}
}

// TestSandboxPorts: a port of the sandbox through the server; the host's
// own loopback is out of reach.
func TestSandboxPorts(t *testing.T) {
	ts := sandboxServer(t)
	b := newSandbox(t, ts, map[string]any{})
	b.raw("PUT", "/files?path=site/hello.txt", []byte("hello from the sandbox"))
	// A server that answers with what it was asked.
	b.raw("PUT", "/files?path=echo.py", []byte(`import http.server, json
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"path": self.path, "headers": dict(self.headers)}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_POST = do_GET
http.server.HTTPServer(("127.0.0.1", 8001), H).serve_forever()
`))
	b.want(http.StatusCreated, "POST", "/processes", map[string]any{"command": "python3 -m http.server 8000 --bind 127.0.0.1", "cwd": "site", "background": true}, nil)
	b.want(http.StatusCreated, "POST", "/processes", map[string]any{"args": []string{"python3", "echo.py"}, "background": true}, nil)

	get := func(suffix string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", ts.url+b.path(suffix), nil)
		req.Header.Set("Authorization", "Bearer "+aliceKey)
		resp, err := ts.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, data
	}
	var listing []byte
	waitUntil(t, "the sandbox's server answers", func() bool {
		var status int
		status, listing = get("/ports/8000/")
		if status != http.StatusOK && status != http.StatusBadGateway {
			t.Fatalf("port 8000: %d %s", status, listing)
		}
		return status == http.StatusOK
	})
	if !bytes.Contains(listing, []byte(`href="hello.txt"`)) {
		t.Errorf("listing: %s", listing)
	}
	if status, data := get("/ports/8000/hello.txt"); status != http.StatusOK || string(data) != "hello from the sandbox" {
		t.Errorf("hello.txt: %d %q", status, data)
	}

	var echo struct {
		Path    string
		Headers map[string]string
	}
	waitUntil(t, "the echo server answers", func() bool {
		status, data := get("/ports/8001/some/where%2Fslash?q=1&r=two")
		if status == http.StatusOK {
			if err := json.Unmarshal(data, &echo); err != nil {
				t.Fatalf("echo: %s", data)
			}
		}
		return status == http.StatusOK
	})
	if echo.Path != "/some/where%2Fslash?q=1&r=two" || echo.Headers["Authorization"] != "" ||
		echo.Headers["X-Forwarded-Prefix"] != b.path("/ports/8001") || echo.Headers["X-Forwarded-Host"] == "" {
		t.Errorf("the request the port got: %+v", echo)
	}

	// The host's loopback is not the sandbox's: 502.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	hostServer := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "the host") })}
	go hostServer.Serve(ln)
	defer hostServer.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	if resp, err := http.Get("http://" + ln.Addr().String() + "/"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the host's server: %v", err)
	} else {
		resp.Body.Close()
	}
	resp, data := b.do("GET", "/ports/"+strconv.Itoa(port)+"/x", nil)
	wantError(t, resp, data, http.StatusBadGateway, "port "+strconv.Itoa(port))
	for _, p := range []string{"0", "65536", "http"} {
		resp, data := b.do("GET", "/ports/"+p+"/x", nil)
		wantError(t, resp, data, http.StatusBadRequest, "port")
	}
	resp, data = ts.call(t, request{method: "GET", path: b.path("/ports/8000/x")})
	wantError(t, resp, data, http.StatusUnauthorized)
}

// TestSandboxDecodeHelpers: pure functions of the sandboxes' API.
func TestSandboxDecodeHelpers(t *testing.T) {
	for raw, want := range map[string]int{`"SIGTERM"`: 15, `"kill"`: 9, `"SigInt"`: 2, `"HUP"`: 1, `9`: 9, `64`: 64} {
		if got, err := signalNumber(json.RawMessage(raw)); err != nil || got != want {
			t.Errorf("signal %s: %d %v, want %d", raw, got, err, want)
		}
	}
	for _, raw := range []string{`"SIGFOO"`, `0`, `65`, `1.5`, `null`, ``} {
		if _, err := signalNumber(json.RawMessage(raw)); err == nil {
			t.Errorf("signal %s accepted", raw)
		}
	}
	for in, want := range map[string]string{"": "", "a": "/work/a", "a/../../etc": "/etc", "/tmp/x/": "/tmp/x", ".": "/work"} {
		if got := sandboxPath(in); got != want {
			t.Errorf("sandboxPath(%q) = %q, want %q", in, got, want)
		}
	}
	if got := outputText([]byte("abc\xc3"), true); got != "abc" { // é cut in two
		t.Errorf("cut output %q", got)
	}
	if got := outputText([]byte("abc\xc3"), false); got != "abc\xc3" {
		t.Errorf("whole output %q", got)
	}
	if r := closeReason(strings.Repeat("é", 100)); len(r) > 123 || !utf8Valid(r) {
		t.Errorf("close reason of %d bytes", len(r))
	}
	if e := fileEntry(&agent.Entry{Type: "dir", Mode: 0o755}); e.Mode != "drwxr-xr-x" {
		t.Errorf("mode %q", e.Mode)
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\ufffd") == s }

// TestSandboxCrossSite: on a server without keys, a web page of another
// site changes nothing of a sandbox (nor makes one); its terminal refuses
// it too.
func TestSandboxCrossSite(t *testing.T) {
	ts := startServer(t, testConfig())
	resp, data := ts.call(t, request{method: "POST", path: sandboxesPath, body: []byte(`{}`)})
	var sb wire.Sandbox
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(data, &sb) != nil {
		t.Fatalf("create: %d %s", resp.StatusCode, data)
	}
	p := sandboxesPath + "/" + sb.ID
	defer ts.send(t, request{method: "DELETE", path: p})
	evil := http.Header{"Origin": {"http://evil.example"}}
	for _, r := range []request{
		{method: "POST", path: sandboxesPath, body: []byte(`{}`)},
		{method: "POST", path: p + "/processes", body: []byte(`{"command": "touch /work/evil"}`)},
		{method: "PUT", path: p + "/files?path=evil", body: []byte("x"), contentType: "application/octet-stream"},
		{method: "POST", path: p + "/files/mkdir", body: []byte(`{"path": "evil"}`)},
		{method: "DELETE", path: p},
		{method: "POST", path: p + "/ports/8000/x", body: []byte(`{}`)},
	} {
		r.header = evil
		resp, data := ts.call(t, r)
		wantError(t, resp, data, http.StatusForbidden, "evil.example")
	}
	resp, data = ts.call(t, request{method: "GET", path: p + "/files/list"})
	if resp.StatusCode != http.StatusOK || strings.Contains(string(data), "evil") {
		t.Errorf("after the refusals: %d %s", resp.StatusCode, data)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(ts.url, "http")+p+"/pty", &websocket.DialOptions{HTTPHeader: evil})
	if err == nil {
		c.CloseNow()
		t.Fatal("a page of another site opened the terminal")
	}
	if resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site terminal: %v %v", resp, err)
	}
}

// TestSandboxNetwork: a sandbox created with network.allow says so and
// reaches what it lists; an allow-list beyond the server's is 400; its
// list changes while it runs (closed, then open again); a sandbox with a
// secret sees its placeholder, the listener its value, and the network's
// report the request; secrets without a network are 400.
func TestSandboxNetwork(t *testing.T) {
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skipf("no TUN devices: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "reached") })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	allowed := fmt.Sprintf("host.sandbox.internal:%d", port)
	ts := sandboxServer(t, func(c *Config) { c.Network.Allow = []string{allowed} })
	b := newSandbox(t, ts, wire.SandboxRequest{Network: &wire.NetworkRequest{Allow: []string{allowed}}})
	if len(b.Network) != 1 || b.Network[0] != allowed {
		t.Errorf("network: %q", b.Network)
	}
	res := b.run(wire.ProcessRequest{Command: fmt.Sprintf("curl -s -m 10 http://host.sandbox.internal:%d/", port)})
	if res.Stdout != "reached" {
		t.Errorf("the sandbox's fetch: %+v", res)
	}
	resp, data := ts.call(t, request{method: "POST", path: sandboxesPath, key: aliceKey,
		body: mustJSON(t, wire.SandboxRequest{Network: &wire.NetworkRequest{Allow: []string{"example.com"}}})})
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("an allow-list beyond the server's: %d %s", resp.StatusCode, data)
	}

	// Its network changed while it runs: nothing, then what it had.
	if resp, data := b.do("PUT", "/network", wire.NetworkRequest{Allow: []string{}}); resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT network: %d %s", resp.StatusCode, data)
	}
	if res := b.run(wire.ProcessRequest{Command: fmt.Sprintf("curl -s -m 10 http://host.sandbox.internal:%d/ || echo failed", port)}); res.Stdout != "failed\n" {
		t.Errorf("after its network was closed: %+v", res)
	}
	if resp, data := b.do("PUT", "/network", wire.NetworkRequest{Allow: []string{"example.com"}}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("PUT network beyond the server's: %d %s", resp.StatusCode, data)
	}
	if resp, data := b.do("PUT", "/network", wire.NetworkRequest{Allow: []string{allowed}}); resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT network back: %d %s", resp.StatusCode, data)
	}

	// A secret in it: a placeholder in its processes, the value to the
	// listener, the request in its network's report.
	if resp, data := ts.call(t, request{method: "PUT", path: "/api/sandbox/secrets/TOKEN", key: aliceKey,
		body: mustJSON(t, wire.SecretPut{Value: "live-value-1234", Hosts: []string{"host.sandbox.internal"}})}); resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT secret: %d %s", resp.StatusCode, data)
	}
	sec := newSandbox(t, ts, wire.SandboxRequest{Network: &wire.NetworkRequest{Allow: []string{allowed}}, Secrets: []string{"TOKEN"}})
	if len(sec.Secrets) != 1 || sec.Secrets[0] != "TOKEN" {
		t.Errorf("secrets: %q", sec.Secrets)
	}
	if res := sec.run(wire.ProcessRequest{Command: fmt.Sprintf(`echo "$TOKEN" | cut -c1-25; curl -s -m 10 "http://host.sandbox.internal:%d/x?k=$TOKEN"`, port)}); res.Stdout != "SANDBOX_RUN_SECRET_TOKEN_\nreached" {
		t.Errorf("with a secret: %+v", res)
	}
	resp, data = sec.do("GET", "/network", nil)
	var rep wire.NetworkReport
	if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &rep) != nil || len(rep.Requests) != 1 || strings.Join(rep.Requests[0].Secrets, ",") != "TOKEN" ||
		strings.Contains(string(data), "live-value-1234") {
		t.Errorf("its network's report: %d %s", resp.StatusCode, data)
	}
	if resp, data := newSandbox(t, ts, wire.SandboxRequest{}).do("GET", "/network", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("the report of a sandbox without a network: %d %s", resp.StatusCode, data)
	}
	resp, data = ts.call(t, request{method: "POST", path: sandboxesPath, key: aliceKey, body: mustJSON(t, wire.SandboxRequest{Secrets: []string{"TOKEN"}})})
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("secrets without a network: %d %s", resp.StatusCode, data)
	}
}

// TestSandboxNetworkBudgets: a sandbox's byte budget by allow entry
// cuts what its connections move past it (its report says why), shows in
// the sandbox, and changes while it runs keeping what the entry moved; a
// budget for no entry of its list, or of no bytes, is 400.
func TestSandboxNetworkBudgets(t *testing.T) {
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skipf("no TUN devices: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const mib = 1 << 20
	big := strings.Repeat("x", mib)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, big) })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	allowed := fmt.Sprintf("host.sandbox.internal:%d", ln.Addr().(*net.TCPAddr).Port)
	ts := sandboxServer(t, func(c *Config) { c.Network.Allow = []string{allowed} })
	b := newSandbox(t, ts, wire.SandboxRequest{Network: &wire.NetworkRequest{Allow: []string{allowed}, Budgets: map[string]int64{allowed: mib + mib/2}}})
	if b.NetworkBudgets[allowed] != mib+mib/2 {
		t.Errorf("network_budgets: %v", b.NetworkBudgets)
	}
	fetch := wire.ProcessRequest{Command: "curl -s -m 20 -o /dev/null -w '%{size_download}' http://" + allowed + "/ || echo ' cut'"}
	if res := b.run(fetch); res.Stdout != fmt.Sprint(mib) {
		t.Fatalf("1 MiB within a budget of 1.5 MiB: %+v", res)
	}
	if res := b.run(fetch); !strings.HasSuffix(res.Stdout, " cut\n") {
		t.Fatalf("1 MiB more with 0.5 MiB left: %+v", res)
	}
	var rep wire.NetworkReport
	b.want(http.StatusOK, "GET", "/network", nil, &rep)
	why := ""
	for _, d := range rep.Destinations {
		why += d.Reason
	}
	if !strings.Contains(why, "byte budget of "+allowed) || rep.BytesIn > mib+mib/2 {
		t.Errorf("its report: %d bytes in, reasons %q", rep.BytesIn, why)
	}
	var got wire.Sandbox
	b.want(http.StatusOK, "PUT", "/network", wire.NetworkRequest{Allow: []string{allowed}, Budgets: map[string]int64{allowed: 4 * mib}}, &got)
	if got.NetworkBudgets[allowed] != 4*mib {
		t.Errorf("after PUT: network_budgets %v", got.NetworkBudgets)
	}
	if res := b.run(fetch); res.Stdout != fmt.Sprint(mib) {
		t.Errorf("with the budget raised to 4 MiB: %+v", res)
	}
	for _, bad := range []map[string]int64{{"example.com": 10}, {allowed: 0}} {
		if resp, data := b.do("PUT", "/network", wire.NetworkRequest{Allow: []string{allowed}, Budgets: bad}); resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(data), "budgets") {
			t.Errorf("PUT budgets %v: %d %s", bad, resp.StatusCode, data)
		}
		resp, data := ts.call(t, request{method: "POST", path: sandboxesPath, key: aliceKey,
			body: mustJSON(t, wire.SandboxRequest{Network: &wire.NetworkRequest{Allow: []string{allowed}, Budgets: bad}})})
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(data), "budgets") {
			t.Errorf("create with budgets %v: %d %s", bad, resp.StatusCode, data)
		}
	}
}

// TestSandboxSecretRotation: a secret changed while a live sandbox uses
// it reaches the sandbox's next request at once, and one deleted stops
// being put in place (its placeholder goes as it is).
func TestSandboxSecretRotation(t *testing.T) {
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skipf("no TUN devices: %v", err)
	}
	got := make(chan string, 8)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Authorization")
		io.WriteString(w, "ok")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	allowed := fmt.Sprintf("host.sandbox.internal:%d", ln.Addr().(*net.TCPAddr).Port)
	ts := sandboxServer(t, func(c *Config) { c.Network.Allow = []string{allowed} })
	put := func(value string) {
		t.Helper()
		if resp, data := ts.call(t, request{method: "PUT", path: "/api/sandbox/secrets/TOKEN", key: aliceKey,
			body: mustJSON(t, wire.SecretPut{Value: value, Hosts: []string{"host.sandbox.internal"}})}); resp.StatusCode != http.StatusOK {
			t.Fatalf("PUT secret: %d %s", resp.StatusCode, data)
		}
	}
	put("first-value-1234")
	b := newSandbox(t, ts, wire.SandboxRequest{Network: &wire.NetworkRequest{Allow: []string{allowed}}, Secrets: []string{"TOKEN"}})
	fetch := func() string {
		t.Helper()
		if res := b.run(wire.ProcessRequest{Command: `curl -s -m 10 -H "Authorization: $TOKEN" http://` + allowed + `/`}); res.Stdout != "ok" {
			t.Fatalf("the sandbox's fetch: %+v", res)
		}
		return <-got
	}
	if v := fetch(); v != "first-value-1234" {
		t.Errorf("before the change: %q", v)
	}
	put("second-value-5678")
	if v := fetch(); v != "second-value-5678" {
		t.Errorf("after the change: %q", v)
	}
	if resp, data := ts.call(t, request{method: "DELETE", path: "/api/sandbox/secrets/TOKEN", key: aliceKey}); resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE secret: %d %s", resp.StatusCode, data)
	}
	if v := fetch(); !strings.HasPrefix(v, "SANDBOX_RUN_SECRET_TOKEN_") {
		t.Errorf("after the deletion: %q, want the placeholder", v)
	}
}

// TestSandboxImage: a sandbox whose root is an allowed OCI image (one with
// no C library) runs the image's programs and says its image; an image
// outside images.allow is 400.
func TestSandboxImage(t *testing.T) {
	img := imagetest.BusyboxImage(t, []string{"PATH=/bin"}, imagetest.File{Name: "etc/marker", Data: []byte("in-the-image\n")})
	dir := t.TempDir()
	ref := imagetest.WriteLayout(t, filepath.Join(dir, "layout"), img, "1")
	ts := sandboxServer(t, func(c *Config) { c.Images.Allow = []string{"oci:" + dir + "/**"} })
	b := newSandbox(t, ts, wire.SandboxRequest{Image: ref})
	if b.Image != ref || b.Template != ref {
		t.Errorf("image %q template %q, want %q", b.Image, b.Template, ref)
	}
	if res := b.run(wire.ProcessRequest{Command: "cat /etc/marker; test -e /usr/bin/python3 || echo no-host"}); res.Stdout != "in-the-image\nno-host\n" {
		t.Errorf("in the image: %+v", res)
	}
	resp, data := ts.call(t, request{method: "POST", path: sandboxesPath, key: aliceKey,
		body: mustJSON(t, wire.SandboxRequest{Image: "oci:/elsewhere/layout:1"})})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(data), "images.allow") {
		t.Errorf("an image outside images.allow: %d %s", resp.StatusCode, data)
	}
}

// TestSandboxSnapshots: a snapshot keeps the sandbox's files (201, its
// Location), a sandbox created from it has them, the key's list has it
// and another key's has none; a fork makes children with the files (201,
// memory false), each its own; a delete is 204, then 404.
func TestSandboxSnapshots(t *testing.T) {
	ts := sandboxServer(t)
	b := newSandbox(t, ts, map[string]any{"timeout_seconds": 300, "env": map[string]string{"K": "v"}})
	b.run(map[string]any{"command": "echo one > f; echo tmp > /tmp/t"})
	var sn wire.Snapshot
	b.want(http.StatusCreated, "POST", "/snapshots", map[string]any{"name": "first"}, &sn)
	if sn.ID == "" || !slices.Contains(sn.Names, "first") || sn.SandboxID != b.ID || sn.SizeBytes == 0 {
		t.Fatalf("snapshot %+v", sn)
	}
	b.run(map[string]any{"command": "echo two > f"})
	c := newSandbox(t, ts, map[string]any{"snapshot": sn.ID})
	if res := c.run(map[string]any{"command": "cat f /tmp/t; echo $K"}); res.Stdout != "one\ntmp\nv\n" {
		t.Errorf("a sandbox from the snapshot: %+v", res)
	}
	var list struct{ Snapshots []wire.Snapshot }
	resp, data := ts.call(t, request{method: "GET", path: snapshotsPath + "?sandbox_id=" + b.ID, key: aliceKey})
	if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &list) != nil || len(list.Snapshots) != 1 || list.Snapshots[0].ID != sn.ID {
		t.Errorf("list: %d %s", resp.StatusCode, data)
	}
	resp, data = ts.call(t, request{method: "GET", path: snapshotsPath, key: bobKey})
	if resp.StatusCode != http.StatusOK || string(data) != "{\"snapshots\":[]}\n" {
		t.Errorf("bob's list: %d %s", resp.StatusCode, data)
	}
	resp, data = ts.call(t, request{method: "POST", path: sandboxesPath, body: mustJSON(t, map[string]any{"snapshot": sn.ID}), key: bobKey})
	wantError(t, resp, data, http.StatusNotFound, "no such snapshot")

	var fork wire.ForkResult
	b.want(http.StatusCreated, "POST", "/fork", map[string]any{"count": 2, "timeout_seconds": 60}, &fork)
	if len(fork.Children) != 2 || fork.Memory {
		t.Fatalf("fork: %+v", fork)
	}
	for i, ch := range fork.Children {
		if ch.Sandbox == nil || ch.Sandbox.AccessToken == "" {
			t.Fatalf("child %d: %+v", i, ch)
		}
		kid := &sbx{t: t, ts: ts, Sandbox: *ch.Sandbox}
		t.Cleanup(func() { ts.send(t, request{method: "DELETE", path: kid.path(""), key: aliceKey}) })
		if res := kid.run(map[string]any{"command": "cat f; echo mine > f"}); res.Stdout != "two\n" {
			t.Errorf("child %d: %+v", i, res)
		}
	}
	if res := b.run(map[string]any{"command": "cat f"}); res.Stdout != "two\n" {
		t.Errorf("the parent after its children wrote: %+v", res)
	}
	for _, body := range []string{`{"count": 0}`, `{"count": 101}`, `{"timeout_seconds": -1}`, `{"counts": 1}`} {
		resp, data := b.do("POST", "/fork", body)
		wantError(t, resp, data, http.StatusBadRequest)
	}

	resp, data = ts.call(t, request{method: "DELETE", path: snapshotsPath + "/" + sn.ID, key: bobKey})
	wantError(t, resp, data, http.StatusNotFound)
	if resp, data := ts.call(t, request{method: "DELETE", path: snapshotsPath + "/" + sn.ID, key: aliceKey}); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: %d %s", resp.StatusCode, data)
	}
	resp, data = ts.call(t, request{method: "DELETE", path: snapshotsPath + "/" + sn.ID, key: aliceKey})
	wantError(t, resp, data, http.StatusNotFound)
}
