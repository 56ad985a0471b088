package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandbox-run/sandbox-run/pkg/api"
	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
	"github.com/sandbox-run/sandbox-run/pkg/local"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

var (
	testDataDir string
	testExec    *executor.Executor
)

func TestMain(m *testing.M) {
	// The sandbox's PID 1 is this test binary re-executed: Init must come
	// first and never returns in that case.
	agent.Main() // a live sandbox's first program is this binary too
	sandbox.Init()
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "sandbox-run-mcp-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	testDataDir = dir
	// Toolchain caches persist across runs (shared with the other packages' tests).
	home, _ := os.UserHomeDir()
	cacheDir := filepath.Join(home, ".cache", "sandbox-run-test", "cache")
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	engine, err := sandbox.Default()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox engine:", err)
		return 1
	}
	defer engine.Close()
	if testExec, err = executor.New(executor.Config{DataDir: dir, CacheDir: cacheDir, Engine: engine, Intercept: local.Intercept}); err != nil {
		fmt.Fprintln(os.Stderr, "executor:", err)
		return 1
	}
	return m.Run()
}

func testConfig(t *testing.T) api.Config {
	cfg := api.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Keys = []api.APIKey{{ID: "one", Key: "key-one"}, {ID: "two", Key: "key-two"},
		{ID: "slow", Key: "key-slow", RatePerSecond: 0.001, Burst: 3}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// serveAPI runs the HTTP server (api.New, whose /mcp this package adds) on
// a loopback port until the test ends, and returns its URL.
func serveAPI(t *testing.T, cfg api.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- api.New(cfg, local.New(testExec), quiet, api.Mount("/mcp", NewHandler)).Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return "http://" + ln.Addr().String()
}

// bearer adds an API key to every request.
type bearer struct{ key string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// connectHTTP is an SDK client connected to url's /mcp with key.
func connectHTTP(t *testing.T, url, key string) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "0"}, nil)
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{key}}, DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connect %s/mcp: %v", url, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// call calls a tool and returns its result; a protocol error fails the test.
func call(t *testing.T, cs *sdk.ClientSession, tool string, args any) *sdk.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v", tool, err)
	}
	return res
}

