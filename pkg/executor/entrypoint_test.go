package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const pyCalc = `import sys
print('{"return_value": 1}')
print("loaded", file=sys.stderr)

class Calc:
    def add(self, a, b):
        print("adding", a, b)
        return {"sum": a + b}

    def boom(self):
        raise ValueError("bad thing")

    def weird(self):
        return object()

    def nan(self):
        return float("nan")

    async def later(self, x):
        return x * 2

def greet(name, punctuation="!"):
    return "hello " + name + punctuation

if __name__ == "__main__":
    print("MAIN BLOCK RAN")
`

func call(t *testing.T, lang, code string, ep *Entrypoint) *Result {
	t.Helper()
	return execute(t, &Request{Language: lang, Code: []byte(code), Entrypoint: ep})
}

func params(s string) json.RawMessage { return json.RawMessage(s) }

func TestEntrypointPythonMethod(t *testing.T) {
	res := call(t, "python", pyCalc, &Entrypoint{ClassName: "Calc", MethodName: "add", MethodParams: params(`{"a": 2, "b": 40}`)})
	if res.Status != StatusCompleted || string(res.ReturnValue) != `{"sum":42}` || res.Exception != nil {
		t.Fatalf("add: return %s, %s", res.ReturnValue, describe(res))
	}
	// The forged line and the method's own output come back as output, not
	// as the return value; the __main__ block did not run.
	if !strings.Contains(res.Stdout, `{"return_value": 1}`) || !strings.Contains(res.Stdout, "adding 2 40") ||
		strings.Contains(res.Stdout, "MAIN BLOCK RAN") || !strings.Contains(res.Stderr, "loaded") {
		t.Errorf("output: stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	if len(res.OutputFiles) != 0 {
		t.Errorf("output files: %v", keys(res.OutputFiles))
	}
	res = call(t, "python", pyCalc, &Entrypoint{ClassName: "Calc", MethodName: "later", MethodParams: params(`{"x": 21}`)})
	if string(res.ReturnValue) != "42" {
		t.Errorf("async method: return %s, %s", res.ReturnValue, describe(res))
	}
}

func TestEntrypointPythonFunction(t *testing.T) {
	res := call(t, "python", pyCalc, &Entrypoint{Function: "greet", Params: params(`{"name": "sandbox"}`)})
	if res.Status != StatusCompleted || string(res.ReturnValue) != `"hello sandbox!"` {
		t.Fatalf("greet: return %s, %s", res.ReturnValue, describe(res))
	}
	// None comes back as null, present.
	res = call(t, "python", "def f():\n    pass\n", &Entrypoint{Function: "f"})
	if res.Status != StatusCompleted || string(res.ReturnValue) != "null" {
		t.Fatalf("None: return %q, %s", res.ReturnValue, describe(res))
	}
}

func TestEntrypointPythonException(t *testing.T) {
	res := call(t, "python", pyCalc, &Entrypoint{ClassName: "Calc", MethodName: "boom"})
	e := res.Exception
	if res.Status != StatusRuntimeError || e == nil || e.Type != "ValueError" || e.Message != "bad thing" ||
		!strings.Contains(e.Traceback, "Traceback") || !strings.Contains(e.Traceback, "in boom") ||
		strings.Contains(e.Traceback, "runner") || res.ReturnValue != nil || res.Error != "" {
		t.Fatalf("boom: exception %+v, %s", e, describe(res))
	}
	// A wrong parameter is the call's TypeError; a missing class an
	// AttributeError; an error at import time is reported the same way.
	res = call(t, "python", pyCalc, &Entrypoint{ClassName: "Calc", MethodName: "add", MethodParams: params(`{"a": 1, "c": 2}`)})
	if res.Exception == nil || res.Exception.Type != "TypeError" {
		t.Errorf("bad params: %+v, %s", res.Exception, describe(res))
	}
	res = call(t, "python", pyCalc, &Entrypoint{ClassName: "Nope", MethodName: "add"})
	if res.Exception == nil || res.Exception.Type != "AttributeError" {
		t.Errorf("no class: %+v, %s", res.Exception, describe(res))
	}
	res = call(t, "python", "import nosuchmodule\n", &Entrypoint{Function: "f"})
	if res.Exception == nil || res.Exception.Type != "ModuleNotFoundError" || !strings.Contains(res.Exception.Traceback, "main.py") {
		t.Errorf("import error: %+v, %s", res.Exception, describe(res))
	}
}

func TestEntrypointNotSerializable(t *testing.T) {
	for _, m := range []string{"weird", "nan"} {
		res := call(t, "python", pyCalc, &Entrypoint{ClassName: "Calc", MethodName: m})
		if res.Status != StatusRuntimeError || res.Exception == nil || !strings.Contains(res.Exception.Message, "serializable") || res.ReturnValue != nil {
			t.Fatalf("%s: %+v, %s", m, res.Exception, describe(res))
		}
		if m == "weird" && !strings.Contains(res.Exception.Message, "<object object at") {
			t.Errorf("no repr: %q", res.Exception.Message)
		}
	}
	res := call(t, "javascript", "function f() { const a = {}; a.self = a; return a; }\n", &Entrypoint{Function: "f"})
	if res.Exception == nil || !strings.Contains(res.Exception.Message, "serializable") || !strings.Contains(res.Exception.Message, "Circular") {
		t.Errorf("js circular: %+v, %s", res.Exception, describe(res))
	}
}

// TestEntrypointForgery: nothing the code prints, nor an early exit, makes a
// return value.
func TestEntrypointForgery(t *testing.T) {
	code := "import sys\nprint('{\"return_value\": 1}')\nprint('{\"ok\": true, \"value\": 1}')\nclass C:\n    def m(self):\n        return 2\n"
	res := call(t, "python", code, &Entrypoint{ClassName: "C", MethodName: "m"})
	if string(res.ReturnValue) != "2" || res.Status != StatusCompleted {
		t.Fatalf("return %s, %s", res.ReturnValue, describe(res))
	}
	res = call(t, "python", "import os\nos._exit(0)\n", &Entrypoint{Function: "f"})
	if res.Status != StatusRuntimeError || res.ReturnValue != nil || !strings.Contains(res.Error, "before the entry point returned") {
		t.Errorf("exit: return %s, %s", res.ReturnValue, describe(res))
	}
}

const jsCode = `
console.log('{"return_value": 1}');
class Calc {
  add(a, b) { console.log("adding", a, b); return {sum: a + b}; }
  opts({a, b}) { return a * b; }
  boom() { throw new RangeError("too far"); }
  async later(x) { await new Promise((r) => setTimeout(r, 10)); return x * 2; }
}
function greet(name, punctuation = "!") { return "hello " + name + punctuation; }
const arrow = async (n) => [n, n];
if (require.main === module) console.log("MAIN BLOCK RAN");
`

func TestEntrypointJavaScript(t *testing.T) {
	cases := []struct {
		name, code string
		ep         *Entrypoint
		want       string
	}{
		{"class method", jsCode, &Entrypoint{ClassName: "Calc", MethodName: "add", MethodParams: params(`{"a": 2, "b": 40}`)}, `{"sum":42}`},
		{"object parameter", jsCode, &Entrypoint{ClassName: "Calc", MethodName: "opts", MethodParams: params(`{"a": 6, "b": 7}`)}, `42`},
		{"async method", jsCode, &Entrypoint{ClassName: "Calc", MethodName: "later", MethodParams: params(`{"x": 21}`)}, `42`},
		{"function", jsCode, &Entrypoint{Function: "greet", Params: params(`{"name": "sandbox"}`)}, `"hello sandbox!"`},
		{"async arrow", jsCode, &Entrypoint{Function: "arrow", Params: params(`{"n": 1}`)}, `[1,1]`},
		{"module.exports", "module.exports = { twice: (x) => x * 2 };", &Entrypoint{Function: "twice", Params: params(`{"x": 4}`)}, `8`},
		{"exports.x", "exports.Box = class { get(k) { return {k}; } };", &Entrypoint{ClassName: "Box", MethodName: "get", MethodParams: params(`{"k": "v"}`)}, `{"k":"v"}`},
		{"exported class", "class K { m() { return 1; } }\nmodule.exports = K;", &Entrypoint{ClassName: "K", MethodName: "m"}, `1`},
		{"undefined", "function f() {}", &Entrypoint{Function: "f"}, `null`},
	}
	for _, c := range cases {
		res := call(t, "javascript", c.code, c.ep)
		if res.Status != StatusCompleted || string(res.ReturnValue) != c.want {
			t.Errorf("%s: return %s, want %s; %s exception %+v", c.name, res.ReturnValue, c.want, describe(res), res.Exception)
		}
		if c.code == jsCode && (strings.Contains(res.Stdout, "MAIN BLOCK RAN") || !strings.Contains(res.Stdout, `{"return_value": 1}`)) {
			t.Errorf("%s: stdout %q", c.name, res.Stdout)
		}
	}
	res := call(t, "javascript", jsCode, &Entrypoint{ClassName: "Calc", MethodName: "boom"})
	if e := res.Exception; res.Status != StatusRuntimeError || e == nil || e.Type != "RangeError" || e.Message != "too far" || !strings.Contains(e.Traceback, "main.js") {
		t.Errorf("throw: %+v, %s", e, describe(res))
	}
	res = call(t, "javascript", jsCode, &Entrypoint{Function: "nothing"})
	if res.Exception == nil || res.Exception.Type != "ReferenceError" {
		t.Errorf("missing function: %+v, %s", res.Exception, describe(res))
	}
}

func TestEntrypointInvalid(t *testing.T) {
	bad := []struct {
		lang string
		ep   *Entrypoint
		want string
	}{
		{"bash", &Entrypoint{Function: "f"}, "not supported for bash"},
		{"go", &Entrypoint{Function: "f"}, "not supported for go"},
		{"python", &Entrypoint{}, "needs class_name and method_name"},
		{"python", &Entrypoint{ClassName: "C"}, "needs class_name and method_name"},
		{"python", &Entrypoint{ClassName: "C", MethodName: "m", Function: "f"}, "not both"},
		{"python", &Entrypoint{Function: "os.system"}, "not an identifier"},
		{"python", &Entrypoint{ClassName: "C", MethodName: "__import__('os')"}, "not an identifier"},
		{"python", &Entrypoint{Function: "$f"}, "not an identifier"},
		{"python", &Entrypoint{Function: "f", Params: params(`[1, 2]`)}, "must be a JSON object"},
		{"python", &Entrypoint{ClassName: "C", MethodName: "m", MethodParams: params(`"x"`)}, "must be a JSON object"},
		{"python", &Entrypoint{ClassName: "C", MethodName: "m", Params: params(`{}`)}, "method_params, not params"},
	}
	for _, b := range bad {
		req := &Request{Language: b.lang, Code: []byte("x"), Entrypoint: b.ep}
		err := testExec.Validate(req)
		var inv *InvalidRequestError
		if !errors.As(err, &inv) || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s %+v: %v, want %q", b.lang, b.ep, err, b.want)
		}
		if _, err := testExec.Execute(context.Background(), req); !errors.As(err, &inv) {
			t.Errorf("Execute %s %+v: %v", b.lang, b.ep, err)
		}
	}
	if err := testExec.Validate(&Request{Language: "javascript", Code: []byte("x"), Entrypoint: &Entrypoint{Function: "$f"}}); err != nil {
		t.Errorf("$f in javascript: %v", err)
	}
}

