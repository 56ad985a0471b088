package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sandbox-run/sandbox-run/internal/testkit/leakcheck"
	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/images/registry"
	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
	"github.com/sandbox-run/sandbox-run/pkg/local"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// The tests run real sandboxes through a real server on 127.0.0.1, and
// check every response they see against the OpenAPI document.

var (
	testEngine *sandbox.Engine
	testExec   *executor.Executor
	testDoc    *apiDoc
)

// sandbox.Default()'s engine gives each run two host uids from this range.
const (
	sandboxUIDBase  = 2000000000
	sandboxUIDCount = 2 * 4096
)

func TestMain(m *testing.M) {
	// The sandbox's PID 1 is this test binary re-executed: Init must come
	// first and never returns in that case.
	agent.Main() // a live sandbox's first program is this binary too
	sandbox.Init()
	flag.Parse()
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	fail := func(what string, err error) int {
		fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
		return 1
	}
	dataDir, err := os.MkdirTemp("", "sandbox-run-api-test-")
	if err != nil {
		return fail("data dir", err)
	}
	defer os.RemoveAll(dataDir)
	testDataDir = dataDir
	// Toolchain caches persist across runs (shared with pkg/executor's tests).
	home, err := os.UserHomeDir()
	if err != nil {
		return fail("home", err)
	}
	cacheDir := filepath.Join(home, ".cache", "sandbox-run-test", "cache")
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return fail("cache dir", err)
	}
	if testEngine, err = sandbox.Default(); err != nil {
		return fail("sandbox engine", err)
	}
	if dir := flag.Lookup("test.gocoverdir"); dir != nil {
		if err := testEngine.EnableInitCoverage(dir.Value.String()); err != nil {
			return fail("init coverage", err)
		}
	}
	testExec, err = executor.New(executor.Config{DataDir: dataDir, CacheDir: cacheDir, Engine: testEngine, ImageRegistry: registry.Fetch, Intercept: local.Intercept})
	if err != nil {
		return fail("executor", err)
	}
	if testDoc, err = loadAPIDoc(OpenAPI()); err != nil {
		return fail("openapi.json", err)
	}
	// Pooled sandboxes end on their own (-cover builds of PID 1 write
	// their counters then).
	defer testEngine.Close()
	defer testExec.EndInterpreters() // first: sessions the tests left do not outlive them
	return m.Run()
}

// ---------------------------------------------------------------------------
// The OpenAPI document as a response validator.

type apiDoc struct {
	doc     map[string]any
	schemas map[string]*jsonschema.Schema // compiled, by JSON pointer into the document
}

const docURL = "doc.json"

func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }

// ptrEscape escapes a JSON pointer token.
func ptrEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// loadAPIDoc compiles every response schema of the document (draft
// 2020-12, "$ref": "#/components/..." resolved within the document).
func loadAPIDoc(raw []byte) (*apiDoc, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	d := &apiDoc{doc: obj(v), schemas: map[string]*jsonschema.Schema{}}
	if d.doc == nil {
		return nil, errors.New("not a JSON object")
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(docURL, v); err != nil {
		return nil, err
	}
	compile := func(ptr string) error {
		s, err := c.Compile(docURL + "#" + ptr)
		if err != nil {
			return fmt.Errorf("compile %s: %w", ptr, err)
		}
		d.schemas[ptr] = s
		return nil
	}
	compileResponse := func(ptr string) error {
		for mt, media := range obj(obj(d.lookup(ptr))["content"]) {
			if obj(media)["schema"] != nil {
				if err := compile(ptr + "/content/" + ptrEscape(mt) + "/schema"); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for p, item := range obj(d.doc["paths"]) {
		for method, op := range obj(item) {
			for code := range obj(obj(op)["responses"]) {
				ptr, _ := d.resolve("/paths/" + ptrEscape(p) + "/" + method + "/responses/" + code)
				if err := compileResponse(ptr); err != nil {
					return nil, err
				}
			}
		}
	}
	for name := range obj(obj(d.doc["components"])["responses"]) {
		if err := compileResponse("/components/responses/" + name); err != nil {
			return nil, err
		}
	}
	for name := range obj(obj(d.doc["components"])["schemas"]) {
		if err := compile("/components/schemas/" + name); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// lookup returns the value at a JSON pointer of the document.
func (d *apiDoc) lookup(ptr string) any {
	var v any = d.doc
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		v = obj(v)[tok]
	}
	return v
}

// resolve follows a "$ref" at ptr, if any.
func (d *apiDoc) resolve(ptr string) (string, map[string]any) {
	for range 8 {
		o := obj(d.lookup(ptr))
		ref, ok := o["$ref"].(string)
		if !ok {
			return ptr, o
		}
		ptr = strings.TrimPrefix(ref, "#")
	}
	return ptr, nil
}

// validate checks one body against a compiled schema.
func (d *apiDoc) validate(ptr string, body []byte) error {
	s := d.schemas[ptr]
	if s == nil {
		return fmt.Errorf("no schema compiled at %s", ptr)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("not JSON: %v", err)
	}
	return s.Validate(v)
}

// check validates a response against the document: the operation by method
// and path, the status code among its responses (an undocumented status
// fails), the documented headers, the media type and the body's schema.
// A path the document lacks must be 404, a method it lacks for a path 405,
// as components/responses NotFound and MethodNotAllowed describe.
func (d *apiDoc) check(t testing.TB, method, path string, resp *http.Response, body []byte) {
	t.Helper()
	where := fmt.Sprintf("%s %s → %d", method, path, resp.StatusCode)
	path = d.template(path)
	item := obj(obj(d.doc["paths"])[path])
	m := strings.ToLower(method)
	if m == "head" {
		m = "get"
	}
	var ptr string
	switch {
	case item == nil:
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: a path the document lacks must answer 404", where)
		}
		ptr = "/components/responses/NotFound"
	case obj(item[m]) == nil:
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s: a method the document lacks for the path must answer 405", where)
		}
		ptr = "/components/responses/MethodNotAllowed"
	default:
		code := strconv.Itoa(resp.StatusCode)
		responses := obj(obj(item[m])["responses"])
		if responses[code] == nil {
			if responses["default"] == nil {
				t.Errorf("%s: status %s is not documented for this operation; body %s", where, code, body)
				return
			}
			code = "default"
		}
		ptr = "/paths/" + ptrEscape(path) + "/" + m + "/responses/" + code
	}
	ptr, r := d.resolve(ptr)
	if r == nil {
		t.Errorf("%s: no response object at %s", where, ptr)
		return
	}
	for name, h := range obj(r["headers"]) {
		v := resp.Header.Get(name)
		switch {
		case v == "":
			t.Errorf("%s: documented header %s missing", where, name)
		case obj(obj(h)["schema"])["type"] == "integer":
			if _, err := strconv.Atoi(v); err != nil {
				t.Errorf("%s: header %s %q is not an integer", where, name, v)
			}
		}
	}
	if method == http.MethodHead {
		return
	}
	content := obj(r["content"])
	if len(content) == 0 {
		if len(body) != 0 {
			t.Errorf("%s: a body where the document has none: %s", where, body)
		}
		return
	}
	ct := resp.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || content[mt] == nil {
		t.Errorf("%s: Content-Type %q is not documented (have %v)", where, ct, keys(content))
		return
	}
	switch {
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		if err := d.validate(ptr+"/content/"+ptrEscape(mt)+"/schema", body); err != nil {
			t.Errorf("%s: body does not match the document: %v\nbody: %s", where, err, truncate(body))
		}
	case strings.HasPrefix(mt, "text/"):
		if !utf8.Valid(body) {
			t.Errorf("%s: text body is not UTF-8", where)
		}
		if path == "/metrics" && !bytes.Contains(body, []byte("# TYPE ")) {
			t.Errorf("%s: not the Prometheus text format: %s", where, truncate(body))
		}
	}
}

// template is the documented path a request path matches: itself, or a
// path with {parameters} (each matching one non-empty segment).
func (d *apiDoc) template(path string) string {
	paths := obj(d.doc["paths"])
	if paths[path] != nil {
		return path
	}
	segs := strings.Split(path, "/")
	for p := range paths {
		tsegs := strings.Split(p, "/")
		if len(tsegs) != len(segs) || !strings.Contains(p, "{") {
			continue
		}
		match := true
		for i, t := range tsegs {
			if strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}") {
				match = segs[i] != ""
			} else {
				match = t == segs[i]
			}
			if !match {
				break
			}
		}
		if match {
			return p
		}
	}
	return path
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func truncate(b []byte) string {
	if len(b) > 2000 {
		return string(b[:2000]) + "..."
	}
	return string(b)
}

// ---------------------------------------------------------------------------
// Servers and the one request helper every test uses.

// syncBuffer collects the server's log lines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything logged so far.
func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// records returns the JSON log records whose msg is msg.
func (b *syncBuffer) records(t testing.TB, msg string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("log line is not JSON: %q", line)
			continue
		}
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

type testServer struct {
	s      *Server
	cfg    Config
	url    string
	addr   string
	logs   *syncBuffer
	client *http.Client

	// With Serve: cancel starts the shutdown, done receives Serve's result.
	cancel context.CancelFunc
	done   chan error
}

// testDataDir holds every test server's data (a fresh directory each).
var testDataDir string

// testConfig is the default configuration, on loopback, with room to queue.
func testConfig() Config {
	cfg := DefaultConfig()
	if dir, err := os.MkdirTemp(testDataDir, "server-"); err == nil {
		cfg.DataDir = dir
	}
	cfg.Addr = "127.0.0.1:0"
	cfg.Queue = 200
	cfg.ShutdownGraceSeconds = 10
	// No live sandbox kept ready: the leak checks count every sandbox
	// (pkg/live's TestReadySandboxes tests those).
	cfg.Live.Ready = -1
	return cfg
}

func newTestServer(t testing.TB, cfg Config) *testServer {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	logs := &syncBuffer{}
	level := slog.LevelInfo
	if cfg.LogLevel == "debug" {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: level}))
	return &testServer{s: New(cfg, local.New(testExec), log), cfg: cfg, logs: logs,
		client: &http.Client{Timeout: 3 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}}
}

