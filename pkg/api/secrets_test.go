package api

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// TestSecretsAPI: PUT, GET and DELETE /api/sandbox/secrets, per key (the
// value never in an answer, another key sees and uses nothing of it, bad
// input 400); a run naming a secret gets a placeholder and its upstream the
// value (network.requests lists the request); one naming a secret its key
// lacks, or without a network, is refused; the store outlives the server
// (a new one over the same data dir lists it); the log never holds the
// value; a deleted secret is gone.
func TestSecretsAPI(t *testing.T) {
	t.Parallel()
	allow, got := secretsUpstream(t)
	cfg := twoKeysConfig(allow)
	ts := startServer(t, cfg)
	const value = "sk-live-0123456789abcdef0123456789abcdef"
	put := func(ts *testServer, key, name string, body any) (*http.Response, []byte) {
		b, _ := json.Marshal(body)
		return ts.call(t, request{method: http.MethodPut, path: "/api/sandbox/secrets/" + name, body: b, key: key})
	}
	resp, data := put(ts, "key-of-tenant-a", "TOKEN", map[string]any{"value": value, "hosts": []string{"host.sandbox.internal"},
		"header": map[string]any{"name": "Authorization", "format": "Bearer {value}"}})
	if resp.StatusCode != http.StatusOK || strings.Contains(string(data), value) || !strings.Contains(string(data), `"host.sandbox.internal"`) {
		t.Fatalf("PUT: %d %s", resp.StatusCode, data)
	}
	for name, body := range map[string]map[string]any{
		"1BAD":  {"value": "v", "hosts": []string{"example.com"}},
		"NOHST": {"value": "v", "hosts": []string{}},
		"CRLF":  {"value": "v\r\nX-Evil: 1", "hosts": []string{"example.com"}},
		"HDR":   {"value": "v", "hosts": []string{"example.com"}, "header": map[string]any{"name": "Host"}},
		"EMPTY": {"value": "", "hosts": []string{"example.com"}},
	} {
		if resp, data := put(ts, "key-of-tenant-a", name, body); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("PUT %s: %d %s", name, resp.StatusCode, data)
		}
	}
	list := func(ts *testServer, key string) []string {
		resp, data := ts.get(t, "/api/sandbox/secrets", key)
		var l wire.SecretList
		if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &l) != nil || strings.Contains(string(data), value) {
			t.Fatalf("GET: %d %s", resp.StatusCode, data)
		}
		var names []string
		for _, s := range l.Secrets {
			names = append(names, s.Name)
		}
		return names
	}
	if a, b := list(ts, "key-of-tenant-a"), list(ts, "key-of-tenant-b"); strings.Join(a, ",") != "TOKEN" || len(b) != 0 {
		t.Errorf("lists: a %v, b %v", a, b)
	}
	if resp, _ := ts.call(t, request{method: http.MethodDelete, path: "/api/sandbox/secrets/TOKEN", key: "key-of-tenant-b"}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("b's DELETE of a's secret: %d", resp.StatusCode)
	}

	code := `import os, urllib.request
print(os.environ["TOKEN"].startswith("SANDBOX_RUN_SECRET_TOKEN_"))
print(urllib.request.urlopen("http://` + allow + `/x?k=" + os.environ["TOKEN"], timeout=30).read().decode())`
	execute := func(ts *testServer, key string, body map[string]any) (*http.Response, []byte) {
		b, _ := json.Marshal(body)
		return ts.call(t, request{method: http.MethodPost, path: "/api/sandbox/execute", body: b, key: key})
	}
	run := map[string]any{"language": "python", "code": code, "secrets": []string{"TOKEN"}, "network": map[string]any{"allow": []string{allow}}}
	resp, data = execute(ts, "key-of-tenant-a", run)
	var res wire.Result
	json.Unmarshal(data, &res)
	if resp.StatusCode != http.StatusOK || res.Stdout != "True\nok\n" || strings.Contains(string(data), value) {
		t.Fatalf("a's run: %d %s", resp.StatusCode, data)
	}
	if got := got(); len(got) != 1 || got[0] != "Bearer "+value+" /x?k="+value {
		t.Errorf("the upstream got %q", got)
	}
	if n := res.Network; n == nil || len(n.Requests) != 1 || n.Requests[0].Method != "GET" || n.Requests[0].Status != 200 ||
		strings.Join(n.Requests[0].Secrets, ",") != "TOKEN" {
		t.Errorf("network.requests: %+v", res.Network)
	}
	if resp, data := execute(ts, "key-of-tenant-b", run); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("b's run naming a's secret: %d %s", resp.StatusCode, data)
	}
	noNet := map[string]any{"language": "python", "code": "1", "secrets": []string{"TOKEN"}}
	if resp, data := execute(ts, "key-of-tenant-a", noNet); resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(data), "network") {
		t.Errorf("a run with secrets and no network: %d %s", resp.StatusCode, data)
	}

	// Another server over the same data dir: the secret is there, sealed.
	ts2 := startServer(t, cfg)
	if names := list(ts2, "key-of-tenant-a"); strings.Join(names, ",") != "TOKEN" {
		t.Errorf("after a restart: %v", names)
	}
	if strings.Contains(ts.logs.String()+ts2.logs.String(), value) {
		t.Error("the log holds the value")
	}
	if resp, _ := ts2.call(t, request{method: http.MethodDelete, path: "/api/sandbox/secrets/TOKEN", key: "key-of-tenant-a"}); resp.StatusCode != http.StatusNoContent {
		t.Errorf("DELETE: %d", resp.StatusCode)
	}
	if names := list(ts2, "key-of-tenant-a"); len(names) != 0 {
		t.Errorf("after DELETE: %v", names)
	}
	if resp, data := execute(ts2, "key-of-tenant-a", run); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a run naming a deleted secret: %d %s", resp.StatusCode, data)
	}
}

// secretsUpstream is an API a secret is for, on a loopback port the
// sandboxes reach as allow (host.sandbox.internal:PORT); got is what it was
// sent so far: each request's Authorization header and target.
func secretsUpstream(t *testing.T) (allow string, got func() []string) {
	t.Helper()
	var mu sync.Mutex
	var seen []string
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization")+" "+r.URL.RequestURI())
		mu.Unlock()
		io.WriteString(w, "ok")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return fmt.Sprintf("host.sandbox.internal:%d", ln.Addr().(*net.TCPAddr).Port), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}

// twoKeysConfig is the test configuration with two keys' tenants, a and b,
// whose runs may reach allow.
func twoKeysConfig(allow string) Config {
	cfg := testConfig()
	cfg.Keys = []APIKey{{ID: "a", Key: "key-of-tenant-a", Scopes: []string{ScopeExecute}}, {ID: "b", Key: "key-of-tenant-b", Scopes: []string{ScopeExecute}}}
	cfg.Network.Allow = []string{allow}
	return cfg
}