// TestRunnerInstall: the runners are written root-owned and read-only, and
// a damaged copy is replaced.
func TestRunnerInstall(t *testing.T) {
	if !strings.HasPrefix(testExec.runnerDir, testCache) {
		t.Fatalf("runner dir %q (error %v) not under %s", testExec.runnerDir, testExec.runnerErr, testCache)
	}
	dir := t.TempDir()
	got, err := installRunners(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"python.py", "node.js"} {
		st, err := os.Stat(filepath.Join(got, name))
		if err != nil || st.Mode().Perm() != 0o444 {
			t.Fatalf("%s: %v %v", name, st.Mode(), err)
		}
	}
	if st, _ := os.Stat(got); st.Mode().Perm() != 0o755 {
		t.Errorf("dir mode %v", st.Mode())
	}
	os.Chmod(filepath.Join(got, "node.js"), 0o644)
	os.WriteFile(filepath.Join(got, "node.js"), []byte("tampered"), 0o644)
	again, err := installRunners(dir)
	if err != nil || again != got {
		t.Fatalf("reinstall: %q %v", again, err)
	}
	if b, _ := os.ReadFile(filepath.Join(got, "node.js")); string(b) == "tampered" {
		t.Errorf("damaged runner kept")
	}
	// The sandbox sees them read-only.
	res := execute(t, &Request{Language: "bash", Code: []byte("ls " + RunnerTarget + "; echo x > " + RunnerTarget + "/python.py && echo WROTE")})
	if !strings.Contains(res.Stdout, "python.py") || strings.Contains(res.Stdout, "WROTE") {
		t.Errorf("inside: %s", describe(res))
	}
}

