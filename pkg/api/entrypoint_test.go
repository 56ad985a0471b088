package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/executor"
)

const apiCalc = "class Calc:\n    def add(self, a, b):\n        return {'sum': a + b}\n" +
	"    def boom(self):\n        raise ValueError('bad thing')\n    def weird(self):\n        return object()\n"

func invoke(lang, code string, ep map[string]any) map[string]any {
	return map[string]any{"language": lang, "code": code, "entrypoint": ep}
}

// TestEntrypointAPI: calls through POST /api/sandbox/execute, each
// response validated against openapi.json.
func TestEntrypointAPI(t *testing.T) {
	t.Parallel()
	ts := startServer(t, testConfig())

	res := ts.run(t, invoke("python", apiCalc, map[string]any{"class_name": "Calc", "method_name": "add", "method_params": map[string]any{"a": 2, "b": 40}}))
	if res.Status != executor.StatusCompleted || string(res.ReturnValue) != `{"sum":42}` {
		t.Errorf("add: %s %+v", res.ReturnValue, res)
	}
	resp, data := ts.execute(t, invoke("python", apiCalc, map[string]any{"class_name": "Calc", "method_name": "boom", "method_params": map[string]any{}}))
	res = decodeResult(t, data)
	if resp.StatusCode != 200 || res.Status != executor.StatusRuntimeError || res.Exception == nil || res.Exception.Type != "ValueError" ||
		res.Exception.Message != "bad thing" || !strings.Contains(res.Exception.Traceback, "Traceback") || bytes.Contains(data, []byte(`"return_value"`)) {
		t.Errorf("boom: %d %s", resp.StatusCode, data)
	}
	resp, data = ts.execute(t, invoke("python", apiCalc, map[string]any{"class_name": "Calc", "method_name": "weird"}))
	if resp.StatusCode != 200 || !bytes.Contains(data, []byte("not JSON serializable")) || !bytes.Contains(data, []byte("<object object at")) {
		t.Errorf("weird: %d %s", resp.StatusCode, data)
	}
	forge := "import sys\nprint('{\"return_value\": 1}')\nclass C:\n    def m(self):\n        return 2\n"
	res = ts.run(t, invoke("python", forge, map[string]any{"class_name": "C", "method_name": "m", "method_params": map[string]any{}}))
	if string(res.ReturnValue) != "2" || !strings.Contains(res.Stdout, `{"return_value": 1}`) {
		t.Errorf("forged: %s stdout %q", res.ReturnValue, res.Stdout)
	}
	res = ts.run(t, invoke("python", "def hello(name):\n    return 'hi ' + name\n", map[string]any{"function": "hello", "params": map[string]any{"name": "you"}}))
	if string(res.ReturnValue) != `"hi you"` {
		t.Errorf("function: %s %+v", res.ReturnValue, res)
	}
	js := "class Calc { add(a, b) { return {sum: a + b}; } }\nasync function later(x) { return x + 1; }\n"
	res = ts.run(t, invoke("javascript", js, map[string]any{"class_name": "Calc", "method_name": "add", "method_params": map[string]any{"a": 2, "b": 40}}))
	if string(res.ReturnValue) != `{"sum":42}` {
		t.Errorf("js method: %s %+v", res.ReturnValue, res)
	}
	res = ts.run(t, invoke("js", js, map[string]any{"function": "later", "params": map[string]any{"x": 41}}))
	if string(res.ReturnValue) != `42` {
		t.Errorf("js async function: %s %+v", res.ReturnValue, res)
	}
}

func TestEntrypointAPIInvalid(t *testing.T) {
	t.Parallel()
	ts := startServer(t, testConfig())
	tests := []struct {
		name, body, msg string
	}{
		{"bash", `{"language":"bash","code":"f() { :; }","entrypoint":{"function":"f"}}`, "not supported for bash"},
		{"compiled", `{"language":"go","code":"package main","entrypoint":{"function":"f"}}`, "not supported for go"},
		{"not_identifier", `{"language":"python","code":"x","entrypoint":{"class_name":"C","method_name":"m()"}}`, "not an identifier"},
		{"dotted", `{"language":"python","code":"x","entrypoint":{"function":"os.system"}}`, "not an identifier"},
		{"params_array", `{"language":"python","code":"x","entrypoint":{"function":"f","params":[1]}}`, "must be a JSON object"},
		{"params_string", `{"language":"python","code":"x","entrypoint":{"class_name":"C","method_name":"m","method_params":"a"}}`, "must be a JSON object"},
		{"empty", `{"language":"python","code":"x","entrypoint":{}}`, "needs class_name and method_name"},
		{"both", `{"language":"python","code":"x","entrypoint":{"function":"f","class_name":"C","method_name":"m"}}`, "not both"},
		{"unknown_field", `{"language":"python","code":"x","entrypoint":{"function":"f","args":[]}}`, `unknown field "args"`},
		{"not_object", `{"language":"python","code":"x","entrypoint":"f"}`, "malformed JSON"},
		{"test_cases", `{"language":"python","code":"x","entrypoint":{"function":"f"},"test_cases":[{"input_data":""}]}`, "test_cases"},
		{"timeout_word", `{"language":"python","code":"x","timeout_seconds":"fast"}`, `number or "auto"`},
		{"timeout_bool", `{"language":"python","code":"x","timeout_seconds":true}`, `number or "auto"`},
	}
	for _, tt := range tests {
		resp, data := ts.execute(t, tt.body)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(decodeError(t, data).Error, tt.msg) {
			t.Errorf("%s: %d %s, want 400 with %q", tt.name, resp.StatusCode, data, tt.msg)
		}
	}
}

