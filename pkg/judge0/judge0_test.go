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

	"github.com/sandbox-run/sandbox-run/internal/apitest"
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
	j := apitest.Serve(t, cfg) + "/judge0"

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
	j := apitest.Serve(t, cfg) + "/judge0"
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

// TestExpiry: finished submissions go after result_ttl_seconds, and the
// oldest finished ones past maxStored; none still to run ever does.
func TestExpiry(t *testing.T) {
	s := &server{subs: map[string]*submission{}}
	s.cfg.ResultTTLSeconds = 60
	add := func(tok string, finished time.Time) {
		s.subs[tok] = &submission{token: tok, finished: finished}
		s.order = append(s.order, tok)
	}
	add("old-done", time.Now().Add(-time.Hour))
	add("running", time.Time{})
	add("fresh-done", time.Now())
	s.expireLocked()
	if s.subs["old-done"] != nil || s.subs["running"] == nil || s.subs["fresh-done"] == nil || len(s.order) != 2 {
		t.Fatalf("after expiry: %v", s.order)
	}
	for i := range maxStored {
		add(fmt.Sprint("done-", i), time.Now())
	}
	s.expireLocked()
	if len(s.order) != maxStored || s.subs["running"] == nil || s.subs["fresh-done"] != nil {
		t.Fatalf("past maxStored: %d kept, running kept %v", len(s.order), s.subs["running"] != nil)
	}
}