// TestAutoTimeout: "auto" gives the default timeout without history, then
// a short one learned from fast runs, which ends a slow run.
func TestAutoTimeout(t *testing.T) {
	x := testExecutor(t, 20*time.Second)
	fast := "import time\ntime.sleep(0.05)\n"
	res := executeWith(t, x, &Request{Language: "python", Code: []byte(fast), AutoTimeout: true})
	if res.Status != StatusCompleted || res.AutoTimeoutSeconds != 30 {
		t.Fatalf("no history: auto %v, %s", res.AutoTimeoutSeconds, describe(res))
	}
	if _, ok := x.AutoTimeout("", "python", nil); ok {
		t.Fatalf("one run is history enough")
	}
	for range AutoTimeoutMinSamples {
		executeWith(t, x, &Request{Language: "python", Code: []byte(fast)})
	}
	// Learned from the fast runs: 3 x their p90 + 1 s, about 1.2 s on a
	// quiet machine, more on a busy one, where each run takes longer; far
	// below the default either way, and below the slow run's 10 s.
	const slow = 10 * time.Second
	d, ok := x.AutoTimeout("", "python", nil)
	if !ok || d < AutoTimeoutMin || d >= slow*3/4 {
		t.Fatalf("learned %v %v", d, ok)
	}
	start := time.Now()
	res = executeWith(t, x, &Request{Language: "python", Code: []byte(fmt.Sprintf("import time\ntime.sleep(%d)\n", int(slow.Seconds()))), AutoTimeout: true})
	// auto_timeout_seconds is rounded to the millisecond as a float: 1.118
	// is not exactly (1118 * time.Millisecond).Seconds(). A timeout with
	// the learned limit ended the run: it did not sleep its 10 s.
	if res.Status != StatusTimeout || math.Abs(res.AutoTimeoutSeconds-d.Seconds()) > 1e-6 || res.DurationMs >= float64(slow.Milliseconds()) {
		t.Fatalf("slow run: auto %v after %v, %s", res.AutoTimeoutSeconds, time.Since(start), describe(res))
	}
	// Entry points have their own history; an explicit timeout wins.
	if _, ok := x.AutoTimeout("", "python", &Entrypoint{Function: "f"}); ok {
		t.Errorf("entry point shares the script's history")
	}
	res = executeWith(t, x, &Request{Language: "python", Code: []byte("import time\ntime.sleep(1.5)\n"), AutoTimeout: true, Limits: Limits{WallTime: 15 * time.Second}})
	if res.Status != StatusCompleted || res.AutoTimeoutSeconds != 0 && res.AutoTimeoutSeconds != 15 {
		t.Errorf("explicit: %v %s", res.AutoTimeoutSeconds, describe(res))
	}
}