func text(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// ok decodes a successful call's structured output into out.
func ok(t *testing.T, res *sdk.CallToolResult, out any) {
	t.Helper()
	if res.IsError {
		t.Fatalf("tool error: %s", text(res))
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
}

// toolError checks that a call ended in a tool error saying want.
func toolError(t *testing.T, res *sdk.CallToolResult, want string) {
	t.Helper()
	if !res.IsError || !strings.Contains(text(res), want) {
		t.Errorf("want a tool error saying %q; got isError=%v %q", want, res.IsError, text(res))
	}
}

// exercise runs the checks every transport must pass: tools and their
// schemas, a run, errors and a session round trip.
func exercise(t *testing.T, cs *sdk.ClientSession) {
	t.Helper()
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*sdk.Tool{}
	for _, tool := range tools.Tools {
		byName[tool.Name] = tool
	}
	for _, name := range []string{"execute_code", "list_languages", "create_session", "run_in_session",
		"list_session_files", "read_session_file", "close_session"} {
		tool := byName[name]
		if tool == nil {
			t.Fatalf("tool %s missing (have %v)", name, slices.Collect(func(yield func(string) bool) {
				for n := range byName {
					yield(n)
				}
			}))
		}
		schema, _ := tool.InputSchema.(map[string]any)
		if schema["type"] != "object" || tool.Description == "" {
			t.Errorf("%s: input schema %v, description %q", name, tool.InputSchema, tool.Description)
		}
	}
	schema := byName["execute_code"].InputSchema.(map[string]any)
	props, _ := schema["properties"].(map[string]any)
	for _, p := range []string{"language", "code", "version", "stdin", "args", "files", "limits", "isolation"} {
		if prop, _ := props[p].(map[string]any); prop == nil || prop["description"] == "" {
			t.Errorf("execute_code: property %s missing or undescribed: %v", p, props[p])
		}
	}
	if req, _ := schema["required"].([]any); !slices.Contains(req, any("language")) || !slices.Contains(req, any("code")) {
		t.Errorf("execute_code: required %v", schema["required"])
	}
	if byName["execute_code"].OutputSchema == nil {
		t.Error("execute_code has no output schema")
	}

	// A run.
	var run RunResult
	ok(t, call(t, cs, "execute_code", map[string]any{"language": "python", "code": "print(6*7)"}), &run)
	if run.Status != "completed" || run.Stdout != "42\n" || run.ExitCode != 0 || run.Language != "python" || run.ExecutionID == "" {
		t.Errorf("print(6*7): %+v", run)
	}
	ok(t, call(t, cs, "execute_code", map[string]any{"language": "python",
		"code":  "import sys\nprint(open('data/in.txt').read(), sys.stdin.read(), sys.argv[1:])\nopen('out.txt','w').write('made')\nsys.exit(3)",
		"stdin": "from stdin", "args": []string{"a", "b c"}, "files": map[string]string{"data/in.txt": "from a file"},
		"limits": map[string]any{"timeout_seconds": 10, "memory_mb": 128}}), &run)
	if run.Status != "error_runtime" || run.ExitCode != 3 || run.Stdout != "from a file from stdin ['a', 'b c']\n" ||
		run.OutputFiles["out.txt"].Content != "made" {
		t.Errorf("files, stdin, args: %+v", run)
	}
	// A failed compile and a timeout are results, not errors.
	ok(t, call(t, cs, "execute_code", map[string]any{"language": "c", "code": "int main(){return x;}"}), &run)
	if run.Status != "error_compile" || run.Compile == nil || !strings.Contains(run.Compile.Stderr, "x") {
		t.Errorf("compile error: %+v", run)
	}
	ok(t, call(t, cs, "execute_code", map[string]any{"language": "bash", "code": "sleep 5", "limits": map[string]any{"timeout_seconds": 0.3}}), &run)
	if run.Status != "timeout" {
		t.Errorf("timeout: %+v", run)
	}

	// Errors are tool errors that say what is wrong.
	toolError(t, call(t, cs, "execute_code", map[string]any{"language": "cobol-2099", "code": "x"}), "Unsupported language: 'cobol-2099'")
	toolError(t, call(t, cs, "execute_code", map[string]any{"language": "python", "code": "1", "limits": map[string]any{"memory_mb": 1 << 20}}), "limits.memory_mb")
	toolError(t, call(t, cs, "execute_code", map[string]any{"language": "python", "code": "1", "files": map[string]string{"../x": "y"}}), "invalid file name")
	toolError(t, call(t, cs, "execute_code", map[string]any{"language": "python", "code": "1", "version": "1.0"}), "version")
	toolError(t, call(t, cs, "execute_code", map[string]any{"language": "python", "code": "1", "isolation": "vm"}), `isolation "vm"`)
	toolError(t, call(t, cs, "execute_code", map[string]any{"language": "python"}), "code")

	var langs LanguagesOutput
	ok(t, call(t, cs, "list_languages", map[string]any{}), &langs)
	found := false
	for _, l := range langs.Languages {
		if l.Name == "python" && l.Version != "" && slices.Contains(l.Extensions, "py") {
			found = true
		}
	}
	if !found {
		t.Errorf("list_languages: %+v", langs)
	}

	// A session: files persist from one run to the next.
	var sess SessionOutput
	ok(t, call(t, cs, "create_session", map[string]any{"language": "python"}), &sess)
	if !strings.HasPrefix(sess.SessionID, "sess_") || sess.Language != "python" {
		t.Fatalf("create_session: %+v", sess)
	}
	ok(t, call(t, cs, "run_in_session", map[string]any{"session_id": sess.SessionID,
		"code": "import os\nos.makedirs('notes', exist_ok=True)\nopen('notes/a.txt','w').write('kept between runs')\nprint('wrote')"}), &run)
	if run.Status != "completed" || run.Stdout != "wrote\n" || run.SessionID != sess.SessionID {
		t.Fatalf("first run in session: %+v", run)
	}
	ok(t, call(t, cs, "run_in_session", map[string]any{"session_id": sess.SessionID, "language": "python",
		"code": "print(open('notes/a.txt').read())"}), &run)
	if run.Stdout != "kept between runs\n" {
		t.Errorf("second run in session: %+v", run)
	}
	var files SessionFilesOutput
	ok(t, call(t, cs, "list_session_files", map[string]any{"session_id": sess.SessionID}), &files)
	if !slices.Contains(files.Files, executor.SessionFile{Path: "notes/a.txt", Size: int64(len("kept between runs"))}) || files.BytesUsed == 0 {
		t.Errorf("list_session_files: %+v", files)
	}
	var file ReadFileOutput
	ok(t, call(t, cs, "read_session_file", map[string]any{"session_id": sess.SessionID, "path": "notes/a.txt"}), &file)
	if file.Content != "kept between runs" || file.Encoding != "utf-8" || file.Truncated || file.Size != 17 {
		t.Errorf("read_session_file: %+v", file)
	}
	toolError(t, call(t, cs, "read_session_file", map[string]any{"session_id": sess.SessionID, "path": "nope.txt"}), "has no file")
	toolError(t, call(t, cs, "read_session_file", map[string]any{"session_id": sess.SessionID, "path": "../../etc/passwd"}), "")
	toolError(t, call(t, cs, "run_in_session", map[string]any{"session_id": sess.SessionID, "language": "bash", "code": "ls"}), "is for python, not bash")
	var closed CloseOutput
	ok(t, call(t, cs, "close_session", map[string]any{"session_id": sess.SessionID}), &closed)
	if !closed.Closed {
		t.Errorf("close_session: %+v", closed)
	}
	if _, err := os.Stat(filepath.Join(testDataDir, "sessions", sess.SessionID)); !os.IsNotExist(err) {
		t.Errorf("the closed session's files are still there: %v", err)
	}
	toolError(t, call(t, cs, "run_in_session", map[string]any{"session_id": sess.SessionID, "code": "print(1)"}), "unknown session")
	toolError(t, call(t, cs, "close_session", map[string]any{"session_id": sess.SessionID}), "unknown session")
	toolError(t, call(t, cs, "create_session", map[string]any{"language": "cobol-2099"}), "Unsupported language")
}

// TestHTTP talks to /mcp of the HTTP server with the SDK's streamable
// client: the tools, auth, and sessions kept apart by API key.
func TestHTTP(t *testing.T) {
	url := serveAPI(t, testConfig(t))
	cs := connectHTTP(t, url, "key-one")
	exercise(t, cs)

	// The route checks the API key like every other.
	for key, want := range map[string]int{"": http.StatusUnauthorized, "wrong": http.StatusUnauthorized} {
		req, _ := http.NewRequest("POST", url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("key %q: %d, want %d", key, resp.StatusCode, want)
		}
	}

	// Another key does not see the session.
	var sess SessionOutput
	ok(t, call(t, cs, "create_session", map[string]any{"language": "bash"}), &sess)
	if sess.IdleTimeoutSeconds != api.DefaultConfig().SessionIdleSeconds {
		t.Errorf("idle timeout %g", sess.IdleTimeoutSeconds)
	}
	other := connectHTTP(t, url, "key-two")
	toolError(t, call(t, other, "list_session_files", map[string]any{"session_id": sess.SessionID}), "unknown session")
	toolError(t, call(t, other, "close_session", map[string]any{"session_id": sess.SessionID}), "unknown session")
	var files SessionFilesOutput
	ok(t, call(t, cs, "list_session_files", map[string]any{"session_id": sess.SessionID}), &files)
	ok(t, call(t, cs, "close_session", map[string]any{"session_id": sess.SessionID}), &CloseOutput{})

	// The key's rate limit holds, per run (the door of every transport): a
	// burst of 3 lets 3 runs in, whatever else the client asks (listing
	// languages runs nothing), and refuses the fourth as a tool error.
	slow := connectHTTP(t, url, "key-slow")
	for range 3 {
		ok(t, call(t, slow, "list_languages", map[string]any{}), &LanguagesOutput{})
	}
	for i := range 3 {
		var res RunResult
		ok(t, call(t, slow, "execute_code", map[string]any{"language": "bash", "code": "echo rated"}), &res)
		if res.Stdout != "rated\n" {
			t.Fatalf("run %d within the key's burst: %+v", i, res)
		}
	}
	toolError(t, call(t, slow, "execute_code", map[string]any{"language": "bash", "code": "echo rated"}), "rate limit of key slow exceeded")
}

// TestInMemory runs the same checks on the server New builds for stdio,
// over the SDK's in-memory transport, and checks that Close removes the
// sessions' files.
func TestInMemory(t *testing.T) {
	s := New(testConfig(t), local.New(testExec), quiet)
	st, ct := sdk.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, st) }()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	exercise(t, cs)
	var sess SessionOutput
	ok(t, call(t, cs, "create_session", map[string]any{"language": "python"}), &sess)
	if sess.IdleTimeoutSeconds != 0 {
		t.Errorf("a stdio session expires: %+v", sess)
	}
	ok(t, call(t, cs, "run_in_session", map[string]any{"session_id": sess.SessionID, "code": "open('f','w').write('x')"}), &RunResult{})
	dir := filepath.Join(testDataDir, "sessions", sess.SessionID)
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the session's files: %v", err)
	}
	cs.Close()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	s.Close()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("Close left the session's files: %v", err)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestStdioAnswersBeforeEOF gives every message and the end of input at
