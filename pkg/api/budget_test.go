package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/executor"
)

// nulCases is a request of n test cases that each print size NUL bytes.
func nulCases(n, size int) map[string]any {
	var cases []map[string]any
	for range n {
		cases = append(cases, map[string]any{})
	}
	return with(py("import sys\nsys.stdout.buffer.write(bytes("+itoa(size)+"))"), "test_cases", cases, "max_output_bytes", 4<<20)
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestResponseBudget: test cases whose output together is far above the
// server's max_response_bytes get an answer within it (NUL bytes as
// base64, not six bytes each), flagged response_truncated, plain and as
// Server-Sent Events; a request may lower the budget, not raise it.
func TestResponseBudget(t *testing.T) {
	cfg := testConfig()
	cfg.MaxResponseBytes = 4 << 20
	ts := startServer(t, cfg)

	resp, data := ts.execute(t, nulCases(6, 2<<20))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, truncate(data))
	}
	if int64(len(data)) > cfg.MaxResponseBytes+64<<10 {
		t.Fatalf("response of %d bytes for a budget of %d", len(data), cfg.MaxResponseBytes)
	}
	res := decodeResult(t, data)
	if !res.ResponseTruncated {
		t.Fatal("response_truncated is false although 12 MiB of output met a 4 MiB budget")
	}
	for _, c := range res.TestCases {
		if c.Stdout != "" && c.StdoutEncoding != "base64" {
			t.Fatalf("case %d: NUL output not base64", c.Index)
		}
	}

	// The same as events: the result event is bounded too.
	r := executeRequest(t, nulCases(6, 2<<20))
	r.header = http.Header{"Accept": {"text/event-stream"}}
	resp, data = ts.call(t, r)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %d %s", resp.StatusCode, truncate(data))
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 64<<20)
	var event string
	found := false
	for sc.Scan() {
		line := sc.Text()
		if e, ok := strings.CutPrefix(line, "event: "); ok {
			event = e
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok && event == "result" {
			found = true
			if int64(len(d)) > cfg.MaxResponseBytes+64<<10 {
				t.Fatalf("result event of %d bytes for a budget of %d", len(d), cfg.MaxResponseBytes)
			}
			var sres executor.Result
			if err := json.Unmarshal([]byte(d), &sres); err != nil || !sres.ResponseTruncated {
				t.Fatalf("result event: %v, response_truncated %v", err, sres.ResponseTruncated)
			}
		}
	}
	if !found {
		t.Fatalf("no result event in %s", truncate(data))
	}

	// A request may ask for less, never more.
	resp, data = ts.execute(t, with(py("print('x' * 100000)"), "max_response_bytes", 1000))
	res = decodeResult(t, data)
	if resp.StatusCode != http.StatusOK || !res.ResponseTruncated || !res.StdoutTruncated || len(res.Stdout) > 1000 {
		t.Fatalf("max_response_bytes 1000: %d, %d bytes of stdout, truncated %v/%v", resp.StatusCode, len(res.Stdout), res.StdoutTruncated, res.ResponseTruncated)
	}
	resp, data = ts.execute(t, with(py("print(1)"), "max_response_bytes", 8<<20))
	wantError(t, resp, data, http.StatusBadRequest, "max_response_bytes")
}

// TestHostHeaderRebinding: a server without API keys answers only
// requests addressed to a loopback name, so a web page whose name was
// rebound to 127.0.0.1 gets nothing; with keys the key is the guard.
func TestHostHeaderRebinding(t *testing.T) {
	ts := startServer(t, testConfig())
	post := func(ts *testServer, host, key string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, ts.url+"/api/sandbox/execute", strings.NewReader(`{"language":"python","code":"print(1)"}`))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		req.Host = host
		resp, err := ts.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	_, port, _ := strings.Cut(ts.addr, ":")
	for _, host := range []string{"attacker.example:" + port, "attacker.example", "127.0.0.1.nip.example", "localhost.attacker.example:" + port} {
		if code, body := post(ts, host, ""); code != http.StatusForbidden || !strings.Contains(body, "loopback") {
			t.Errorf("Host %s: %d %s, want 403", host, code, body)
		}
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST", "[::1]:" + port, "app.localhost:" + port, "127.0.0.2"} {
		if code, body := post(ts, host, ""); code != http.StatusOK {
			t.Errorf("Host %s: %d %s, want 200", host, code, body)
		}
	}
	// The playground page is guarded too.
	req, _ := http.NewRequest(http.MethodGet, ts.url+"/", nil)
	req.Host = "attacker.example"
	if resp, err := ts.client.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("GET / with a foreign Host: %v %v, want 403", resp.StatusCode, err)
	} else {
		resp.Body.Close()
	}

	cfg := testConfig()
	cfg.Keys = []APIKey{{ID: "k", Key: "secret-key-123", Scopes: []string{ScopeExecute}}}
	keyed := startServer(t, cfg)
	if code, body := post(keyed, "sandbox.example.com", "secret-key-123"); code != http.StatusOK {
		t.Errorf("keyed server, foreign Host with a key: %d %s, want 200", code, body)
	}
	if code, _ := post(keyed, "sandbox.example.com", ""); code != http.StatusUnauthorized {
		t.Errorf("keyed server, foreign Host without a key: %d, want 401", code)
	}
}

// TestCompileCachePerKey: key B never learns from cache_hit that key A
// compiled the same program; A's own repeat hits its cache.
func TestCompileCachePerKey(t *testing.T) {
	cfg := testConfig()
	cfg.Keys = []APIKey{{ID: "a", Key: "key-of-tenant-a", Scopes: []string{ScopeExecute}}, {ID: "b", Key: "key-of-tenant-b", Scopes: []string{ScopeExecute}}}
	ts := startServer(t, cfg)
	// Unique per test run, so no earlier run's entry interferes.
	code := "#include <stdio.h>\nint main(){puts(\"" + itoa(int(time.Now().UnixNano())) + "\");}\n"
	hit := func(key string) bool {
		r := executeRequest(t, map[string]any{"language": "c", "code": code})
		r.key = key
		resp, data := ts.call(t, r)
		res := decodeResult(t, data)
		if resp.StatusCode != http.StatusOK || res.Status != executor.StatusCompleted || res.Compile == nil {
			t.Fatalf("key %s: %d %s", key, resp.StatusCode, truncate(data))
		}
		return res.Compile.CacheHit
	}
	if hit("key-of-tenant-a") {
		t.Fatal("first compile of key a was a cache hit")
	}
	if !hit("key-of-tenant-a") {
		t.Fatal("key a's repeat was not a cache hit")
	}
	if hit("key-of-tenant-b") {
		t.Fatal("key b got a cache hit from key a's compile")
	}
}
