package judge0

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/testkit/apitest"
	"github.com/sandbox-run/sandbox-run/pkg/api"
)

// sdkVersions are the keys of judge0-python's LANGUAGE_TO_LANGUAGE_ID
// (src/judge0/data.py): a client looks its language ids up by /about's
// version.
var sdkVersions = []string{"1.13.1", "1.13.1-extra", "1.14.0", "1.14.0-extra"}

// sdkConfig is judge0-python's Config model (src/judge0/base_types.py):
// every field required, with its type.
var sdkConfig = map[string]string{
	"allow_enable_network": "bool", "allow_enable_per_process_and_thread_memory_limit": "bool",
	"allow_enable_per_process_and_thread_time_limit": "bool", "allowed_languages_for_compile_options": "list[str]",
	"callbacks_max_tries": "int", "callbacks_timeout": "float", "cpu_extra_time": "float", "cpu_time_limit": "float",
	"enable_additional_files": "bool", "enable_batched_submissions": "bool", "enable_callbacks": "bool",
	"enable_command_line_arguments": "bool", "enable_compiler_options": "bool", "enable_network": "bool",
	"enable_per_process_and_thread_memory_limit": "bool", "enable_per_process_and_thread_time_limit": "bool",
	"enable_submission_delete": "bool", "enable_wait_result": "bool", "maintenance_mode": "bool",
	"max_cpu_extra_time": "float", "max_cpu_time_limit": "float", "max_extract_size": "int", "max_file_size": "int",
	"max_max_file_size": "int", "max_max_processes_and_or_threads": "int", "max_memory_limit": "int",
	"max_number_of_runs": "int", "max_processes_and_or_threads": "int", "max_queue_size": "int", "max_stack_limit": "int",
	"max_submission_batch_size": "int", "max_wall_time_limit": "float", "memory_limit": "int", "number_of_runs": "int",
	"redirect_stderr_to_stdout": "bool", "stack_limit": "int", "submission_cache_duration": "float",
	"use_docs_as_homepage": "bool", "wall_time_limit": "float",
}

