package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/api"
	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
	"github.com/sandbox-run/sandbox-run/pkg/local"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

func TestMain(m *testing.M) {
	agent.Main()   // a live sandbox's agent is this test binary (sandbox_test.go)
	sandbox.Init() // the sandboxes' PID 1 is this test binary
	dir, err := os.MkdirTemp("", "sandbox-run-client-test-")
	if err != nil {
		panic(err)
	}
	dataDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// dataDir holds the test servers' sessions.
var dataDir string

// newExecutor builds a real executor with sessions in a temporary
// directory and the toolchain caches the other tests share.
func newExecutor(t *testing.T) *executor.Executor {
	t.Helper()
	home, _ := os.UserHomeDir()
	x, err := executor.New(executor.Config{DataDir: dataDir, CacheDir: filepath.Join(home, ".cache", "sandbox-run-test", "cache"), Intercept: local.Intercept})
	if err != nil {
		t.Fatalf("this host cannot sandbox: %v", err)
	}
	return x
}

// serve runs a real API server on 127.0.0.1 until the test ends and
// returns its URL.
func serve(t *testing.T, x local.Executor, configure func(*api.Config)) string {
	t.Helper()
	cfg := api.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.DataDir = serverDataDir(t)
	cfg.ShutdownGraceSeconds = 1
	if configure != nil {
		configure(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	go func() { done <- api.New(cfg, local.New(x), log).Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

// serverDataDir is a fresh data directory for one server (its job store
// and uploaded files), inside the test binary's temporary directory.
func serverDataDir(t *testing.T) string {
	dir, err := os.MkdirTemp(dataDir, "server-")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

var (
	sharedURL string
	sharedX   *executor.Executor
)

// server is one open server shared by the tests that need no special
// configuration.
func server(t *testing.T) string {
	if sharedURL == "" {
		sharedX = newExecutor(t)
		cfg := api.DefaultConfig()
		cfg.Addr = "127.0.0.1:0"
		cfg.DataDir = serverDataDir(t)
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", cfg.Addr)
		if err != nil {
			t.Fatal(err)
		}
		go api.New(cfg, local.New(sharedX), slog.New(slog.NewTextHandler(io.Discard, nil))).Serve(context.Background(), ln)
		sharedURL = "http://" + ln.Addr().String()
	}
	return sharedURL
}

func TestExecuteSeedExample(t *testing.T) {
	c := New(server(t) + "/") // a trailing slash is fine
	res, err := c.Execute(context.Background(), &api.ExecuteRequest{
		Language:  "python",
		Code:      "print(input())\nprint(open('data.txt').read())",
		InputData: "Hello Sandbox!",
		Files:     map[string]executor.FileData{"data.txt": executor.FileData("This is some data for the script.")},
		Limits:    api.Limits{TimeoutSeconds: 5, MaxMemoryMB: 256},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != executor.StatusCompleted || res.Stdout != "Hello Sandbox!\nThis is some data for the script.\n" || res.ExitCode != 0 {
		t.Fatalf("result %+v", res)
	}
	if !strings.HasPrefix(res.ExecutionID, "exec_") || res.Language != "python" || res.Version == "" {
		t.Errorf("result %+v", res)
	}

	// Binary files travel as base64 both ways; args, env and output
	// patterns arrive.
	bin := executor.FileData{0xff, 0x00, 0xfe}
	res, err = c.Execute(context.Background(), &api.ExecuteRequest{
		Language:    "bash",
		Code:        `cp in.bin out.bin; printf '%s %s' "$1" "$K" > note.txt; echo skip > other.txt`,
		Files:       map[string]executor.FileData{"in.bin": bin},
		Args:        []string{"arg one"},
		Env:         map[string]string{"K": "v"},
		OutputFiles: []string{"out.*", "note.txt"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.OutputFiles["out.bin"]) != string(bin) || string(res.OutputFiles["note.txt"]) != "arg one v" || len(res.OutputFiles) != 2 {
		t.Errorf("output files %q", res.OutputFiles)
	}
}

func TestLanguagesAndHealth(t *testing.T) {
	c := New(server(t))
	if err := c.Health(context.Background()); err != nil {
		t.Fatal(err)
	}
	langs, err := c.Languages(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]api.LanguageInfo{}
	for _, l := range langs {
		found[l.Name] = l
	}
	for _, name := range []string{"python", "javascript", "go", "rust", "java", "bash", "c", "cpp"} {
		if l, ok := found[name]; !ok || l.Version == "" || len(l.Extensions) == 0 {
			t.Errorf("%s: %+v", name, l)
		}
	}
	if py := found["python"]; py.Compiled || py.DefaultLimits.TimeoutSeconds != 30 || py.Extensions[0] != "py" {
		t.Errorf("python: %+v", py)
	}
	if !found["c"].Compiled {
		t.Error("c is not compiled")
	}
}

func TestBadRequest(t *testing.T) {
	c := New(server(t))
	res, err := c.Execute(context.Background(), &api.ExecuteRequest{Language: "cobol-2099", Code: "DISPLAY 'X'."})
	var e *Error
	if !errors.As(err, &e) || res != nil {
		t.Fatalf("got %v, %v", res, err)
	}
	if e.StatusCode != http.StatusBadRequest || !strings.Contains(e.Message, "Unsupported language: 'cobol-2099'") || e.RetryAfter != 0 {
		t.Errorf("error %+v", e)
	}
	if !strings.Contains(e.Error(), "400 Bad Request: Unsupported language") || IsRetryable(err) {
		t.Errorf("Error() %q", e.Error())
	}
	_, err = c.Execute(context.Background(), &api.ExecuteRequest{Language: "python", Code: "1", Limits: api.Limits{TimeoutSeconds: 1e6}})
	if !errors.As(err, &e) || e.StatusCode != 400 || !strings.Contains(e.Message, "timeout_seconds") {
		t.Errorf("above the maximum: %v", err)
	}
}

func TestAuth(t *testing.T) {
	url := serve(t, newExecutor(t), func(cfg *api.Config) {
		cfg.Keys = []api.APIKey{{ID: "tester", Key: "s3cret", Scopes: []string{api.ScopeExecute}}}
	})
	req := &api.ExecuteRequest{Language: "bash", Code: "echo ok"}
	var e *Error
	for key, msg := range map[string]string{"": "missing API key", "wrong": "invalid API key"} {
		_, err := New(url, WithAPIKey(key)).Execute(context.Background(), req)
		if !errors.As(err, &e) || e.StatusCode != http.StatusUnauthorized || !strings.Contains(e.Message, msg) {
			t.Errorf("key %q: %v", key, err)
		}
		if _, err := New(url, WithAPIKey(key)).Languages(context.Background()); !errors.As(err, &e) || e.StatusCode != 401 {
			t.Errorf("languages with key %q: %v", key, err)
		}
	}
	c := New(url, WithAPIKey("s3cret"), WithHTTPClient(&http.Client{}))
	res, err := c.Execute(context.Background(), req)
	if err != nil || res.Stdout != "ok\n" {
		t.Fatalf("with the key: %v %+v", err, res)
	}
	if _, err := c.Languages(context.Background()); err != nil {
		t.Errorf("languages with the key: %v", err)
	}
	if err := New(url).Health(context.Background()); err != nil {
		t.Errorf("health is public: %v", err)
	}
}

// TestBusyAndCancel fills the only worker, expects 503 with Retry-After,
// then cancels the running request and expects the server to kill it and
// take work again.
func TestBusyAndCancel(t *testing.T) {
	url := serve(t, newExecutor(t), func(cfg *api.Config) { cfg.Workers, cfg.Queue = 1, 0 })
	c := New(url)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type answer struct {
		res *executor.Result
		err error
	}
	slow := make(chan answer, 1)
	go func() {
		res, err := c.Execute(ctx, &api.ExecuteRequest{Language: "bash", Code: "sleep 60", Limits: api.Limits{TimeoutSeconds: 120}})
		slow <- answer{res, err}
	}()
	waitInFlight(t, url, 1)

	res, err := c.Execute(context.Background(), &api.ExecuteRequest{Language: "bash", Code: "echo no"})
	var e *Error
	if !errors.As(err, &e) || res != nil {
		t.Fatalf("busy: %v %v", res, err)
	}
	if e.StatusCode != http.StatusServiceUnavailable || e.RetryAfter != time.Second || !strings.Contains(e.Message, "workers are busy") || !IsRetryable(err) {
		t.Errorf("busy: %+v", e)
	}

	start := time.Now()
	cancel()
	select {
	case a := <-slow:
		if !errors.Is(a.err, context.Canceled) || a.res != nil {
			t.Errorf("cancelled: %v %v", a.res, a.err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("Execute returned %s after the cancel", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Execute did not return after the cancel")
	}
	waitInFlight(t, url, 0) // the server killed the sandbox
	res, err = c.Execute(context.Background(), &api.ExecuteRequest{Language: "bash", Code: "echo again"})
	if err != nil || res.Stdout != "again\n" {
		t.Errorf("after the cancel: %v %+v", err, res)
	}
}

func waitInFlight(t *testing.T, url string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var ready struct {
			InFlight int `json:"in_flight"`
		}
		if resp, err := http.Get(url + "/readyz"); err == nil {
			json.NewDecoder(resp.Body).Decode(&ready)
			resp.Body.Close()
			if ready.InFlight == n {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("in_flight is not %d after 10s", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// setupFailure is an executor whose sandbox cannot be built.
type setupFailure struct{ *executor.Executor }

func (setupFailure) Execute(context.Context, *executor.Request) (*executor.Result, error) {
	return &executor.Result{ExecutionID: "exec_setup", Outcome: executor.Outcome{Status: executor.StatusSetupError, ExitCode: -1},
		Language: "python", OutputFiles: executor.OutputFiles{}, Error: "cgroup: no space left"}, nil
}

func TestSetupErrorReturnsResultAndError(t *testing.T) {
	url := serve(t, setupFailure{newExecutor(t)}, nil)
	res, err := New(url).Execute(context.Background(), &api.ExecuteRequest{Language: "python", Code: "1"})
	var e *Error
	if !errors.As(err, &e) || res == nil {
		t.Fatalf("got %v, %v", res, err)
	}
	if e.StatusCode != 500 || e.ExecutionID != "exec_setup" || e.Message != "cgroup: no space left" {
		t.Errorf("error %+v", e)
	}
	if res.Status != executor.StatusSetupError || res.ExecutionID != "exec_setup" {
		t.Errorf("result %+v", res)
	}
}

// TestOtherAnswers covers what a proxy in front of the server may say.
func TestOtherAnswers(t *testing.T) {
	date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz":
			w.Header().Set("Retry-After", date)
			http.Error(w, "upstream down", http.StatusBadGateway)
		default:
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer ts.Close()
	c := New(ts.URL)
	var e *Error
	if err := c.Health(context.Background()); !errors.As(err, &e) || e.StatusCode != 502 || e.Message != "upstream down" ||
		e.RetryAfter < 85*time.Second || e.RetryAfter > 90*time.Second {
		t.Errorf("502: %v", err)
	}
	if _, err := c.Languages(context.Background()); !errors.As(err, &e) || e.StatusCode != 429 || e.Message != "Too Many Requests" {
		t.Errorf("429: %v", err)
	}
	for v, want := range map[string]time.Duration{"": 0, "3": 3 * time.Second, "0": 0, "-1": 0, "soon": 0, "99999999": 24 * time.Hour} {
		if got := parseRetryAfter(v, time.Now()); got != want {
			t.Errorf("Retry-After %q: %s, want %s", v, got, want)
		}
	}
}

// TestStreamErrorEvent: the error event that ends a stream comes back as
// an *Error with the status it gives (200 from a server that gives none).
func TestStreamErrorEvent(t *testing.T) {
	for _, c := range []struct {
		data   string
		status int
	}{
		{`{"error":"execution canceled","status":503,"execution_id":"exec_1"}`, 503},
		{`{"error":"execution canceled","execution_id":"exec_1"}`, 200},
	} {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "event: stdout\ndata: {\"type\":\"stdout\",\"offset\":0,\"data\":\"a\"}\n\nevent: error\ndata: %s\n\n", c.data)
		}))
		var got []string
		_, err := New(ts.URL).ExecuteStream(context.Background(), &wire.ExecuteRequest{Language: "python", Code: "x"}, func(ev wire.Event) { got = append(got, ev.Data) })
		ts.Close()
		var e *Error
		if !errors.As(err, &e) || e.StatusCode != c.status || e.Message != "execution canceled" || e.ExecutionID != "exec_1" || len(got) != 1 {
			t.Errorf("%s: %v (%+v), events %q", c.data, err, e, got)
		}
	}
}

// TestProcessStreamErrorEvent: a process's stream that ends with an error
// event (the server shuts down) is an *Error of its status, after the
// output before it; a stream the server refuses is its answer's *Error.
func TestProcessStreamErrorEvent(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/processes/7/events") || r.Header.Get("Accept") != "text/event-stream" {
			http.Error(w, `{"error":"no such process"}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: start\ndata: {\"pid\":7}\n\n: keepalive\n\nevent:stdout\ndata: {\"data\":\"a\"}\n\n"+
			"event: error\ndata: {\"error\":\"the server is shutting down\",\"status\":503}\n\n")
	}))
	defer ts.Close()
	var out []byte
	_, err := New(ts.URL).FollowProcess(context.Background(), "sbx", 7, func(b []byte) { out = append(out, b...) }, nil)
	var e *Error
	if !errors.As(err, &e) || e.StatusCode != 503 || e.Message != "the server is shutting down" || string(out) != "a" {
		t.Errorf("%v (%+v), output %q", err, e, out)
	}
	if _, err := New(ts.URL).FollowProcess(context.Background(), "sbx", 8, nil, nil); !IsNotFound(err) {
		t.Errorf("a refused stream: %v", err)
	}
}

func TestUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	err = New(url).Health(context.Background())
	var e *Error
	if err == nil || errors.As(err, &e) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("got %v", err)
	}
}
