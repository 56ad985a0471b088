//go:build browser

// The browser test: a real server with an API key, the page in headless
// Chromium (chromedp), two runs through the UI. Run it with
//
//	go test -tags browser -run TestPlaygroundBrowser ./pkg/api/playground
//
// (.ci/run does, after installing Debian's chromium). UPDATE_SCREENSHOT=1
// also writes docs/playground.png. Without Chromium it skips, except under
// CI=true where it fails.
package playground_test

import (
	"bytes"
	"compress/flate"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sandbox-run/sandbox-run/pkg/api"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

func TestMain(m *testing.M) {
	// Sandboxes re-execute this binary as their PID 1.
	sandbox.Init()
	os.Exit(m.Run())
}

func chromium(t *testing.T) string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no Chromium (apt-get install chromium, or set CHROMIUM): the browser test must run in CI")
	}
	t.Skip("no Chromium found (apt-get install chromium, or set CHROMIUM)")
	return ""
}

const apiKey = "playground-test-key"

// startServer serves the API, with an API key, on a loopback port.
func startServer(t *testing.T) string {
	cfg := api.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.DataDir = t.TempDir()
	cfg.Workers = 2
	cfg.Keys = []api.APIKey{{ID: "browser", Key: apiKey, Scopes: []string{api.ScopeExecute}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	x, err := api.NewExecutor(cfg)
	if err != nil {
		t.Fatalf("cannot sandbox on this host: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- api.New(cfg, x, slog.New(slog.NewTextHandler(io.Discard, nil))).Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-done
		x.Engine().Close()
	})
	return "http://" + ln.Addr().String()
}

// permalink is the page's #z= fragment: deflate-raw, base64url.
func permalink(t *testing.T, v any) string {
	js, _ := json.Marshal(v)
	var b bytes.Buffer
	w, _ := flate.NewWriter(&b, flate.BestCompression)
	w.Write(js)
	w.Close()
	return "#z=" + base64.RawURLEncoding.EncodeToString(b.Bytes())
}

func unpermalink(t *testing.T, hash string) map[string]any {
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(hash, "#z="))
	if err != nil {
		t.Fatalf("permalink %q: %v", hash, err)
	}
	js, err := io.ReadAll(flate.NewReader(bytes.NewReader(raw)))
	if err != nil {
		t.Fatalf("permalink %q: %v", hash, err)
	}
	var v map[string]any
	if err := json.Unmarshal(js, &v); err != nil {
		t.Fatalf("permalink %q: %v", hash, err)
	}
	return v
}

// do runs an action that returns a value for its effect only.
func do[T any](a chromedp.Action[T]) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := a(ctx, t)
		return chromedp.Void{}, err
	}
}