// startServer serves s.Handler() with httptest (shutdown not under test).
func startServer(t testing.TB, cfg Config) *testServer {
	t.Helper()
	ts := newTestServer(t, cfg)
	hs := httptest.NewServer(ts.s.Handler())
	t.Cleanup(func() {
		hs.Close()
		ts.s.run.Stop() // as Serve does at its end: its sessions' interpreters end
	})
	ts.url, ts.addr = hs.URL, hs.Listener.Addr().String()
	return ts
}

// serveServer runs the real Serve on a loopback listener.
func serveServer(t testing.TB, cfg Config) *testServer {
	t.Helper()
	ts := newTestServer(t, cfg)
	ts.serve(t)
	return ts
}

// serve runs ts.s's Serve on a loopback listener until the test ends.
func (ts *testServer) serve(t testing.TB) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts.cancel, ts.done = cancel, make(chan error, 1)
	ts.addr = ln.Addr().String()
	ts.url = "http://" + ts.addr
	go func() { ts.done <- ts.s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-ts.done:
		case <-time.After(30 * time.Second):
			t.Errorf("Serve did not return")
		}
	})
}

// request is one HTTP call.
type request struct {
	method, path string
	body         []byte // nil: none
	contentType  string // default application/json when there is a body; "none" sends none
	key          string // Authorization: Bearer key
	chunked      bool   // send the body without Content-Length
	header       http.Header
	ctx          context.Context
}

// send makes the call and validates the response against the OpenAPI
// document. Every HTTP call of the tests goes through here.
func (ts *testServer) send(t testing.TB, r request) (*http.Response, []byte, error) {
	t.Helper()
	ctx := r.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
		if r.chunked {
			body = io.MultiReader(body) // hides the length
		}
	}
	req, err := http.NewRequestWithContext(ctx, r.method, ts.url+r.path, body)
	if err != nil {
		return nil, nil, err
	}
	if r.chunked {
		req.ContentLength = -1
	}
	switch {
	case r.contentType == "none":
	case r.contentType != "":
		req.Header.Set("Content-Type", r.contentType)
	case r.body != nil:
		req.Header.Set("Content-Type", "application/json")
	}
	if r.key != "" {
		req.Header.Set("Authorization", "Bearer "+r.key)
	}
	for k, v := range r.header {
		req.Header[k] = v
	}
	resp, err := ts.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp, data, err
	}
	path, _, _ := strings.Cut(r.path, "?")
	testDoc.check(t, r.method, path, resp, data)
	return resp, data, nil
}