// TestAutoTimeoutAPI: "timeout_seconds": "auto" is the default timeout
// without history, then a short one after fast runs of the same entry
// point, which ends a slow run as a timeout.
func TestAutoTimeoutAPI(t *testing.T) {
	t.Parallel()
	ts := startServer(t, testConfig())
	// History is the executor's (shared by the package's tests), by entry
	// point: a name of this run's own has none.
	fn := fmt.Sprintf("autoTimeoutAPI%d", time.Now().UnixNano())
	code := "import time\ndef " + fn + "(s):\n    time.sleep(s)\n    return s\n"
	call := func(s float64) map[string]any {
		return map[string]any{"language": "python", "code": code, "timeout_seconds": "auto",
			"entrypoint": map[string]any{"function": fn, "params": map[string]any{"s": s}}}
	}
	res := ts.run(t, call(0))
	if res.Status != executor.StatusCompleted || res.AutoTimeoutSeconds != testConfig().Defaults.TimeoutSeconds {
		t.Fatalf("no history: auto %v, status %s", res.AutoTimeoutSeconds, res.Status)
	}
	for range executor.AutoTimeoutMinSamples {
		ts.run(t, call(0))
	}
	start := time.Now()
	res = ts.run(t, call(8))
	if res.Status != executor.StatusTimeout || res.AutoTimeoutSeconds < 1 || res.AutoTimeoutSeconds > 3 || time.Since(start) > 6*time.Second {
		t.Fatalf("slow run: auto %v status %s after %v", res.AutoTimeoutSeconds, res.Status, time.Since(start))
	}
}

// TestExecuteRequestJSONRoundTrip: entrypoint and "auto" survive the trip
// through MarshalJSON (async jobs are stored that way).
func TestExecuteRequestJSONRoundTrip(t *testing.T) {
	cfg := testConfig()
	in := `{"language":"python","code":"x","timeout_seconds":"auto","entrypoint":{"class_name":"C","method_name":"m","method_params":{"a":[1,2]}}}`
	req, err := DecodeExecuteRequest(strings.NewReader(in), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !req.TimeoutAuto || req.Entrypoint == nil || req.Entrypoint.ClassName != "C" || string(req.Entrypoint.MethodParams) != `{"a":[1,2]}` {
		t.Fatalf("decoded %+v", req)
	}
	x := toExecutor(req)
	if !x.AutoTimeout || x.Limits.WallTime != 0 || x.Entrypoint != req.Entrypoint {
		t.Errorf("executor request %+v", x)
	}
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := DecodeExecuteRequest(bytes.NewReader(b), &cfg)
	if err != nil || !again.TimeoutAuto || again.Entrypoint.MethodName != "m" {
		t.Fatalf("round trip %s: %+v %v", b, again, err)
	}
	if err := testDoc.validate("/components/schemas/ExecuteRequest", b); err != nil {
		t.Errorf("does not match ExecuteRequest: %v", err)
	}
	req.TimeoutAuto, req.TimeoutSeconds = false, 2.5
	b, _ = json.Marshal(req)
	if again, err := DecodeExecuteRequest(bytes.NewReader(b), &cfg); err != nil || again.TimeoutSeconds != 2.5 || again.TimeoutAuto {
		t.Errorf("number %s: %+v %v", b, again, err)
	}
}

// TestEntrypointAsync: an entry point call queued as an async job.
func TestEntrypointAsync(t *testing.T) {
	t.Parallel()
	ts := serveServer(t, jobsConfig(t))
	js := ts.submit(t, with(invoke("python", apiCalc, map[string]any{"class_name": "Calc", "method_name": "add", "method_params": map[string]any{"a": 1, "b": 2}}), "timeout_seconds", "auto"), "")
	res, data := ts.awaitJob(t, js.ExecutionID, "")
	if string(res.ReturnValue) != `{"sum":3}` {
		t.Errorf("async: %s", data)
	}
}