// once, as `printf ... | sandbox-run mcp` does: every call is answered
// before the server stops (the SDK's own stdio transport drops the answers
// still pending at EOF).
func TestStdioAnswersBeforeEOF(t *testing.T) {
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"execute_code","arguments":{"language":"python","code":"import time; time.sleep(0.5); print(6*7)"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"execute_code","arguments":{"language":"cobol-2099","code":"x"}}}`,
	}, "\n") + "\n"
	s := New(testConfig(t), local.New(testExec), quiet)
	defer s.Close()
	var out syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Run(ctx, Stdio(strings.NewReader(in), &out)); err != nil {
		t.Fatalf("Run: %v", err)
	}
	answers := map[float64]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var msg struct {
			ID     float64        `json:"id"`
			Result map[string]any `json:"result"`
		}
		if err := json.Unmarshal([]byte(line), &msg); err != nil {
			t.Fatalf("not JSON-RPC: %q", line)
		}
		answers[msg.ID] = msg.Result
	}
	if len(answers) != 4 {
		t.Fatalf("%d answers, want 4:\n%s", len(answers), out.String())
	}
	tools, _ := json.Marshal(answers[2])
	if !strings.Contains(string(tools), `"execute_code"`) {
		t.Errorf("tools/list: %s", tools)
	}
	if sc, _ := answers[3]["structuredContent"].(map[string]any); sc["stdout"] != "42\n" {
		t.Errorf("tools/call: %v", answers[3])
	}
	if answers[4]["isError"] != true {
		t.Errorf("cobol-2099: %v", answers[4])
	}
}

func TestCountMessages(t *testing.T) {
	cases := []struct {
		line          string
		calls, answer int
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, 1, 0},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, 0, 0},
		{`{"jsonrpc":"2.0","id":"a","result":{}}`, 0, 1},
		{`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`, 0, 0},
		{`[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"b"},{"jsonrpc":"2.0","id":2,"method":"c"}]`, 2, 0},
		{`[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":2,"error":{}}]`, 0, 2},
		{`not json`, 0, 0},
	}
	for _, c := range cases {
		if n := countMessages([]byte(c.line), true); n != c.calls {
			t.Errorf("%s: %d calls, want %d", c.line, n, c.calls)
		}
		if n := countMessages([]byte(c.line), false); n != c.answer {
			t.Errorf("%s: %d answers, want %d", c.line, n, c.answer)
		}
	}
}