func TestAutoTimeoutFormula(t *testing.T) {
	var s durationStats
	if s.autoTimeout("", "k", time.Minute) != 0 {
		t.Fatal("no history")
	}
	for i := 1; i <= 10; i++ {
		s.record("", "k", time.Duration(i)*100*time.Millisecond)
	}
	if p, n := s.p90("", "k"); p != 900*time.Millisecond || n != 10 {
		t.Fatalf("p90 %v of %d", p, n)
	}
	if got := s.autoTimeout("", "k", time.Minute); got != 3700*time.Millisecond {
		t.Errorf("3 x 0.9 s + 1 s = %v", got)
	}
	if got := s.autoTimeout("", "k", 2*time.Second); got != 2*time.Second {
		t.Errorf("clamped to the maximum: %v", got)
	}
	for range 2 * AutoTimeoutWindow {
		s.record("", "k", time.Millisecond)
	}
	if got := s.autoTimeout("", "k", time.Minute); got != 1003*time.Millisecond {
		t.Errorf("old samples forgotten: %v", got)
	}
}

func testExecutor(t *testing.T, maxWall time.Duration) *Executor {
	t.Helper()
	x, err := New(Config{DataDir: t.TempDir(), CacheDir: testCache, Engine: testExec.engine, CompileCacheBytes: -1, MaxWallTime: maxWall})
	if err != nil {
		t.Fatal(err)
	}
	return x
}