// call is send for the test goroutine: an error fails the test.
func (ts *testServer) call(t testing.TB, r request) (*http.Response, []byte) {
	t.Helper()
	resp, data, err := ts.send(t, r)
	if err != nil {
		t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	return resp, data
}

func (ts *testServer) get(t testing.TB, path, key string) (*http.Response, []byte) {
	t.Helper()
	return ts.call(t, request{method: http.MethodGet, path: path, key: key})
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	if b, ok := v.([]byte); ok {
		return b
	}
	if s, ok := v.(string); ok {
		return []byte(s)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func executeRequest(t testing.TB, body any) request {
	return request{method: http.MethodPost, path: "/api/sandbox/execute", body: mustJSON(t, body)}
}

// execute posts body (a value to marshal, or raw JSON as string or []byte).
func (ts *testServer) execute(t testing.TB, body any) (*http.Response, []byte) {
	t.Helper()
	return ts.call(t, executeRequest(t, body))
}

// run posts body and wants a 200 with a result.
func (ts *testServer) run(t testing.TB, body any) *executor.Result {
	t.Helper()
	resp, data := ts.execute(t, body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200: %s", resp.StatusCode, data)
	}
	return decodeResult(t, data)
}

// waitServeDone waits up to d for Serve to return, once the test has
// started the shutdown, and wants it to return no error.
func (ts *testServer) waitServeDone(t testing.TB, d time.Duration) {
	t.Helper()
	select {
	case err := <-ts.done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
		ts.done <- err // for the cleanup
	case <-time.After(d):
		t.Fatalf("Serve did not return within %v", d)
	}
}

// runAsync sends r from another goroutine and delivers the result of its
// 200, or nil once the test has failed with what came instead (what names
// the request).
func (ts *testServer) runAsync(t testing.TB, r request, what string) <-chan *executor.Result {
	results := make(chan *executor.Result, 1)
	go func() {
		resp, data, err := ts.send(t, r)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %v %s", what, err, data)
			results <- nil
			return
		}
		results <- resultOf(t, data, what)
	}()
	return results
}

// resultOf decodes a result in any goroutine: nil, and the test marked
// failed (never t.Fatal, which must stay on the test's own goroutine),
// when data is none.
func resultOf(t testing.TB, data []byte, what string) *executor.Result {
	var res executor.Result
	if err := json.Unmarshal(data, &res); err != nil {
		t.Errorf("%s: result %s: %v", what, data, err)
		return nil
	}
	return &res
}

// wantCanceled checks that n executions were logged as canceled.
func (ts *testServer) wantCanceled(t testing.TB, n int) {
	t.Helper()
	var canceled int
	for _, rec := range ts.logs.records(t, "execution") {
		if rec["limit"] == "canceled" {
			canceled++
		}
	}
	if canceled != n {
		t.Errorf("%d executions logged with limit canceled, want %d", canceled, n)
	}
}

func decodeResult(t testing.TB, data []byte) *executor.Result {
	t.Helper()
	var res executor.Result
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatalf("result %s: %v", data, err)
	}
	return &res
}

func decodeError(t testing.TB, data []byte) ErrorResponse {
	t.Helper()
	var e ErrorResponse
	if err := json.Unmarshal(data, &e); err != nil {
		t.Fatalf("error body %s: %v", data, err)
	}
	return e
}

// wantError checks an error answer's status and message.
func wantError(t testing.TB, resp *http.Response, data []byte, status int, contains ...string) ErrorResponse {
	t.Helper()
	if resp.StatusCode != status {
		t.Errorf("status %d, want %d: %s", resp.StatusCode, status, data)
		return ErrorResponse{}
	}
	e := decodeError(t, data)
	for _, c := range contains {
		if !strings.Contains(e.Error, c) {
			t.Errorf("error %q lacks %q", e.Error, c)
		}
	}
	return e
}

func py(code string) map[string]any { return map[string]any{"language": "python", "code": code} }

func with(m map[string]any, kv ...any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

// ready returns the /readyz answer.
func (ts *testServer) ready(t testing.TB) (int, map[string]any) {
	t.Helper()
	resp, data := ts.get(t, "/readyz", "")
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("readyz %s: %v", data, err)
	}
	return resp.StatusCode, m
}

// waitFor polls cond every 20 ms for up to d.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitInFlight waits until n executions hold a worker.
func (ts *testServer) waitInFlight(t testing.TB, n int) {
	t.Helper()
	if !waitFor(20*time.Second, func() bool {
		_, m := ts.ready(t)
		return m["in_flight"] == float64(n)
	}) {
		t.Fatalf("in_flight never reached %d", n)
	}
}

// sandboxProcesses lists live processes of this test process's sandboxes:
// a uid of the default engine's range and a run cgroup named after our pid
// (other test binaries run sandboxes too).
func sandboxProcesses() []string {
	return leakcheck.ProgramProcesses(sandboxUIDBase, sandboxUIDBase+sandboxUIDCount, fmt.Sprintf("sandbox-run/ct-%d-", os.Getpid()))
}

// runCgroups lists this process's run cgroups left under the engine's parents.
func runCgroups() []string {
	testEngine.Quiesce()
	return leakcheck.RunCgroups(testEngine.Cgroups().Parents, os.Getpid())
}

// wantNoSandbox waits a few seconds for every sandbox process and run
// cgroup of this test process to be gone.
func wantNoSandbox(t testing.TB) {
	t.Helper()
	var procs, cgs []string
	if !waitFor(5*time.Second, func() bool {
		procs, cgs = sandboxProcesses(), runCgroups()
		return len(procs) == 0 && len(cgs) == 0
	}) {
		t.Errorf("sandbox left behind: processes %v, cgroups %v", procs, cgs)
	}
}

// metric returns a sample's value from the Prometheus text, or -1.
func metric(text, name, labels string) float64 {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name+labels) + ` (\S+)$`)
	m := re.FindStringSubmatch(text)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// ---------------------------------------------------------------------------
// 1. The document.

func TestOpenAPIDocument(t *testing.T) {
	t.Parallel()
	if v, _ := testDoc.doc["openapi"].(string); !strings.HasPrefix(v, "3.1.") {
		t.Errorf("openapi %q, want 3.1.x", v)
	}
	ts := startServer(t, testConfig())
	// Every routed path and method is documented, and every documented one routed.
	paths := obj(testDoc.doc["paths"])
	for path, methods := range ts.s.methods {
		for _, m := range methods {
			if m == http.MethodHead {
				continue
			}
			if obj(obj(paths[path])[strings.ToLower(m)]) == nil {
				t.Errorf("%s %s is routed but not documented", m, path)
			}
		}
	}
	for path, item := range paths {
		for m := range obj(item) {
			if !slices.Contains(ts.s.methods[path], strings.ToUpper(m)) {
				t.Errorf("%s %s is documented but not routed", strings.ToUpper(m), path)
			}
		}
	}
	// The request example is a valid request, for the schema and the server.
	example := testDoc.lookup("/paths/~1api~1sandbox~1execute/post/requestBody/content/application~1json/example")
	exampleJSON := mustJSON(t, example)
	if err := testDoc.validate("/components/schemas/ExecuteRequest", exampleJSON); err != nil {
		t.Errorf("the example does not match ExecuteRequest: %v", err)
	}
	cfg := DefaultConfig()
	if _, err := DecodeExecuteRequest(bytes.NewReader(exampleJSON), &cfg); err != nil {
		t.Errorf("the server refuses the example: %v", err)
	}
	// The served document is the embedded one.
	resp, data := ts.get(t, "/api/openapi.json", "")
	if resp.StatusCode != http.StatusOK || !bytes.Equal(data, OpenAPI()) {
		t.Errorf("GET /api/openapi.json: %d, %d bytes; want the embedded %d bytes", resp.StatusCode, len(data), len(OpenAPI()))
	}
	// The validator itself catches a wrong body and an undocumented status.
	ft := &fakeT{}
	testDoc.check(ft, "GET", "/healthz", &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}}, []byte(`{"status":"nope"}`))
	testDoc.check(ft, "GET", "/healthz", &http.Response{StatusCode: 418, Header: http.Header{"Content-Type": {"application/json"}}}, []byte(`{}`))
	testDoc.check(ft, "POST", "/api/sandbox/execute", &http.Response{StatusCode: 429, Header: http.Header{"Content-Type": {"application/json"}}}, []byte(`{"error":"x"}`))
	if ft.errors != 3 {
		t.Errorf("the validator reported %d of 3 bad responses: %q", ft.errors, ft.msgs)
	}
}

