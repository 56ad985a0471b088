//go:build browser

// The browser test: a real server with an API key, the page in headless
// Chromium (chromedp), runs through the UI: stdin and files, an
// interactive input() answered in the input line, args, a timeout, a
// compile error, the version picker, the examples menu, the draft kept
// across a reload, and dark mode. Run it with
//
//	go test -tags browser -run TestPlaygroundBrowser ./pkg/api/playground
//
// (.ci/run does, after installing Debian's chromium). Screenshots go to the
// test's temporary directory, or to PLAYGROUND_SCREENSHOTS if set;
// UPDATE_SCREENSHOT=1 also writes docs/playground.png. Without Chromium it
// skips, except under CI=true where it fails.
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
	"github.com/chromedp/chromedp/kb"

	"github.com/sandbox-run/sandbox-run/pkg/api"
	"github.com/sandbox-run/sandbox-run/pkg/local"
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
	x, err := local.NewExecutor(cfg)
	if err != nil {
		t.Fatalf("cannot sandbox on this host: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- api.New(cfg, local.New(x), slog.New(slog.NewTextHandler(io.Discard, nil))).Serve(ctx, ln)
	}()
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

// languageVersions returns the available versions of each language, and
// the default's, as GET /api/sandbox/languages lists them.
func languageVersions(t *testing.T, base string) (map[string][]string, map[string]string) {
	req, _ := http.NewRequest("GET", base+"/api/sandbox/languages", nil)
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var langs []struct {
		Name     string
		Versions []struct {
			Version            string
			Available, Default bool
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&langs); err != nil {
		t.Fatalf("languages: %d %v", resp.StatusCode, err)
	}
	all, def := map[string][]string{}, map[string]string{}
	for _, l := range langs {
		for _, v := range l.Versions {
			if v.Available {
				all[l.Name] = append(all[l.Name], v.Version)
			}
			if v.Default {
				def[l.Name] = v.Version
			}
		}
	}
	return all, def
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
	// setField sets a field's value as typing would (chromedp.SetValue
	// fails when the page changes the value in its handlers, as the
	// examples menu does, or when the value is empty).
	setField := func(id, v string) chromedp.Action[chromedp.Void] {
		return eval(fmt.Sprintf(`(() => {
			const el = document.getElementById(%q);
			el.value = %q;
			el.dispatchEvent(new Event("input", {bubbles: true}));
			el.dispatchEvent(new Event("change", {bubbles: true}));
		})()`, id, v))
	}
	statusIs := func(s string) chromedp.Action[chromedp.Void] {
		return waitJS(fmt.Sprintf("document.getElementById(\"status\").textContent === %q", s), 60*time.Second)
	}
	shots := os.Getenv("PLAYGROUND_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	shot := func(name string) []byte {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(shots, name+".png")
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot %s", p)
		return png
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

	// The version picker lists Python's installed versions, the default
	// selected; a version picked is the one that runs.
	versions, defaults := languageVersions(t, base)
	py := versions["python"]
	if n := get(`String(document.querySelectorAll("#version option").length)`); n != fmt.Sprint(len(py)) || len(py) == 0 {
		t.Errorf("the version picker has %s options, want Python's %d versions %q", n, len(py), py)
	}
	if v := get(`document.getElementById("version").value`); v != defaults["python"] {
		t.Errorf("version %q selected, want the default %q", v, defaults["python"])
	}
	if len(py) > 1 {
		other := py[0]
		if other == defaults["python"] {
			other = py[1]
		}
		step("run another Python version",
			chromedp.SetValue(css("#version"), other),
			change("version"),
			eval(`playground.setCode("import sys\nprint(sys.version.split()[0])\n")`),
			chromedp.Click(css("#run")),
			statusIs("completed"),
			chromedp.SetValue(css("#version"), defaults["python"]),
			change("version"))
		if out := text("output"); !strings.HasPrefix(out, other) {
			t.Errorf("Python %s printed %q", other, out)
		}
	} else {
		t.Logf("one Python version installed (%q): picking another is not tested", py)
	}
	t.Logf("Python versions %q, default %s", py, defaults["python"])

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

	shot("1-stdin-files")

	// Share: the fragment holds the language, the code and stdin.
	step("share",
		chromedp.Click(css("#share")),
		waitJS(`location.hash.startsWith("#z=")`, 10*time.Second))
	if v := unpermalink(t, get("location.hash")); v["l"] != "python" || v["c"] != code || v["i"] != "sandbox" {
		t.Errorf("permalink holds %v", v)
	}

	// Run 2: interactive. The program waits on input(): the line typed in
	// the input box reaches it while it runs, then more input and EOF.
	interactive := "import sys\nname = input(\"name? \")\nprint(f\"Hello, {name}!\", flush=True)\nprint(\"rest:\", sys.stdin.read().upper())\n"
	step("start an interactive run",
		chromedp.Click(css(".file button")), // data.txt goes
		chromedp.Click(css("#files-box summary")),
		setField("stdin", ""),
		eval(fmt.Sprintf("playground.setCode(%q)", interactive)),
		chromedp.Click(css("#run")),
		waitJS(`document.getElementById("output").textContent === "name? " && !document.getElementById("term-input").disabled`, 60*time.Second))
	shot("2a-waiting-for-input")
	step("answer input()",
		chromedp.SendKeys(css("#term-input"), "sandbox"+kb.Enter),
		waitJS(`document.getElementById("output").textContent.includes("Hello, sandbox!")`, 30*time.Second))
	if status := text("status"); !strings.HasPrefix(status, "running") {
		t.Errorf("status %q after the first line, want the program still waiting for input", status)
	}
	step("more input, then EOF",
		chromedp.SendKeys(css("#term-input"), "more"+kb.Enter),
		chromedp.Click(css("#term-eof")),
		statusIs("completed"))
	if out, want := text("output"), "name? sandbox\nHello, sandbox!\nmore\nrest: MORE\n\n"; out != want {
		t.Errorf("interactive output %q, want %q", out, want)
	}
	if typed := get(`[...document.querySelectorAll("#output .stdin")].map((s) => s.textContent).join("|")`); typed != "sandbox\n|more\n" {
		t.Errorf("the typed lines are shown as %q", typed)
	}
	if get(`String(document.getElementById("term-input").disabled)`) != "true" {
		t.Error("the input line is still live after the run")
	}
	png := shot("2-interactive")
	if os.Getenv("UPDATE_SCREENSHOT") != "" {
		if err := os.WriteFile(filepath.Join("..", "..", "..", "docs", "playground.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Run 3: args, split as a shell would, reach the program.
	step("args",
		setField("args", `one "two words" 'three'`),
		eval(`playground.setCode("import sys\nprint(sys.argv[1:])\n")`),
		chromedp.Click(css("#run")),
		statusIs("completed"))
	if out := text("output"); out != "['one', 'two words', 'three']\n" {
		t.Errorf("args output %q", out)
	}
	if v := get(`JSON.stringify(playground.splitArgs("a\\ b 'c d' \"e \\\"f\\\"\" '' g"))`); v != `["a b","c d","e \"f\"","","g"]` {
		t.Errorf("splitArgs: %s", v)
	}

	// Stop kills a run waiting for input.
	step("stop a run",
		eval(`playground.setCode("input()\n")`),
		chromedp.Click(css("#run")),
		waitJS(`!document.getElementById("term-input").disabled`, 60*time.Second),
		chromedp.Click(css("#run")),
		statusIs("stopped"))

	// Run 4, from a permalink: output streams while it runs, then the
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

	// Run 5: a compile error shows the compiler's output, its errors
	// marked, and no metrics of a run that never happened.
	step("compile error",
		chromedp.SetValue(css("#language"), "c"),
		change("language"),
		eval(`playground.setCode("int main(void) { return undefined_thing; }\n")`),
		chromedp.Click(css("#run")),
		waitJS(`document.getElementById("status").classList.contains("error_compile")`, 60*time.Second))
	if c := text("compile"); !strings.Contains(c, "undefined_thing") || get(`String(document.getElementById("compile-box").hidden)`) != "false" ||
		get(`String(document.getElementById("compile-box").open)`) != "true" {
		t.Errorf("compile output %q", c)
	}
	if e := get(`[...document.querySelectorAll("#compile .c-err")].map((s) => s.textContent).join("")`); !strings.Contains(e, "undefined_thing") {
		t.Errorf("the compile error is not marked: %q", e)
	}
	if s, m, out := text("status"), text("metrics"), text("output"); s != "compile error" || m != "" || strings.Contains(out, "exit") {
		t.Errorf("compile error shown as status %q, metrics %q, output %q", s, m, out)
	}
	shot("3-compile-error")

	// The examples menu: hello world, input, and a compile error for
	// compiled languages.
	menus := get(`(() => {
		const sel = document.getElementById("language"), menus = {};
		for (const l of ["python", "javascript", "c", "cpp", "go", "rust", "java", "bash"]) {
			if (!sel.querySelector('option[value="' + l + '"]')) continue;
			sel.value = l;
			sel.dispatchEvent(new Event("change"));
			menus[l] = [...document.querySelectorAll("#example option")].map((o) => o.value).filter(Boolean).join(",");
		}
		return JSON.stringify(menus);
	})()`)
	var examples map[string]string
	if err := json.Unmarshal([]byte(menus), &examples); err != nil {
		t.Fatalf("examples %q: %v", menus, err)
	}
	for l, m := range examples {
		want := []string{"Hello, world", "Read input", "Arguments"}
		if l != "python" && l != "javascript" && l != "bash" {
			want = append(want, "Compile error")
		}
		for _, w := range want {
			if !strings.Contains(m, w) {
				t.Errorf("%s examples %q lack %q", l, m, w)
			}
		}
	}
	if len(examples) < 3 {
		t.Errorf("examples for %v only", examples)
	}
	step("load an example",
		chromedp.SetValue(css("#language"), "python"),
		change("language"),
		setField("example", "Read input"))
	if c := get("playground.getCode()"); !strings.Contains(c, "input(") {
		t.Errorf("the Read input example is %q", c)
	}

	// The draft (language, code, stdin, args; per language) survives a reload.
	draft := "import sys\nprint('draft kept', sys.argv[1:], sys.stdin.read())\n"
	step("keep a draft across a reload",
		eval(fmt.Sprintf("playground.setCode(%q)", draft)),
		setField("stdin", "kept stdin"),
		setField("args", `a "b c"`),
		chromedp.Reload(),
		chromedp.WaitReady(css(`body[data-ready="true"]`)),
		waitJS(fmt.Sprintf("playground.getCode() === %q", draft), 10*time.Second))
	if l, i, a, h := get(`document.getElementById("language").value`), get(`document.getElementById("stdin").value`),
		get(`document.getElementById("args").value`), get("location.hash"); l != "python" || i != "kept stdin" || a != `a "b c"` || h != "" {
		t.Errorf("after a reload: language %q, stdin %q, args %q, hash %q", l, i, a, h)
	}
	step("the C draft too",
		chromedp.SetValue(css("#language"), "c"),
		change("language"),
		waitJS(`playground.getCode().includes("undefined_thing")`, 10*time.Second),
		chromedp.SetValue(css("#language"), "python"),
		change("language"))

	// Dark mode follows the system's preference.
	light := get(`getComputedStyle(document.body).backgroundColor + " " + getComputedStyle(document.querySelector(".cm-editor")).backgroundColor`)
	step("dark mode",
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			return tg.Call(ctx, "Emulation.setEmulatedMedia", map[string]any{
				"features": []map[string]string{{"name": "prefers-color-scheme", "value": "dark"}},
			}, nil)
		}),
		waitJS(`matchMedia("(prefers-color-scheme: dark)").matches`, 10*time.Second),
		chromedp.Click(css("#run")),
		statusIs("completed"))
	darkBg := get(`getComputedStyle(document.body).backgroundColor + " " + getComputedStyle(document.querySelector(".cm-editor")).backgroundColor`)
	if darkBg == light {
		t.Errorf("the same colours in dark mode: %s", darkBg)
	}
	if out := text("output"); out != "draft kept ['a', 'b c'] kept stdin\n" {
		t.Errorf("the draft's run printed %q", out)
	}
	t.Logf("background light %s, dark %s", light, darkBg)
	shot("4-dark")

	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Errorf("page: %s", p)
	}
}