// sdkTime is judge0-python's datetime.strptime(v, "%Y-%m-%dT%H:%M:%S.%fZ"):
// %f takes one to six digits.
var sdkTime = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{1,6}Z$`)

// typeOK says whether a JSON value has a judge0-python type.
func typeOK(kind string, v any) bool {
	switch kind {
	case "bool":
		_, ok := v.(bool)
		return ok
	case "int":
		f, ok := v.(float64)
		return ok && f == float64(int64(f))
	case "float":
		_, ok := v.(float64)
		return ok
	case "list[str]":
		list, ok := v.([]any)
		for _, x := range list {
			if _, s := x.(string); !s {
				return false
			}
		}
		return ok
	}
	return false
}

// setAttributes is judge0-python's Submission.set_attributes: the errors
// it would raise on an answer.
func setAttributes(t *testing.T, what string, attrs map[string]any) {
	t.Helper()
	for k, v := range attrs {
		switch k {
		case "language_id", "language", "status_id":
		case "source_code", "additional_files", "stdin", "expected_output", "stdout", "stderr", "compile_output":
			// decode(value) if value: b64decode(validate=True)
			if s, _ := v.(string); s != "" {
				if _, err := base64.StdEncoding.Strict().DecodeString(strings.NewReplacer("\n", "", "\r", "").Replace(s)); err != nil {
					t.Errorf("%s: %s %q is not base64: %v", what, k, s, err)
				}
			} else if v != nil && v != "" {
				t.Errorf("%s: %s is %T", what, k, v)
			}
		case "status":
			// Status(value["id"])
			id, ok := obj(v)["id"].(float64)
			if !ok || id < 1 || id > 14 {
				t.Errorf("%s: status %v", what, v)
			}
		case "created_at", "finished_at":
			if s, ok := v.(string); v != nil && (!ok || !sdkTime.MatchString(s)) {
				t.Errorf("%s: %s %v does not parse with %%Y-%%m-%%dT%%H:%%M:%%S.%%fZ", what, k, v)
			}
		case "cpu_time_limit", "cpu_extra_time", "time", "wall_time", "wall_time_limit":
			// float(value)
			switch x := v.(type) {
			case nil, float64:
			case string:
				if _, err := strconv.ParseFloat(x, 64); err != nil {
					t.Errorf("%s: float(%s=%q): %v", what, k, x, err)
				}
			default:
				t.Errorf("%s: float(%s=%v)", what, k, v)
			}
		}
	}
}

// TestJudge0PythonSDK: the calls of the official Judge0 Python SDK
// (judge0-python: src/judge0/clients.py, api.py, submission.py), each
// answer parsed as it parses it. Its dependencies (httpx, pydantic) are not
// installable here, so its parsing is reproduced: Client() reads
// /languages into Language and /config_info into Config (every field
// required, typed), looks /about's version up in its table; run() creates
// base64 submissions alone and in batches (max_submission_batch_size from
// the config) and polls them with fields=* until done, through
// set_attributes.
func TestJudge0PythonSDK(t *testing.T) {
	j := apitest.Serve(t, apitest.Config(t), api.Mount(Prefix, New)) + "/judge0"
	headers := map[string]string{"X-Judge0-App": "Judge0 Python SDK", "X-Judge0-App-Version": "0.0.6"}
	do := func(method, path string, params url.Values, body any) (int, any) {
		t.Helper()
		u := j + path
		if params != nil {
			u += "?" + params.Encode()
		}
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = strings.NewReader(string(b))
		}
		req, _ := http.NewRequest(method, u, rd)
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v any
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			t.Fatalf("%s %s: %d, not JSON: %v", method, path, resp.StatusCode, err)
		}
		return resp.StatusCode, v
	}

	// Client.__init__: languages and config; a failure is "Authentication failed".
	st, langs := do("GET", "/languages", nil, nil)
	list, _ := langs.([]any)
	if st != 200 || len(list) == 0 {
		t.Fatalf("GET /languages: %d %v", st, langs)
	}
	for _, l := range list {
		if _, ok := obj(l)["id"].(float64); !ok {
			t.Errorf("Language(**%v): id", l)
		}
		if _, ok := obj(l)["name"].(string); !ok {
			t.Errorf("Language(**%v): name", l)
		}
	}
	st, cfgv := do("GET", "/config_info", nil, nil)
	cfg := obj(cfgv)
	for k, kind := range sdkConfig {
		if v, ok := cfg[k]; !ok {
			t.Errorf("Config(**config_info): %s is missing", k)
		} else if !typeOK(kind, v) {
			t.Errorf("Config(**config_info): %s = %v is not %s", k, v, kind)
		}
	}
	if st != 200 {
		t.Fatalf("GET /config_info: %d", st)
	}
	// client.version → LANGUAGE_TO_LANGUAGE_ID[version]
	_, about := do("GET", "/about", nil, nil)
	if v, _ := obj(about)["version"].(string); !slices.Contains(sdkVersions, v) {
		t.Errorf("/about version %q is not in judge0-python's table %v", v, sdkVersions)
	}

	// create_submission, then get_submission(fields="*") until done.
	enc := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	b64 := url.Values{"base64_encoded": {"true"}, "wait": {"false"}}
	st, created := do("POST", "/submissions", b64, map[string]any{"source_code": enc("print(input())"), "language_id": 71,
		"stdin": enc("sdk"), "expected_output": enc("sdk"), "cpu_time_limit": 2.5})
	token, _ := obj(created)["token"].(string)
	if st != 201 || token == "" {
		t.Fatalf("create_submission: %d %v", st, created)
	}
	setAttributes(t, "create_submission", obj(created))
	poll := func(path string, params url.Values, done func(any) bool) any {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			st, got := do("GET", path, params, nil)
			if st != 200 {
				t.Fatalf("GET %s: %d %v", path, st, got)
			}
			if done(got) {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET %s: not done: %v", path, got)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	all := url.Values{"base64_encoded": {"true"}, "fields": {"*"}}
	got := obj(poll("/submissions/"+token, all, func(v any) bool { return statusID(v) >= 3 }))
	setAttributes(t, "get_submission", got)
	if statusID(got) != 3 || got["stdout"] != enc("sdk\n") || got["finished_at"] == nil || got["time"] == nil {
		t.Errorf("get_submission: %v", got)
	}

	// create_submissions / get_submissions: a batch, fields=*.
	st, batch := do("POST", "/submissions/batch", url.Values{"base64_encoded": {"true"}}, map[string]any{"submissions": []any{
		map[string]any{"source_code": enc("print(1)"), "language_id": 71},
		map[string]any{"source_code": enc("int main(){return x;}"), "language_id": 50}}})
	items, _ := batch.([]any)
	if st != 201 || len(items) != 2 {
		t.Fatalf("create_submissions: %d %v", st, batch)
	}
	var tokens []string
	for _, it := range items {
		setAttributes(t, "create_submissions", obj(it))
		tokens = append(tokens, obj(it)["token"].(string))
	}
	params := url.Values{"base64_encoded": {"true"}, "fields": {"*"}, "tokens": {strings.Join(tokens, ",")}}
	res := obj(poll("/submissions/batch", params, func(v any) bool {
		subs, _ := obj(v)["submissions"].([]any)
		return len(subs) == 2 && statusID(subs[0]) >= 3 && statusID(subs[1]) >= 3
	}))
	subs := res["submissions"].([]any)
	for _, s := range subs {
		setAttributes(t, "get_submissions", obj(s))
	}
	if statusID(subs[0]) != 3 || statusID(subs[1]) != 6 {
		t.Errorf("get_submissions: %v", subs)
	}
	// Nothing ran after the failed compile: time and memory are null.
	if c := obj(subs[1]); c["time"] != nil || c["memory"] != nil || c["wall_time"] != nil {
		t.Errorf("a compile error's time %v, wall_time %v, memory %v: want null", c["time"], c["wall_time"], c["memory"])
	}
}

// TestLenience: what Judge0 (Rails) accepts beyond strict JSON, and the
// system endpoints its dashboards read.
func TestLenience(t *testing.T) {
	cfg := apitest.Config(t)
	j := apitest.Serve(t, cfg, api.Mount(Prefix, New)) + "/judge0"
	// Numbers and flags as strings, as form-driven frontends send them.
	st, r := call(t, "POST", j+"/submissions?wait=true", map[string]any{"source_code": "print('s')", "language_id": "71",
		"cpu_time_limit": " 2.5", "memory_limit": "128000", "number_of_runs": "1", "redirect_stderr_to_stdout": "false", "stack_limit": ""})
	if st != 201 || statusID(r) != 3 || obj(r)["stdout"] != "s\n" {
		t.Errorf("numbers as strings: %d %v", st, r)
	}
	// 71.0 is the integer 71.
	if st, r := call(t, "POST", j+"/submissions?wait=true", map[string]any{"source_code": "print(1)", "language_id": 71.0}); st != 201 || statusID(r) != 3 {
		t.Errorf("language_id 71.0: %d %v", st, r)
	}
	for field, v := range map[string]any{"language_id": "seventy-one", "cpu_time_limit": "fast", "number_of_runs": "1.5", "enable_network": "maybe"} {
		body := map[string]any{"source_code": "print(1)", "language_id": 71, field: v}
		if st, r := call(t, "POST", j+"/submissions", body); st != 422 || obj(r)[field] == nil {
			t.Errorf("%s=%q: %d %v, want 422 naming the field", field, v, st, r)
		}
	}
	// A trailing slash.
	if st, r := call(t, "POST", j+"/submissions/?wait=true", map[string]any{"source_code": "print('slash')", "language_id": 71}); st != 201 || obj(r)["stdout"] != "slash\n" {
		t.Errorf("POST /submissions/: %d %v", st, r)
	}
	if st, r := call(t, "GET", j+"/languages/", nil); st != 200 || len(r.([]any)) == 0 {
		t.Errorf("GET /languages/: %d %v", st, r)
	}
	// A form body (a client that is not a browser: no Origin).
	form := url.Values{"source_code": {"print('form')"}, "language_id": {"71"}, "cpu_time_limit": {"2"}}
	resp, err := http.Post(j+"/submissions?wait=true", "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	var fr map[string]any
	json.NewDecoder(resp.Body).Decode(&fr)
	resp.Body.Close()
	if resp.StatusCode != 201 || fr["stdout"] != "form\n" {
		t.Errorf("a form body: %d %v", resp.StatusCode, fr)
	}
	// The same form from a web page of another site is refused, unrun.
	req, _ := http.NewRequest("POST", j+"/submissions?wait=true", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://evil.example")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode < 400 {
		t.Errorf("a cross-site form: %v %v", err, resp)
	} else {
		resp.Body.Close()
	}

	// Timestamps as Rails writes them.
	_, r = call(t, "POST", j+"/submissions?wait=true&fields=created_at,finished_at,status", map[string]any{"source_code": "print(1)", "language_id": 71})
	for _, k := range []string{"created_at", "finished_at"} {
		if s, _ := obj(r)[k].(string); !sdkTime.MatchString(s) {
			t.Errorf("%s %q", k, s)
		}
	}

	// The system endpoints.
	resp, err = http.Get(j + "/version")
	if err != nil {
		t.Fatal(err)
	}
	v, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(v) != Version || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Errorf("/version: %q %s", v, resp.Header.Get("Content-Type"))
	}
	_, si := call(t, "GET", j+"/system_info", nil)
	if obj(si)["CPU(s)"] == nil || obj(si)["Mem"] == nil {
		t.Errorf("/system_info: %v", si)
	}
	for k, x := range obj(si) {
		if _, ok := x.(string); !ok {
			t.Errorf("/system_info %s = %v: not a string", k, x)
		}
	}
	_, w := call(t, "GET", j+"/workers", nil)
	ws, _ := w.([]any)
	if len(ws) != 1 || obj(ws[0])["available"] != float64(cfg.Workers) || obj(ws[0])["queue"] != Version {
		t.Errorf("/workers: %v", w)
	}
	_, stats := call(t, "GET", j+"/statistics", nil)
	subs := obj(obj(stats)["submissions"])
	langs, _ := obj(stats)["languages"].([]any)
	statuses, _ := obj(stats)["statuses"].([]any)
	// Five submissions ran above (the refused ones are not counted), today
	// (or yesterday, if UTC midnight passed meanwhile).
	days := subs["today"].(float64)
	for _, n := range obj(subs["last_30_days"]) {
		days += n.(float64)
	}
	if subs["total"] != float64(5) || days != 5 || len(obj(subs["last_30_days"])) != 30 ||
		len(langs) != 1 || obj(langs[0])["count"] != float64(5) || len(statuses) != 1 || obj(obj(statuses[0])["status"])["name"] != "Accepted" {
		t.Errorf("/statistics: %v", stats)
	}
}