// fakeT counts the validator's complaints.
type fakeT struct {
	testing.TB
	errors int
	msgs   []string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Errorf(format string, a ...any) {
	f.errors++
	f.msgs = append(f.msgs, fmt.Sprintf(format, a...))
}

// ---------------------------------------------------------------------------
// 2. The seed contract, verbatim.

func TestSeedContract(t *testing.T) {
	t.Parallel()
	ts := startServer(t, testConfig())
	resp, data := ts.execute(t, `{"language":"python","code":"print(input())","input_data":"Hello Sandbox!","files":{"data.txt":"This is some data for the script."},"timeout_seconds":5,"max_memory_mb":256}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, data)
	}
	var fields map[string]any
	if err := json.Unmarshal(data, &fields); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"execution_id", "status", "stdout", "stderr", "exit_code", "duration_ms", "memory_used_mb", "output_files"} {
		if _, ok := fields[f]; !ok {
			t.Errorf("field %s missing from %s", f, data)
		}
	}
	res := decodeResult(t, data)
	if res.Stdout != "Hello Sandbox!\n" || res.Status != executor.StatusCompleted || res.ExitCode != 0 {
		t.Errorf("got status %s exit %d stdout %q stderr %q", res.Status, res.ExitCode, res.Stdout, res.Stderr)
	}
	if !strings.HasPrefix(res.ExecutionID, "exec_") || res.DurationMs <= 0 {
		t.Errorf("execution_id %q duration_ms %v", res.ExecutionID, res.DurationMs)
	}

	resp, data = ts.execute(t, `{"language":"cobol-2099","code":"x"}`)
	wantError(t, resp, data, http.StatusBadRequest, "Unsupported language: 'cobol-2099'", "python")
}

// ---------------------------------------------------------------------------
// 3. Every status, limits and binary data.

func TestStatuses(t *testing.T) {
	t.Parallel()
	ts := startServer(t, testConfig())
	tests := []struct {
		name   string
		req    map[string]any
		status executor.Status
		check  func(t *testing.T, res *executor.Result)
	}{
		{"completed", py("print(6*7)"), executor.StatusCompleted, func(t *testing.T, res *executor.Result) {
			if res.Stdout != "42\n" || res.ExitCode != 0 || res.LimitReason != "" {
				t.Errorf("stdout %q exit %d limit %q", res.Stdout, res.ExitCode, res.LimitReason)
			}
		}},
		{"error_runtime", py("import sys\nprint('bye', file=sys.stderr)\nsys.exit(3)"), executor.StatusRuntimeError, func(t *testing.T, res *executor.Result) {
			if res.ExitCode != 3 || res.Stderr != "bye\n" {
				t.Errorf("exit %d stderr %q", res.ExitCode, res.Stderr)
			}
		}},
		{"timeout", with(py("import time\nprint('start', flush=True)\ntime.sleep(10)"), "timeout_seconds", 1), executor.StatusTimeout, func(t *testing.T, res *executor.Result) {
			if res.LimitReason != "wall_time" || res.Stdout != "start\n" || res.DurationMs > 5000 {
				t.Errorf("limit %q stdout %q duration %v ms", res.LimitReason, res.Stdout, res.DurationMs)
			}
		}},
		{"error_compile", map[string]any{"language": "c", "code": "int main( { return 0; }"}, executor.StatusCompileError, func(t *testing.T, res *executor.Result) {
			if res.Compile == nil || !strings.Contains(res.Compile.Stderr, "error") || res.Compile.Status == executor.StatusCompleted {
				t.Errorf("compile step %+v", res.Compile)
			}
		}},
		{"compiled", map[string]any{"language": "c", "code": "#include <stdio.h>\nint main(void) { int n; scanf(\"%d\", &n); printf(\"%d\\n\", n * 2); return 0; }", "input_data": "21"}, executor.StatusCompleted, func(t *testing.T, res *executor.Result) {
			if res.Stdout != "42\n" || res.Compile == nil || res.Compile.Status != executor.StatusCompleted {
				t.Errorf("stdout %q compile %+v", res.Stdout, res.Compile)
			}
		}},
		{"memory", with(py("b = b'x' * (512 << 20)\nprint(len(b))"), "max_memory_mb", 64), executor.StatusRuntimeError, func(t *testing.T, res *executor.Result) {
			if res.LimitReason != "memory" {
				t.Errorf("limit %q exit %d stderr %q", res.LimitReason, res.ExitCode, res.Stderr)
			}
		}},
		{"output", with(py("print('x' * 100000)"), "max_output_bytes", 100), executor.StatusRuntimeError, func(t *testing.T, res *executor.Result) {
			if !res.StdoutTruncated || len(res.Stdout) > 100 || res.LimitReason != "output" {
				t.Errorf("truncated %v, %d bytes, limit %q", res.StdoutTruncated, len(res.Stdout), res.LimitReason)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := ts.run(t, tt.req)
			if res.Status != tt.status {
				t.Errorf("status %s, want %s (exit %d, limit %q, stderr %q)", res.Status, tt.status, res.ExitCode, res.LimitReason, res.Stderr)
			}
			tt.check(t, res)
		})
	}
}

func TestBinaryDataAndFiles(t *testing.T) {
	t.Parallel()
	ts := startServer(t, testConfig())

	t.Run("stdout_base64", func(t *testing.T) {
		t.Parallel()
		res := ts.run(t, py("import sys\nsys.stdout.buffer.write(b'\\xff\\xfe')"))
		if res.StdoutEncoding != "base64" || res.Stdout != base64.StdEncoding.EncodeToString([]byte{0xff, 0xfe}) {
			t.Errorf("stdout %q encoding %q", res.Stdout, res.StdoutEncoding)
		}
	})

	binary := []byte{0, 1, 2, 0x7f, 0x80, 0xfe, 0xff, '\n', 0xc3}
	t.Run("base64_input_file", func(t *testing.T) {
		t.Parallel()
		res := ts.run(t, with(py("print(open('in/data.bin', 'rb').read().hex())"),
			"files", map[string]any{"in/data.bin": map[string]string{"content": base64.StdEncoding.EncodeToString(binary), "encoding": "base64"}}))
		if want := fmt.Sprintf("%x\n", binary); res.Stdout != want {
			t.Errorf("read back %q, want %q", res.Stdout, want)
		}
	})

	code := `
import os
data = open('in/data.bin', 'rb').read()
open('copy.bin', 'wb').write(data)
open('out.txt', 'w').write(open('notes.txt').read().upper())
os.makedirs('sub/dir')
open('sub/dir/deep.txt', 'w').write('deep')
open('notes.log', 'w').write('log')
`
	files := map[string]any{
		"in/data.bin": map[string]string{"content": base64.StdEncoding.EncodeToString(binary), "encoding": "base64"},
		"notes.txt":   "héllo",
	}
	t.Run("output_files_round_trip", func(t *testing.T) {
		t.Parallel()
		res := ts.run(t, with(py(code), "files", files))
		got := map[string]string{}
		for k, v := range res.OutputFiles {
			got[k] = string(v)
		}
		want := map[string]string{"copy.bin": string(binary), "out.txt": "HÉLLO", "sub/dir/deep.txt": "deep", "notes.log": "log"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("output_files %q, want %q (inputs are not echoed back)", got, want)
		}
	})
	t.Run("output_files_patterns", func(t *testing.T) {
		t.Parallel()
		resp, data := ts.execute(t, with(py(code), "files", files, "output_files", []string{"*.txt", "sub/*/*.txt", "missing.txt"}))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, data)
		}
		res := decodeResult(t, data)
		got := keys(res.OutputFiles)
		// A named input file matches too: patterns return what they name.
		if want := []string{"notes.txt", "out.txt", "sub/dir/deep.txt"}; !slices.Equal(got, want) {
			t.Errorf("output_files %v, want %v", got, want)
		}
		if len(res.SkippedFiles) != 1 || res.SkippedFiles[0].Path != "missing.txt" || res.SkippedFiles[0].Reason != "not found" {
			t.Errorf("skipped_files %+v", res.SkippedFiles)
		}
		// The binary output travels as base64 in the JSON.
		resp, data = ts.execute(t, with(py(code), "files", files, "output_files", []string{"copy.bin"}))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, data)
		}
		res = decodeResult(t, data)
		var raw struct {
			OutputFiles map[string]json.RawMessage `json:"output_files"`
		}
		json.Unmarshal(data, &raw)
		want := fmt.Sprintf(`{"content":%q,"encoding":"base64"}`, base64.StdEncoding.EncodeToString(binary))
		if string(raw.OutputFiles["copy.bin"]) != want || !bytes.Equal(res.OutputFiles["copy.bin"], binary) {
			t.Errorf("copy.bin as %s, want %s", raw.OutputFiles["copy.bin"], want)
		}
	})
}

// ---------------------------------------------------------------------------
// 4. Every error answer.

func TestRequestErrors(t *testing.T) {
	t.Parallel()
	ts := startServer(t, testConfig())
	long := strings.Repeat("a", 300)
	tests := []struct {
		name   string
		body   string
		status int
		msg    string
	}{
		{"malformed", `{"language": "python", "code": `, 400, "malformed JSON"},
		{"not_an_object", `["python"]`, 400, "malformed JSON"},
		{"empty", ``, 400, "malformed JSON"},
		{"unknown_field", `{"language":"python","code":"print(1)","memory":5}`, 400, `unknown field "memory"`},
		{"two_values", `{"language":"python","code":"print(1)"} {"language":"python","code":"print(2)"}`, 400, "more than one value"},
		{"trailing_garbage", `{"language":"python","code":"print(1)"}]`, 400, "more than one value"},
		{"wrong_type", `{"language":"python","code":"print(1)","timeout_seconds":"5"}`, 400, "malformed JSON"},
		{"dotdot_file", `{"language":"python","code":"print(1)","files":{"../x":"y"}}`, 400, "invalid file name"},
		{"inner_dotdot_file", `{"language":"python","code":"print(1)","files":{"a/../../x":"y"}}`, 400, "invalid file name"},
		{"absolute_file", `{"language":"python","code":"print(1)","files":{"/abs":"y"}}`, 400, "invalid file name"},
		{"nul_file", `{"language":"python","code":"print(1)","files":{"a\u0000b":"y"}}`, 400, "invalid file name"},
		{"long_file", `{"language":"python","code":"print(1)","files":{"` + long + `":"y"}}`, 400, "invalid file name"},
		{"bad_encoding", `{"language":"python","code":"print(1)","files":{"a":{"content":"x","encoding":"rot13"}}}`, 400, "rot13"},
		{"bad_base64", `{"language":"python","code":"print(1)","files":{"a":{"content":"!!","encoding":"base64"}}}`, 400, "base64"},
		{"negative_timeout", `{"language":"python","code":"print(1)","timeout_seconds":-1}`, 400, "timeout_seconds must not be negative"},
		{"negative_memory", `{"language":"python","code":"print(1)","max_memory_mb":-5}`, 400, "max_memory_mb must not be negative"},
		{"negative_output", `{"language":"python","code":"print(1)","max_output_bytes":-1}`, 400, "max_output_bytes must not be negative"},
		{"timeout_above_max", `{"language":"python","code":"print(1)","timeout_seconds":10000}`, 400, "timeout_seconds 10000 is above the maximum of 300s"},
		{"memory_above_max", `{"language":"python","code":"print(1)","max_memory_mb":100000}`, 400, "max_memory_mb 100000 is above the maximum"},
		{"fractional_memory", `{"language":"python","code":"print(1)","max_memory_mb":1.5}`, 400, "malformed JSON"},
		{"missing_language", `{"code":"print(1)"}`, 400, "language is required"},
		{"blank_language", `{"language":"  ","code":"print(1)"}`, 400, "language is required"},
		{"missing_code", `{"language":"python"}`, 400, "code is required"},
		{"unsupported_language", `{"language":"cobol-2099","code":"x"}`, 400, "Unsupported language: 'cobol-2099'"},
		{"missing_version", `{"language":"python","version":"1.0","code":"print(1)"}`, 400, "not installed"},
		{"bad_output_pattern", `{"language":"python","code":"print(1)","output_files":["../etc/passwd"]}`, 400, "invalid output file pattern"},
		{"bad_env", `{"language":"python","code":"print(1)","env":{"A=B":"c"}}`, 400, "invalid environment variable"},
		{"file_and_dir", `{"language":"python","code":"print(1)","files":{"a":"x","a/b":"y"}}`, 400, "also used as the directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp, data := ts.execute(t, tt.body)
			wantError(t, resp, data, tt.status, tt.msg)
		})
	}

	t.Run("content_type", func(t *testing.T) {
		t.Parallel()
		body := mustJSON(t, py("print('typed')"))
		for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin1", "not a type/"} {
			resp, data := ts.call(t, request{method: "POST", path: "/api/sandbox/execute", body: body, contentType: ct})
			wantError(t, resp, data, http.StatusUnsupportedMediaType, "send ")
		}
		for _, ct := range []string{"application/json; charset=utf-8", "application/json;charset=UTF-8", "application/problem+json", "none"} {
			resp, data := ts.call(t, request{method: "POST", path: "/api/sandbox/execute", body: body, contentType: ct})
			if resp.StatusCode != http.StatusOK || decodeResult(t, data).Stdout != "typed\n" {
				t.Errorf("Content-Type %q: %d %s", ct, resp.StatusCode, data)
			}
		}
	})

	t.Run("unknown_path", func(t *testing.T) {
		t.Parallel()
		for _, r := range []request{{method: "GET", path: "/nope"}, {method: "POST", path: "/api/sandbox/run", body: []byte("{}")}, {method: "GET", path: "/api/sandbox/execute/x"}} {
			resp, data := ts.call(t, r)
			wantError(t, resp, data, http.StatusNotFound, "no such endpoint")
		}
	})

	t.Run("wrong_method", func(t *testing.T) {
		t.Parallel()
		for _, tt := range []struct {
			method, path, allow string
		}{
			{"GET", "/api/sandbox/execute", "POST"},
			{"PUT", "/api/sandbox/execute", "POST"},
			{"POST", "/healthz", "GET, HEAD"},
			{"DELETE", "/metrics", "GET, HEAD"},
			{"POST", "/api/sandbox/languages", "GET, HEAD"},
		} {
			resp, data := ts.call(t, request{method: tt.method, path: tt.path})
			wantError(t, resp, data, http.StatusMethodNotAllowed, "not allowed")
			if got := resp.Header.Get("Allow"); got != tt.allow {
				t.Errorf("%s %s: Allow %q, want %q", tt.method, tt.path, got, tt.allow)
			}
		}
		// HEAD on a GET route is served.
		resp, _ := ts.call(t, request{method: "HEAD", path: "/healthz"})
		if resp.StatusCode != http.StatusOK {
			t.Errorf("HEAD /healthz: %d", resp.StatusCode)
		}
	})
}

func TestBodyTooLarge(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.MaxBodyBytes = 1024
	ts := startServer(t, cfg)
	big := mustJSON(t, py("print(1)\n#"+strings.Repeat("x", 64<<10)))
	for _, chunked := range []bool{false, true} {
		resp, data := ts.call(t, request{method: "POST", path: "/api/sandbox/execute", body: big, chunked: chunked})
		wantError(t, resp, data, http.StatusRequestEntityTooLarge, "larger than")
	}
	// A valid value followed by more than the limit of white space.
	padded := append(mustJSON(t, py("print(1)")), bytes.Repeat([]byte(" "), 4096)...)
	for _, chunked := range []bool{false, true} {
		resp, data := ts.call(t, request{method: "POST", path: "/api/sandbox/execute", body: padded, chunked: chunked})
		wantError(t, resp, data, http.StatusRequestEntityTooLarge, "larger than")
	}
	// Just under the limit runs.
	small := mustJSON(t, py("print(1)\n#"+strings.Repeat("x", 900)))
	resp, data := ts.call(t, request{method: "POST", path: "/api/sandbox/execute", body: small, chunked: true})
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a %d-byte body: %d %s", len(small), resp.StatusCode, data)
	}
}

func keyConfig(keys ...APIKey) Config {
	cfg := testConfig()
	cfg.Addr = "0.0.0.0:8080" // allowed with keys; the test server listens on loopback anyway
	cfg.Keys = keys
	return cfg
}

func TestAuth(t *testing.T) {
	t.Parallel()
	ts := startServer(t, keyConfig(
		APIKey{ID: "runner", Key: "exec-secret", Scopes: []string{ScopeExecute}},
		APIKey{ID: "ops", Key: "admin-secret", Scopes: []string{ScopeAdmin}},
	))
	for _, key := range []string{"", "wrong-secret"} {
		for _, r := range []request{executeRequest(t, py("print(1)")), {method: "GET", path: "/api/sandbox/languages"}, {method: "GET", path: "/metrics"}} {
			r.key = key
			resp, data := ts.call(t, r)
			wantError(t, resp, data, http.StatusUnauthorized, "API key")
			if !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("401 without WWW-Authenticate: %v", resp.Header)
			}
		}
	}
	// Not a bearer token.
	resp, data := ts.call(t, request{method: "GET", path: "/api/sandbox/languages",
		header: http.Header{"Authorization": {"Basic " + base64.StdEncoding.EncodeToString([]byte("runner:exec-secret"))}}})
	wantError(t, resp, data, http.StatusUnauthorized, "missing API key")

	resp, data = ts.get(t, "/metrics", "exec-secret")
	wantError(t, resp, data, http.StatusForbidden, "key runner lacks the admin scope")

	r := executeRequest(t, py("print('authorized')"))
	r.key = "exec-secret"
	resp, data = ts.call(t, r)
	if resp.StatusCode != http.StatusOK || decodeResult(t, data).Stdout != "authorized\n" {
		t.Errorf("execute with the execute key: %d %s", resp.StatusCode, data)
	}
	r.key = "admin-secret" // admin implies execute
	if resp, data = ts.call(t, r); resp.StatusCode != http.StatusOK {
		t.Errorf("execute with the admin key: %d %s", resp.StatusCode, data)
	}
	if resp, data = ts.get(t, "/metrics", "admin-secret"); resp.StatusCode != http.StatusOK {
		t.Errorf("metrics with the admin key: %d %s", resp.StatusCode, data)
	}
	if resp, _ = ts.get(t, "/api/sandbox/languages", "exec-secret"); resp.StatusCode != http.StatusOK {
		t.Errorf("languages with the execute key: %d", resp.StatusCode)
	}
	// Public endpoints need no key.
	for _, p := range []string{"/healthz", "/readyz", "/api/openapi.json"} {
		if resp, _ := ts.get(t, p, ""); resp.StatusCode != http.StatusOK {
			t.Errorf("%s without a key: %d", p, resp.StatusCode)
		}
	}
}

func TestAuthOffOnLoopback(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	if err := cfg.Validate(); err != nil || len(cfg.Keys) != 0 {
		t.Fatalf("loopback without keys: %v", err)
	}
	ts := startServer(t, cfg)
	if resp, data := ts.get(t, "/metrics", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("metrics: %d %s", resp.StatusCode, data)
	}
	if resp, data := ts.get(t, "/api/sandbox/languages", "any-key-at-all"); resp.StatusCode != http.StatusOK {
		t.Errorf("languages: %d %s", resp.StatusCode, data)
	}
	if res := ts.run(t, py("print('open')")); res.Stdout != "open\n" {
		t.Errorf("stdout %q", res.Stdout)
	}
}

func TestRateLimit(t *testing.T) {
	t.Parallel()
	ts := startServer(t, keyConfig(APIKey{ID: "slow", Key: "k", RatePerSecond: 0.1, Burst: 1}))
	r := executeRequest(t, py("print(1)"))
	r.key = "k"
	resp, data := ts.call(t, r)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("first request: %d %s", resp.StatusCode, data)
	}
	resp, data = ts.call(t, r)
	wantError(t, resp, data, http.StatusTooManyRequests, "rate limit of key slow")
	if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || n < 5 || n > 10 {
		t.Errorf("Retry-After %q, want about 10 s", resp.Header.Get("Retry-After"))
	}
	resp, data = ts.get(t, "/metrics", "k") // default scope execute: no metrics
	wantError(t, resp, data, http.StatusForbidden)
}

func TestKeyConcurrency(t *testing.T) {
	t.Parallel()
	ts := startServer(t, keyConfig(APIKey{ID: "one", Key: "k", MaxConcurrent: 1}))
	slow := executeRequest(t, py("import time\ntime.sleep(1.5)\nprint('slow')"))
	slow.key = "k"
	first := ts.runAsync(t, slow, "first request")
	ts.waitInFlight(t, 1)
	fast := executeRequest(t, py("print(1)"))
	fast.key = "k"
	resp, data := ts.call(t, fast)
	wantError(t, resp, data, http.StatusTooManyRequests, "key one has 1 executions in flight")
	if resp.Header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	if res := <-first; res == nil || res.Stdout != "slow\n" {
		t.Errorf("first request: %+v", res)
	}
	// The key's slot is free again.
	resp, data = ts.call(t, fast)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("after the first: %d %s", resp.StatusCode, data)
	}
}

func TestQueueFull(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Workers, cfg.Queue = 1, 0
	ts := startServer(t, cfg)
	first := ts.runAsync(t, executeRequest(t, py("import time\ntime.sleep(1.5)\nprint('slow')")), "first request")
	ts.waitInFlight(t, 1)
	resp, data := ts.execute(t, py("print(1)"))
	wantError(t, resp, data, http.StatusServiceUnavailable, "all 1 workers are busy")
	if resp.Header.Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	if res := <-first; res == nil || res.Stdout != "slow\n" {
		t.Errorf("first request: %+v", res)
	}
	_, m := ts.get(t, "/metrics", "")
	if v := metric(string(m), "sandbox_run_rejected_total", `{reason="queue_full"}`); v != 1 {
		t.Errorf("rejected_total{queue_full} = %v, want 1", v)
	}
}

// ---------------------------------------------------------------------------
// 5. A client that goes away kills its sandbox.

func TestClientDisconnectKillsSandbox(t *testing.T) {
	wantNoSandbox(t) // nothing of earlier tests
	cfg := testConfig()
	cfg.Workers = 1
	ts := startServer(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	start := time.Now()
	go func() {
		r := executeRequest(t, py("import time\ntime.sleep(30)"))
		r.ctx = ctx
		_, _, err := ts.send(t, r)
		errc <- err
	}()
	if !waitFor(15*time.Second, func() bool { return len(sandboxProcesses()) > 0 }) {
		t.Fatal("the sandbox never showed up")
	}
	time.Sleep(time.Until(start.Add(500 * time.Millisecond)))
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("client error %v, want context.Canceled", err)
	}
	wantNoSandbox(t)
	// The worker is free: the next request runs at once (Workers is 1).
	waitFor(5*time.Second, func() bool { _, m := ts.ready(t); return m["in_flight"] == float64(0) })
	if res := ts.run(t, py("print('next')")); res.Stdout != "next\n" {
		t.Errorf("next request: %q", res.Stdout)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %v: the sleep was not killed", d)
	}
	// The canceled run is logged as such.
	ts.wantCanceled(t, 1)
}

// ---------------------------------------------------------------------------
// 6. Graceful shutdown.

func TestGracefulShutdown(t *testing.T) {
	cfg := testConfig()
	ts := serveServer(t, cfg)
	// A second listener on the same server: the first stops accepting on
	// shutdown, and readiness must still be observable.
	side := httptest.NewServer(ts.s.Handler())
	defer side.Close()
	sideTS := *ts
	sideTS.url = side.URL

	if code, _ := ts.ready(t); code != http.StatusOK {
		t.Fatalf("readyz %d before shutdown", code)
	}
	done := ts.runAsync(t, executeRequest(t, py("import time\ntime.sleep(1)\nprint('finished')")), "in-flight request")
	ts.waitInFlight(t, 1)
	time.Sleep(200 * time.Millisecond)
	ts.cancel()
	// Draining: not ready, and the listener is closed.
	if !waitFor(2*time.Second, func() bool { code, _ := sideTS.ready(t); return code == http.StatusServiceUnavailable }) {
		t.Error("readyz never answered 503 while draining")
	}
	if !waitFor(2*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", ts.addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	}) {
		t.Error("new connections are still accepted while draining")
	}
	// A request reaching the server while it drains is refused with 503.
	resp, data := sideTS.execute(t, py("print(1)"))
	wantError(t, resp, data, http.StatusServiceUnavailable, "shutting down")

	res := <-done
	if res == nil || res.Status != executor.StatusCompleted || res.Stdout != "finished\n" {
		t.Errorf("in-flight request: %+v", res)
	}
	ts.waitServeDone(t, 10*time.Second)
	if _, err := net.DialTimeout("tcp", ts.addr, time.Second); err == nil {
		t.Error("new connections accepted after shutdown")
	}
	if len(ts.logs.records(t, "stopped")) != 1 {
		t.Error(`no "stopped" log line`)
	}
}

// TestShutdownEndsInterpreters: a server that stops ends its sessions'
// interpreters (long runs, not in flight): nothing of them outlives it.
// Before, they lived on until the process exited, and their sandboxes,
// dying with it, left their cgroups behind.
func TestShutdownEndsInterpreters(t *testing.T) {
	wantNoSandbox(t)
	ts := serveServer(t, testConfig())
	sess := struct{ SessionID string }{ts.pythonInterpreter(t)}
	if resp, data := ts.execute(t, map[string]any{"language": "python", "session_id": sess.SessionID, "code": "x = 1"}); resp.StatusCode != http.StatusOK {
		t.Fatalf("cell: %d %s", resp.StatusCode, data)
	}
	if len(sandboxProcesses()) == 0 || len(runCgroups()) == 0 {
		t.Fatal("no interpreter running after a cell")
	}
	ts.cancel()
	ts.waitServeDone(t, 10*time.Second)
	wantNoSandbox(t)
}

func TestShutdownGraceKillsRuns(t *testing.T) {
	wantNoSandbox(t)
	cfg := testConfig()
	cfg.ShutdownGraceSeconds = 0.5
	ts := serveServer(t, cfg)
	type answer struct {
		resp *http.Response
		data []byte
		err  error
	}
	answers := make(chan answer, 1)
	go func() {
		resp, data, err := ts.send(t, executeRequest(t, py("import time\ntime.sleep(30)")))
		answers <- answer{resp, data, err}
	}()
	if !waitFor(15*time.Second, func() bool { return len(sandboxProcesses()) > 0 }) {
		t.Fatal("the sandbox never showed up")
	}
	start := time.Now()
	ts.cancel()
	ts.waitServeDone(t, 10*time.Second)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Serve took %v to return with a grace of 0.5 s", d)
	}
	wantNoSandbox(t)
	// The client still connected learns that its run was killed.
	a := <-answers
	if a.err != nil {
		t.Fatalf("client: %v", a.err)
	}
	e := wantError(t, a.resp, a.data, http.StatusServiceUnavailable, "shutting down")
	if !strings.HasPrefix(e.ExecutionID, "exec_") {
		t.Errorf("no execution_id in %s", a.data)
	}
	if len(ts.logs.records(t, "grace period over: killing running executions")) != 1 {
		t.Error("no log line about the grace period")
	}
}

// ---------------------------------------------------------------------------
// 7. Load.

func TestConcurrentRequests(t *testing.T) {
	wantNoSandbox(t)
	cfg := testConfig() // Workers: 2 per CPU, Queue: 200
	ts := startServer(t, cfg)
	const n = 100
	var wg sync.WaitGroup
	got := make([]string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, data, err := ts.send(t, executeRequest(t, py(fmt.Sprintf("print(%d*7)", i))))
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Errorf("request %d: %v %s", i, err, data)
				return
			}
			var res executor.Result
			json.Unmarshal(data, &res)
			if res.Status != executor.StatusCompleted {
				t.Errorf("request %d: %s %s", i, res.Status, res.Stderr)
			}
			got[i] = res.Stdout
		}()
	}
	wg.Wait()
	for i, s := range got {
		if want := fmt.Sprintf("%d\n", i*7); s != want {
			t.Errorf("request %d: stdout %q, want %q", i, s, want)
		}
	}
	wantNoSandbox(t)
	_, data := ts.get(t, "/metrics", "")
	text := string(data)
	if v := metric(text, "sandbox_run_executions_total", `{language="python",status="completed"}`); v < n {
		t.Errorf("executions_total{python,completed} = %v, want >= %d", v, n)
	}
	if v := metric(text, "sandbox_run_executions_in_flight", ""); v != 0 {
		t.Errorf("executions_in_flight = %v after the load", v)
	}
	if v := metric(text, "sandbox_run_queue_depth", ""); v != 0 {
		t.Errorf("queue_depth = %v after the load", v)
	}
	if v := metric(text, "sandbox_run_http_requests_total", `{code="200",route="POST /api/sandbox/execute"}`); v < n {
		t.Errorf("http_requests_total{execute,200} = %v", v)
	}
	if code, m := ts.ready(t); code != 200 || m["in_flight"] != float64(0) || m["queued"] != float64(0) {
		t.Errorf("readyz after the load: %d %v", code, m)
	}
}

// ---------------------------------------------------------------------------
// 8. Languages and health.

func TestLanguagesAndHealth(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	ts := startServer(t, cfg)
	resp, data := ts.get(t, "/api/sandbox/languages", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("languages: %d %s", resp.StatusCode, data)
	}
	var langs []LanguageInfo
	if err := json.Unmarshal(data, &langs); err != nil {
		t.Fatal(err)
	}
	byName := map[string]LanguageInfo{}
	for _, l := range langs {
		byName[l.Name] = l
	}
	compiled := map[string]bool{"python": false, "javascript": false, "bash": false, "go": true, "rust": true, "java": true, "c": true, "cpp": true}
	for name, comp := range compiled {
		l, ok := byName[name]
		switch {
		case !ok:
			t.Errorf("%s missing from %v", name, keys(byName))
		case l.Version == "" || l.Compiled != comp:
			t.Errorf("%s: version %q compiled %v", name, l.Version, l.Compiled)
		case l.DefaultLimits.TimeoutSeconds != cfg.Defaults.TimeoutSeconds || l.DefaultLimits.MemoryMB <= 0 || l.DefaultLimits.Processes <= 0:
			t.Errorf("%s: default_limits %+v", name, l.DefaultLimits)
		}
	}
	if j := byName["java"]; j.DefaultLimits.MemoryMB != 512 {
		t.Errorf("java default memory %d MiB, want its own 512", j.DefaultLimits.MemoryMB)
	}
	if p := byName["python"]; !slices.Contains(p.Aliases, "py") || !slices.Contains(p.Extensions, "py") {
		t.Errorf("python: %+v", p)
	}
	// Every language once, with its versions; the top-level fields are the
	// default version's.
	for _, l := range langs {
		defaults := 0
		for _, v := range l.Versions {
			if v.Default {
				defaults++
				if v.Version != l.Version || v.Compiled != l.Compiled {
					t.Errorf("%s: default version %+v, top level %q", l.Name, v, l.Version)
				}
			}
		}
		if defaults != 1 || len(byName) != len(langs) {
			t.Errorf("%s: %d default versions in %+v", l.Name, defaults, l.Versions)
		}
	}
	// A version picks among them by prefix.
	for _, v := range byName["python"].Versions {
		minor := strings.Join(strings.SplitN(v.Version, ".", 3)[:2], ".")
		resp, data := ts.execute(t, with(py("import sys; print('%d.%d.%d' % sys.version_info[:3])"), "version", minor))
		var res map[string]any
		json.Unmarshal(data, &res)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(fmt.Sprint(res["stdout"]), minor+".") || !strings.HasPrefix(fmt.Sprint(res["version"]), minor+".") {
			t.Errorf("python version %s: %d %s", minor, resp.StatusCode, data)
		}
	}
	if resp, data := ts.execute(t, with(py("print(1)"), "version", "1.2")); resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(data), "installed") {
		t.Errorf("python 1.2: %d %s", resp.StatusCode, data)
	}
	// Cached: the same answer again.
	if _, again := ts.get(t, "/api/sandbox/languages", ""); !bytes.Equal(again, data) {
		t.Error("languages changed between calls")
	}

	resp, data = ts.get(t, "/healthz", "")
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(data)) != `{"status":"ok"}` {
		t.Errorf("healthz: %d %s", resp.StatusCode, data)
	}
	code, m := ts.ready(t)
	if code != http.StatusOK || m["status"] != "ready" || m["workers"] != float64(cfg.Workers) {
		t.Errorf("readyz: %d %v", code, m)
	}
	// An alias runs too.
	if res := ts.run(t, map[string]any{"language": "py", "code": "print('alias')"}); res.Language != "python" || res.Stdout != "alias\n" {
		t.Errorf("alias: %s %q", res.Language, res.Stdout)
	}
}

func TestNewExecutor(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.DataDir = t.TempDir()
	x, err := NewExecutor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := x.Registry().Lookup("python"); !ok {
		t.Error("no python in the registry")
	}
}

// ---------------------------------------------------------------------------
// 9. Logs.

func TestLogs(t *testing.T) {
	t.Parallel()
	const code = "import sys\nprint('STDOUT-MARKER-' + sys.argv[0][:0] + 'x') # CODE-MARKER"
	for _, level := range []string{"info", "debug"} {
		t.Run(level, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig()
			cfg.LogLevel = level
			ts := startServer(t, cfg)
			res := ts.run(t, py(code))
			if res.Stdout != "STDOUT-MARKER-x\n" {
				t.Fatalf("stdout %q", res.Stdout)
			}
			recs := ts.logs.records(t, "execution")
			if len(recs) != 1 {
				t.Fatalf("%d execution log lines, want 1", len(recs))
			}
			rec := recs[0]
			if rec["execution_id"] != res.ExecutionID || rec["language"] != "python" || rec["status"] != "completed" {
				t.Errorf("log line %v", rec)
			}
			if _, ok := rec["duration_ms"].(float64); !ok {
				t.Errorf("no duration_ms in %v", rec)
			}
			line, _ := json.Marshal(rec)
			hasCode := strings.Contains(string(line), "CODE-MARKER")
			hasOut := strings.Contains(string(line), "STDOUT-MARKER-x")
			if debug := level == "debug"; hasCode != debug || hasOut != debug {
				t.Errorf("level %s: code logged %v, stdout logged %v: %s", level, hasCode, hasOut, line)
			}
			ts.logs.mu.Lock()
			all := ts.logs.buf.String()
			ts.logs.mu.Unlock()
			if level == "info" && (strings.Contains(all, "CODE-MARKER") || strings.Contains(all, "STDOUT-MARKER")) {
				t.Errorf("code or output in the info log: %s", all)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// Configured request bounds, a client leaving the queue, and the 500s.

func TestRequestBounds(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.MaxFiles, cfg.MaxArgs, cfg.MaxEnv = 2, 1, 1
	ts := startServer(t, cfg)
	for _, tt := range []struct {
		body map[string]any
		msg  string
	}{
		{with(py("print(1)"), "files", map[string]string{"a": "", "b": "", "c": ""}), "too many files: 3 (at most 2)"},
		{with(py("print(1)"), "args", []string{"x", "y"}), "too many args: 2 (at most 1)"},
		{with(py("print(1)"), "env", map[string]string{"A": "1", "B": "2"}), "too many env entries: 2 (at most 1)"},
	} {
		resp, data := ts.execute(t, tt.body)
		wantError(t, resp, data, http.StatusBadRequest, tt.msg)
	}
	res := ts.run(t, with(py("import os, sys\nprint(sys.argv[1:], os.environ['A'], open('b').read())"),
		"files", map[string]string{"a": "", "b": "B"}, "args", []string{"x"}, "env", map[string]string{"A": "1"}))
	if res.Stdout != "['x'] 1 B\n" {
		t.Errorf("stdout %q stderr %q", res.Stdout, res.Stderr)
	}
}

func TestQueuedClientLeaves(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Workers, cfg.Queue = 1, 1
	ts := startServer(t, cfg)
	first := make(chan int, 1)
	go func() {
		resp, data, err := ts.send(t, executeRequest(t, py("import time\ntime.sleep(1.5)")))
		if err != nil {
			t.Errorf("first: %v %s", err, data)
			first <- 0
			return
		}
		first <- resp.StatusCode
	}()
	ts.waitInFlight(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	queued := make(chan error, 1)
	go func() {
		r := executeRequest(t, py("print('never')"))
		r.ctx = ctx
		_, _, err := ts.send(t, r)
		queued <- err
	}()
	if !waitFor(10*time.Second, func() bool { _, m := ts.ready(t); return m["queued"] == float64(1) }) {
		t.Fatal("the second request never queued")
	}
	cancel()
	if err := <-queued; !errors.Is(err, context.Canceled) {
		t.Errorf("queued client: %v", err)
	}
	if !waitFor(5*time.Second, func() bool { _, m := ts.ready(t); return m["queued"] == float64(0) }) {
		t.Error("the queue slot was not given back")
	}
	if code := <-first; code != http.StatusOK {
		t.Errorf("first: %d", code)
	}
	// Nothing ran for the client that left; the next request runs.
	if res := ts.run(t, py("print('after')")); res.Stdout != "after\n" {
		t.Errorf("after: %q", res.Stdout)
	}
	if n := len(ts.logs.records(t, "execution")); n != 2 {
		t.Errorf("%d executions logged, want 2", n)
	}
}

// failingExecutor answers like an executor whose sandboxes cannot be built.
type failingExecutor struct {
	*executor.Executor
	err    error
	status executor.Status
}

func (f failingExecutor) Execute(ctx context.Context, req *executor.Request) (*executor.Result, error) {
	if f.err != nil {
		return nil, f.err
	}
	return &executor.Result{ExecutionID: "exec_0123abcd", Outcome: executor.Outcome{Status: f.status, ExitCode: -1},
		Language: req.Language, OutputFiles: executor.OutputFiles{}, Error: "sandbox setup: clone: operation not permitted"}, nil
}

func TestServerErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		x    failingExecutor
		want string
	}{
		{"setup_error", failingExecutor{Executor: testExec, status: executor.StatusSetupError}, "error_setup"},
		{"executor_error", failingExecutor{Executor: testExec, err: errors.New("disk on fire")}, "execution failed: disk on fire"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			ts := newTestServer(t, cfg)
			ts.s = New(cfg, local.New(tt.x), ts.s.log)
			hs := httptest.NewServer(ts.s.Handler())
			defer hs.Close()
			ts.url = hs.URL
			resp, data := ts.execute(t, py("print(1)"))
			if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(data), tt.want) {
				t.Errorf("%d %s, want 500 with %q", resp.StatusCode, data, tt.want)
			}
			if len(ts.logs.records(t, "execution failed"))+len(ts.logs.records(t, "execution")) != 1 {
				t.Error("the failure was not logged")
			}
		})
	}
}