func TestPlaygroundBrowser(t *testing.T) {
	exe := chromium(t)
	base := startServer(t)

	// The page itself, without a key.
	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(page, []byte("<html")) || resp.Header.Get("Content-Security-Policy") == "" {
		t.Fatalf("GET /: %d %.100s", resp.StatusCode, page)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox, // root in CI
		chromedp.WindowSize(1280, 800),
		chromedp.Flag("disable-gpu", true),
		chromedp.UserDataDir(t.TempDir()),
		// Chromium's singleton socket and scoped directories go to its
		// TMPDIR, and stay when the browser is killed at the end.
		chromedp.Env("TMPDIR="+t.TempDir()),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()

	// Script errors and CSP violations fail the test (a 401 answer, logged
	// by the network, is expected).
	var mu sync.Mutex
	var problems []string
	consoleCtx, stopConsole := context.WithCancel(ctx)
	defer stopConsole()
	messages := chromedp.Console(consoleCtx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() || m.Source == "security" || (m.Type == chromedp.ConsoleError && m.Source != "network") {
				mu.Lock()
				problems = append(problems, m.String())
				mu.Unlock()
			}
		}
	}()

	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	waitJS := func(expr string, d time.Duration) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(d), chromedp.WithPollingInterval(50*time.Millisecond))
	}
	eval := func(expr string) chromedp.Action[chromedp.Void] {
		return do(chromedp.Evaluate[any](expr))
	}
	get := func(expr string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return v
	}
	text := func(id string) string {
		return get(fmt.Sprintf("document.getElementById(%q).textContent", id))
	}
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			mu.Lock()
			t.Logf("page messages: %q", problems)
			mu.Unlock()
			t.Fatalf("%s: %v\nstatus %q, notice %q, output %q", what, err, text("status"), text("notice"), text("output"))
		}
	}
	change := func(id string) chromedp.Action[chromedp.Void] {
		return eval(fmt.Sprintf("document.getElementById(%q).dispatchEvent(new Event(\"change\"))", id))
	}

	// Auth is on: the page asks for the key, keeps it and lists the languages.
	step("load the page",
		chromedp.Navigate(base+"/"),
		chromedp.WaitReady(css(`body[data-ready="true"]`)),
		chromedp.WaitVisible(css(".cm-editor")))
	if notice := text("notice"); !strings.Contains(notice, "401") {
		t.Errorf("without a key the page says %q, want the 401", notice)
	}
	step("enter the API key",
		chromedp.SendKeys(css("#apikey"), apiKey),
		change("apikey"),
		chromedp.WaitReady(css(`#language option[value="python"]`)))

	// Run 1: Python reading stdin, writing stdout and stderr.
	code := "import sys\nname = sys.stdin.read().strip()\nprint(f\"Hello, {name.upper()}!\")\nprint(open(\"data.txt\").read())\nprint(\"a warning\", file=sys.stderr)\n"
	step("pick Python and enter code and stdin",
		chromedp.SetValue(css("#language"), "javascript"),
		change("language"),
		chromedp.SetValue(css("#language"), "python"),
		change("language"),
		eval(fmt.Sprintf("playground.setCode(%q)", code)),
		chromedp.SendKeys(css("#stdin"), "sandbox"),
		chromedp.Click(css("#files-box summary")),
		chromedp.Click(css("#add-file")),
		chromedp.SendKeys(css(".file-name"), "data.txt"),
		chromedp.SendKeys(css(".file-content"), "from a file"),
		// Syntax highlighting: Python's keywords and strings get token spans.
		waitJS(`document.querySelectorAll(".cm-line span").length >= 3`, 10*time.Second))
	if get(`String([...document.querySelectorAll(".cm-line span")].some((s) => getComputedStyle(s).color !== getComputedStyle(s.closest(".cm-line")).color))`) != "true" {
		t.Error("the code is not highlighted")
	}
	step("run",
		chromedp.Click(css("#run")),
		waitJS(`document.getElementById("status").textContent === "completed"`, 60*time.Second))
	if output := text("output"); !strings.Contains(output, "Hello, SANDBOX!") || !strings.Contains(output, "from a file") || !strings.Contains(output, "a warning") {
		t.Errorf("output %q", output)
	}
	metrics := text("metrics")
	for _, m := range []string{"time ", "CPU ", "memory ", "exit 0"} {
		if !strings.Contains(metrics, m) {
			t.Errorf("metrics %q lack %q", metrics, m)
		}
	}
	if stored := get(`localStorage.getItem("sandbox-run.api-key")`); stored != apiKey {
		t.Errorf("localStorage has the key %q", stored)
	}
	if s := get(`document.querySelector("#output .stderr").textContent`); s != "a warning\n" {
		t.Errorf("stderr span %q", s)
	}
	t.Logf("run 1: %s", metrics)

	if os.Getenv("UPDATE_SCREENSHOT") != "" {
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("..", "..", "..", "docs", "playground.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Share: the fragment holds the language, the code and stdin.
	step("share",
		chromedp.Click(css("#share")),
		waitJS(`location.hash.startsWith("#z=")`, 10*time.Second))
	if v := unpermalink(t, get("location.hash")); v["l"] != "python" || v["c"] != code || v["i"] != "sandbox" {
		t.Errorf("permalink holds %v", v)
	}

	// Run 2, from a permalink: output streams while it runs, then the
	// timeout ends it.
	loop := "print(\"started\", flush=True)\nwhile True:\n    pass\n"
	step("open a permalink",
		chromedp.Navigate(base+"/"+permalink(t, map[string]string{"l": "py", "c": loop})),
		waitJS(fmt.Sprintf("window.playground && playground.getCode() === %q", loop), 10*time.Second),
		chromedp.SetValue(css("#timeout"), "2"))
	start := time.Now()
	step("stream",
		chromedp.Click(css("#run")),
		waitJS(`document.getElementById("output").textContent === "started\n" && document.getElementById("status").textContent.startsWith("running")`, 30*time.Second))
	step("time out",
		waitJS(`document.getElementById("status").classList.contains("timeout")`, 60*time.Second))
	status, metrics := text("status"), text("metrics")
	if !strings.HasPrefix(status, "timeout") || time.Since(start) > 30*time.Second {
		t.Errorf("status %q after %v", status, time.Since(start))
	}
	if !strings.Contains(metrics, "time ") {
		t.Errorf("metrics %q", metrics)
	}
	t.Logf("run 2: %s, %s", status, metrics)

	// Run 3: a compile error shows the compiler's output.
	step("compile error",
		chromedp.SetValue(css("#language"), "c"),
		change("language"),
		eval(`playground.setCode("int main(void) { return undefined_thing; }\n")`),
		chromedp.Click(css("#run")),
		waitJS(`document.getElementById("status").classList.contains("error_compile")`, 60*time.Second))
	if c := text("compile"); !strings.Contains(c, "undefined_thing") || get(`String(document.getElementById("compile-box").hidden)`) != "false" {
		t.Errorf("compile output %q", c)
	}

	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Errorf("page: %s", p)
	}
}
