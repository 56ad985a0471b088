package judge0

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/testkit/apitest"
	"github.com/sandbox-run/sandbox-run/pkg/api"
	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

func TestMain(m *testing.M) {
	sandbox.Init() // a sandbox's PID 1 is this binary re-executed
	os.Exit(m.Run())
}

func call(t *testing.T, method, url string, body any) (int, any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v any
	data, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s %s: %d %q", method, url, resp.StatusCode, data)
	}
	return resp.StatusCode, v
}

func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }

func statusID(v any) int {
	st := obj(obj(v)["status"])
	f, _ := st["id"].(float64)
	return int(f)
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// TestSubmissions: Judge0 CE's submission API, as its documentation
// describes it, on real sandboxes.
func TestSubmissions(t *testing.T) {
	cfg := apitest.Config(t)
	cfg.CallbackAllow = []string{"127.0.0.1"}
	j := apitest.Serve(t, cfg, api.Mount(Prefix, New)) + "/judge0"

	for _, tc := range []struct {
		name   string
		query  string
		body   map[string]any
		status int
		check  func(map[string]any) string
	}{
		{"accepted", "?base64_encoded=false&wait=true", map[string]any{"source_code": "print(input())", "language_id": 71, "stdin": "hi", "expected_output": "hi"}, 3,
			func(r map[string]any) string {
				if r["stdout"] != "hi\n" || r["token"] == nil || r["time"] == nil || r["memory"] == nil {
					return "stdout, token, time, memory"
				}
				return ""
			}},
		{"base64 both ways", "?base64_encoded=true&wait=true", map[string]any{"source_code": b64("print(input()[::-1])"), "language_id": 71, "stdin": b64("abc")}, 3,
			func(r map[string]any) string {
				if r["stdout"] != b64("cba\n") {
					return "stdout not base64 of cba"
				}
				return ""
			}},
		{"wrong answer", "?wait=true", map[string]any{"source_code": "print(1)", "language_id": 71, "expected_output": "2"}, 4, nil},
		{"compilation error", "?wait=true", map[string]any{"source_code": "int main(){return x;}", "language_id": 50}, 6,
			func(r map[string]any) string {
				if s, _ := r["compile_output"].(string); !strings.Contains(s, "error") {
					return "compile_output"
				}
				return ""
			}},
		{"cpu time limit", "?wait=true", map[string]any{"source_code": "while True: pass", "language_id": 71, "cpu_time_limit": 1}, 5, nil},
		{"nzec", "?wait=true&fields=*", map[string]any{"source_code": "import sys; sys.exit(3)", "language_id": 71}, 11,
			func(r map[string]any) string {
				if r["exit_code"] != float64(3) || r["language_id"] != float64(71) || r["source_code"] == nil {
					return "exit_code 3 and the fields=* fields"
				}
				return ""
			}},
		{"sigsegv", "?wait=true", map[string]any{"source_code": "int main(){volatile int *p = 0; return *p;}", "language_id": 50}, 7, nil},
		{"sigfpe", "?wait=true", map[string]any{"source_code": "#include <signal.h>\nint main(){raise(SIGFPE);}", "language_id": 50}, 9, nil},
		{"sigabrt", "?wait=true", map[string]any{"source_code": "#include <stdlib.h>\nint main(){abort();}", "language_id": 50}, 10, nil},
		{"args", "?wait=true", map[string]any{"source_code": "import sys; print(sys.argv[1:])", "language_id": 71, "command_line_arguments": `a "b c"`}, 3,
			func(r map[string]any) string {
				if r["stdout"] != "['a', 'b c']\n" {
					return "args"
				}
				return ""
			}},
		{"number of runs", "?wait=true&fields=stdout,number_of_runs,status", map[string]any{"source_code": "echo x", "language_id": 46, "number_of_runs": 3}, 3,
			func(r map[string]any) string {
				if r["number_of_runs"] != float64(3) || r["stdout"] != "x\n" {
					return "number_of_runs"
				}
				return ""
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, r := call(t, "POST", j+"/submissions"+tc.query, tc.body)
			if st != 201 || statusID(r) != tc.status {
				t.Fatalf("%d %v, want status %d", st, r, tc.status)
			}
			if tc.check != nil {
				if why := tc.check(obj(r)); why != "" {
					t.Fatalf("%s: %v", why, r)
				}
			}
		})
	}

	t.Run("refused", func(t *testing.T) {
		for _, tc := range []struct {
			body  map[string]any
			field string
		}{
			{map[string]any{"source_code": "1", "language_id": 9999}, "language_id"},
			{map[string]any{"source_code": "1"}, "language_id"},
			{map[string]any{"language_id": 71}, "source_code"},
			{map[string]any{"source_code": "1", "language_id": 71, "compiler_options": "-O2"}, "compiler_options"},
			{map[string]any{"source_code": "1", "language_id": 71, "enable_network": true}, "enable_network"},
			{map[string]any{"source_code": "1", "language_id": 71, "number_of_runs": 99}, "number_of_runs"},
			{map[string]any{"source_code": "1", "language_id": 71, "callback_url": "http://10.0.0.1/x"}, "callback_url"},
			{map[string]any{"source_code": "1", "language_id": 71, "isolation": "vm"}, "isolation"}, // ours
		} {
			st, r := call(t, "POST", j+"/submissions", tc.body)
			if st != 422 || obj(r)[tc.field] == nil {
				t.Errorf("%v: %d %v, want 422 on %s", tc.body, st, r, tc.field)
			}
		}
	})

	t.Run("token, poll, batch", func(t *testing.T) {
		st, r := call(t, "POST", j+"/submissions", map[string]any{"source_code": "print('later')", "language_id": 71})
		tok, _ := obj(r)["token"].(string)
		if st != 201 || tok == "" {
			t.Fatalf("%d %v", st, r)
		}
		got := poll(t, j+"/submissions/"+tok+"?fields=stdout,status")
		if got["stdout"] != "later\n" || got["source_code"] != nil {
			t.Fatalf("poll: %v", got)
		}
		if st, _ := call(t, "GET", j+"/submissions/00000000-0000-4000-8000-000000000000", nil); st != 404 {
			t.Fatalf("an unknown token: %d", st)
		}
		st, r = call(t, "POST", j+"/submissions/batch", map[string]any{"submissions": []any{
			map[string]any{"source_code": "print(1)", "language_id": 71},
			map[string]any{"source_code": "print(2)", "language_id": 71},
			map[string]any{"source_code": "x", "language_id": 9999}}})
		list, _ := r.([]any)
		if st != 201 || len(list) != 3 || obj(list[2])["language_id"] == nil {
			t.Fatalf("batch: %d %v", st, r)
		}
		toks := []string{obj(list[0])["token"].(string), obj(list[1])["token"].(string)}
		deadline := time.Now().Add(60 * time.Second)
		for {
			_, r := call(t, "GET", j+"/submissions/batch?tokens="+strings.Join(toks, ",")+"&fields=stdout,status", nil)
			subs, _ := obj(r)["submissions"].([]any)
			if len(subs) == 2 && statusID(subs[0]) >= 3 && statusID(subs[1]) >= 3 {
				if obj(subs[0])["stdout"] != "1\n" || obj(subs[1])["stdout"] != "2\n" {
					t.Fatalf("batch results %v", subs)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("batch not done: %v", r)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})

	t.Run("callback", func(t *testing.T) {
		var mu sync.Mutex
		var got []map[string]any
		var method string
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var v map[string]any
			json.NewDecoder(r.Body).Decode(&v)
			mu.Lock()
			got, method = append(got, v), r.Method
			mu.Unlock()
		}))
		defer hook.Close()
		st, r := call(t, "POST", j+"/submissions", map[string]any{"source_code": "print('hook')", "language_id": 71, "callback_url": hook.URL})
		if st != 201 {
			t.Fatalf("%d %v", st, r)
		}
		deadline := time.Now().Add(60 * time.Second)
		for {
			mu.Lock()
			n := len(got)
			mu.Unlock()
			if n > 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 1 || method != "PUT" || got[0]["stdout"] != "hook\n" || got[0]["token"] != obj(r)["token"] {
			t.Fatalf("callbacks %s %v", method, got)
		}
	})

	t.Run("languages, statuses, about", func(t *testing.T) {
		_, r := call(t, "GET", j+"/languages", nil)
		ids := map[int]string{}
		for _, l := range r.([]any) {
			ids[int(obj(l)["id"].(float64))] = obj(l)["name"].(string)
		}
		for _, id := range []int{46, 50, 54, 60, 62, 63, 71, 73} {
			if ids[id] == "" {
				t.Errorf("language %d missing: %v", id, ids)
			}
		}
		if !strings.HasPrefix(ids[50], "C (GCC ") {
			t.Errorf("language 50 is %q", ids[50])
		}
		st, l := call(t, "GET", j+"/languages/71", nil)
		if st != 200 || obj(l)["id"] != float64(71) {
			t.Errorf("languages/71: %d %v", st, l)
		}
		if st, _ := call(t, "GET", j+"/languages/9999", nil); st != 404 {
			t.Errorf("languages/9999: %d", st)
		}
		_, s := call(t, "GET", j+"/statuses", nil)
		if len(s.([]any)) != 14 || obj(s.([]any)[2])["description"] != "Accepted" {
			t.Errorf("statuses %v", s)
		}
		for _, p := range []string{"/about", "/config_info"} {
			if st, _ := call(t, "GET", j+p, nil); st != 200 {
				t.Errorf("%s: %d", p, st)
			}
		}
		if _, c := call(t, "GET", j+"/config_info", nil); obj(c)["allow_enable_network"] != false {
			t.Errorf("config_info: allow_enable_network %v without judge0.network", obj(c)["allow_enable_network"])
		}
	})
}

func poll(t *testing.T, url string) map[string]any {
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, r := call(t, "GET", url, nil)
		if statusID(r) >= 3 {
			return obj(r)
		}
		if time.Now().After(deadline) {
			t.Fatalf("not done: %v", r)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestSplitArgs(t *testing.T) {
	for in, want := range map[string]string{
		``: `[]`, `a b`: `[a b]`, `"a b" c`: `[a b c]`, `'x "y"' z`: `[x "y" z]`, `a\ b`: `[a b]`,
	} {
		got, err := splitArgs(in)
		if err != nil || fmt.Sprint(got) != want && !(want == "[]" && len(got) == 0) {
			t.Errorf("%q: %q %v, want %s", in, got, err, want)
		}
	}
	if _, err := splitArgs(`"open`); err == nil {
		t.Error("an unterminated quote passed")
	}
}

// TestAuthToken: with API keys, Judge0's clients authenticate as Judge0
// has them do, with X-Auth-Token.
func TestAuthToken(t *testing.T) {
	cfg := apitest.Config(t)
	cfg.Keys = []config.APIKey{{ID: "judge", Key: "judge0-client-key-0123", Scopes: []string{config.ScopeExecute}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	j := apitest.Serve(t, cfg, api.Mount(Prefix, New)) + "/judge0"
	for _, tc := range []struct {
		header, value string
		want          int
	}{{"", "", 401}, {"X-Auth-Token", "wrong", 401}, {"X-Auth-Token", "judge0-client-key-0123", 200}, {"Authorization", "Bearer judge0-client-key-0123", 200}} {
		req, _ := http.NewRequest("GET", j+"/statuses", nil)
		if tc.header != "" {
			req.Header.Set(tc.header, tc.value)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s %q: %d, want %d", tc.header, tc.value, resp.StatusCode, tc.want)
		}
	}
}

// send POSTs body (raw bytes) with headers and returns the status and the
// answer.
func send(t *testing.T, url string, body []byte, headers map[string]string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// TestCrossSite: on a server without keys, a page of another site can send
// text/plain and form bodies without asking first: none of them runs code
// through /judge0 (415, or 403 for its Origin), while a same-origin JSON
// submission does.
func TestCrossSite(t *testing.T) {
	base := apitest.Serve(t, apitest.Config(t), api.Mount(Prefix, New))
	body := []byte(`{"source_code": "echo csrf", "language_id": 46}`)
	for _, path := range []string{"/judge0/submissions?wait=true", "/judge0/submissions", "/judge0/submissions/batch"} {
		b := body
		if strings.Contains(path, "batch") {
			b = []byte(`{"submissions": [` + string(body) + `]}`)
		}
		for _, h := range []map[string]string{
			{"Content-Type": "text/plain", "Origin": "http://evil.example"},
			{"Content-Type": "application/x-www-form-urlencoded", "Origin": "http://evil.example"},
			{"Content-Type": "application/json", "Origin": "http://evil.example"},
		} {
			if st, out := send(t, base+path, b, h); (st != 403 && st != 415) || strings.Contains(out, "token") {
				t.Errorf("%s %v: %d %s", path, h, st, out)
			}
		}
	}
	st, out := send(t, base+"/judge0/submissions?wait=true&base64_encoded=false", body,
		map[string]string{"Content-Type": "application/json", "Origin": base})
	if st != 201 || !strings.Contains(out, `"stdout":"csrf\n"`) {
		t.Fatalf("same origin: %d %s", st, out)
	}
}

// TestBatchRate: a Judge0 batch of N is N runs for its key's rate.
func TestBatchRate(t *testing.T) {
	cfg := apitest.Config(t)
	cfg.Keys = []config.APIKey{{ID: "rate", Key: "judge0-rate-key-0123", Scopes: []string{config.ScopeExecute}, RatePerSecond: 0.001, Burst: 6}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	base := apitest.Serve(t, cfg, api.Mount(Prefix, New))
	as := func(key string) map[string]string {
		return map[string]string{"Content-Type": "application/json", "X-Auth-Token": key}
	}
	sub := func(code string) string { return `{"source_code": ` + fmt.Sprintf("%q", code) + `, "language_id": 46}` }
	batch := []byte(`{"submissions": [` + strings.Repeat(sub("true")+",", 4) + sub("true") + `]}`)
	if st, out := send(t, base+"/judge0/submissions/batch", batch, as("judge0-rate-key-0123")); st != 201 || strings.Count(out, "token") != 5 {
		t.Fatalf("a batch of 5 on a burst-6 key: %d %s", st, out)
	}
	codes := []int{}
	for range 2 {
		st, _ := send(t, base+"/judge0/submissions", []byte(sub("true")), as("judge0-rate-key-0123"))
		codes = append(codes, st)
	}
	if codes[0] != 201 || codes[1] != 429 {
		t.Fatalf("after a batch of 5, two more submissions on a burst-6 key: %v (want 201, 429)", codes)
	}

}

// TestSubmissionsAreJobs: a Judge0 submission is a job of the server's job
// store: Judge0 and native
// async submissions share its async queue (a key whose queue is full is
// refused 429 on both, another key is not); tokens outlive a restart on the
// same data dir, and stay their key's.
func TestSubmissionsAreJobs(t *testing.T) {
	cfg := apitest.Config(t)
	cfg.Workers, cfg.AsyncQueue, cfg.AsyncQueuePerKey = 1, 8, 2
	cfg.Keys = []config.APIKey{
		{ID: "q", Key: "judge0-queue-key-0123", Scopes: []string{config.ScopeExecute}},
		{ID: "other", Key: "judge0-other-key-0123", Scopes: []string{config.ScopeExecute}},
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	base, stop := apitest.Start(t, cfg, api.Mount(Prefix, New))
	defer stop()
	as := func(key string) map[string]string {
		return map[string]string{"Content-Type": "application/json", "X-Auth-Token": key}
	}
	sub := func(code string) string { return `{"source_code": ` + fmt.Sprintf("%q", code) + `, "language_id": 46}` }

	// One job holds the one worker; the key's queue of 2 fills with a
	// native job and a Judge0 submission; the next of either is refused.
	hold := as("judge0-queue-key-0123")
	if st, out := send(t, base+"/api/sandbox/executions", []byte(`{"language": "bash", "code": "sleep 3"}`), hold); st != 202 {
		t.Fatalf("native job: %d %s", st, out)
	}
	time.Sleep(500 * time.Millisecond) // it leaves the queue for the worker
	if st, out := send(t, base+"/api/sandbox/executions", []byte(`{"language": "bash", "code": "echo native-kept"}`), hold); st != 202 {
		t.Fatalf("queued native job: %d %s", st, out)
	}
	st, out := send(t, base+"/judge0/submissions?base64_encoded=false", []byte(sub("echo judge0-kept")), hold)
	var tok struct{ Token string }
	if json.Unmarshal([]byte(out), &tok); st != 201 || tok.Token == "" {
		t.Fatalf("queued Judge0 submission: %d %s", st, out)
	}
	if st, out := send(t, base+"/judge0/submissions", []byte(sub("true")), hold); st != 429 {
		t.Fatalf("a Judge0 submission past the key's queue: %d %s (want 429)", st, out)
	}
	if st, out := send(t, base+"/api/sandbox/executions", []byte(`{"language": "bash", "code": "true"}`), hold); st != 429 {
		t.Fatalf("a native job past the key's queue: %d %s (want 429)", st, out)
	}
	if st, out := send(t, base+"/judge0/submissions", []byte(sub("true")), as("judge0-other-key-0123")); st != 201 {
		t.Fatalf("another key: %d %s", st, out)
	}
	get := func(base, key string) (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodGet, base+"/judge0/submissions/"+tok.Token+"?base64_encoded=false", nil)
		req.Header.Set("X-Auth-Token", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		json.NewDecoder(resp.Body).Decode(&v)
		return resp.StatusCode, v
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, v := get(base, "judge0-queue-key-0123")
		if st == 200 && statusID(v) >= 3 {
			if v["stdout"] != "judge0-kept\n" {
				t.Fatalf("the submission's answer: %v", v)
			}
			break
		}
		if st != 200 || time.Now().After(deadline) {
			t.Fatalf("waiting for the submission: %d %v", st, v)
		}
		time.Sleep(200 * time.Millisecond)
	}
	stop()
	base, stop = apitest.Start(t, cfg, api.Mount(Prefix, New))
	defer stop()
	if st, v := get(base, "judge0-queue-key-0123"); st != 200 || v["stdout"] != "judge0-kept\n" || statusID(v) != 3 {
		t.Fatalf("after a restart: %d %v", st, v)
	}
	if st, _ := get(base, "judge0-other-key-0123"); st != 404 {
		t.Fatalf("another key after a restart: %d", st)
	}
}

// TestCallbackPolicy: a callback_url is judged by the run service's one
// address policy at submission, answered in Judge0's shape (422 on
// callback_url), single and in a batch; nothing is stored for it.
func TestCallbackPolicy(t *testing.T) {
	base := apitest.Serve(t, apitest.Config(t), api.Mount(Prefix, New))
	h := map[string]string{"Content-Type": "application/json"}
	for _, url := range []string{"http://127.0.0.1:1/", "http://169.254.169.254/latest/meta-data/", "http://[::ffff:10.0.0.1]/"} {
		body := []byte(`{"source_code": "true", "language_id": 46, "callback_url": "` + url + `"}`)
		if st, out := send(t, base+"/judge0/submissions", body, h); st != 422 || !strings.Contains(out, `"callback_url"`) || strings.Contains(out, "token") {
			t.Errorf("%s: %d %s", url, st, out)
		}
		st, out := send(t, base+"/judge0/submissions/batch", []byte(`{"submissions": [`+string(body)+`]}`), h)
		if st != 201 || !strings.Contains(out, `"callback_url"`) || strings.Contains(out, "token") {
			t.Errorf("%s in a batch: %d %s", url, st, out)
		}
	}
}
