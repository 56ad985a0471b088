package api

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// Network access over the API: refused (400, saying why) by a server whose
// network.allow is empty and beyond a server's maximum; within it a run
// reaches the listed port of host.sandbox.internal and its result (checked
// against the document) lists what it tried; /metrics counts allowed and
// denied attempts.
func TestNetworkOverTheAPI(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "net-token") })}
	go srv.Serve(ln)
	defer srv.Close()
	allowed := fmt.Sprintf("host.sandbox.internal:%d", port)
	code := fmt.Sprintf(`
import urllib.request
for port in (%d, %d):
    try:
        print(urllib.request.urlopen("http://host.sandbox.internal:%%d/" %% port, timeout=10).read().decode())
    except Exception as e:
        print("failed", type(e).__name__)
`, port, port+1)
	body := map[string]any{"language": "python", "code": code, "network": map[string]any{"allow": []string{allowed}}}

	none := startServer(t, testConfig())
	resp, data := none.execute(t, body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(data), "network.allow is empty") {
		t.Errorf("a server without network.allow: %d %s", resp.StatusCode, data)
	}

	cfg := testConfig()
	cfg.Network.Allow = []string{allowed}
	ts := startServer(t, cfg)
	for _, wider := range [][]string{{fmt.Sprintf("host.sandbox.internal:%d", port+1)}, {"*.example.org"}, {"0.0.0.0/0"}} {
		resp, data := ts.execute(t, map[string]any{"language": "python", "code": "1", "network": map[string]any{"allow": wider}})
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%v beyond the maximum: %d %s", wider, resp.StatusCode, data)
		}
	}
	for _, bad := range []any{map[string]any{"allow": []string{}}, map[string]any{"allow": []string{"http://x/"}}, map[string]any{"deny": []string{"x"}}} {
		if resp, data := ts.execute(t, map[string]any{"language": "python", "code": "1", "network": bad}); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("network %v: %d %s", bad, resp.StatusCode, data)
		}
	}
	res := ts.run(t, body)
	if res.Stdout != "net-token\nfailed URLError\n" {
		t.Errorf("stdout %q", res.Stdout)
	}
	if n := res.Network; n == nil || n.Allowed == 0 || n.Denied == 0 || n.BytesIn == 0 || len(n.Destinations) < 2 {
		b, _ := json.Marshal(n)
		t.Errorf("network report %s", b)
	}
	_, m := ts.get(t, "/metrics", "")
	for _, want := range []string{`sandbox_run_network_attempts_total{verdict="allowed"}`, `sandbox_run_network_attempts_total{verdict="denied"}`, `sandbox_run_network_bytes_total{direction="in"}`} {
		if !strings.Contains(string(m), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// A session's network access: given when it is created (within the
// server's maximum), the default of its runs; an interpreter session's
// interpreter has it for its life, and a cell may not change it.
func TestNetworkInSessions(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "sess-token") })}
	go srv.Serve(ln)
	defer srv.Close()
	allowed := fmt.Sprintf("host.sandbox.internal:%d", port)
	cfg := testConfig()
	cfg.Network.Allow = []string{allowed, "host.sandbox.internal:1"}
	ts := startServer(t, cfg)
	create := func(body map[string]any) (int, string) {
		resp, data := ts.call(t, request{method: http.MethodPost, path: "/api/sandbox/sessions", body: mustJSON(t, body)})
		var s struct {
			SessionID string `json:"session_id"`
		}
		json.Unmarshal(data, &s)
		return resp.StatusCode, s.SessionID
	}
	if code, _ := create(map[string]any{"language": "python", "interpreter": true, "network": map[string]any{"allow": []string{"*.example.org"}}}); code != http.StatusBadRequest {
		t.Errorf("a session beyond the server's maximum: %d", code)
	}
	code, id := create(map[string]any{"language": "python", "interpreter": true, "network": map[string]any{"allow": []string{allowed}}})
	if code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	cell := func(body map[string]any) (*http.Response, []byte) {
		body["language"], body["session_id"] = "python", id
		return ts.execute(t, body)
	}
	resp, data := cell(map[string]any{"code": fmt.Sprintf("import urllib.request\nbody = urllib.request.urlopen('http://host.sandbox.internal:%d/', timeout=10).read().decode()\nbody", port)})
	var r struct {
		Value   map[string]string `json:"result"`
		Network *struct {
			Allowed int `json:"allowed"`
		} `json:"network"`
	}
	if json.Unmarshal(data, &r); resp.StatusCode != http.StatusOK || r.Value["text/plain"] != "'sess-token'" || r.Network == nil || r.Network.Allowed == 0 {
		t.Errorf("a cell of a session with network: %d %s", resp.StatusCode, data)
	}
	if resp, data := cell(map[string]any{"code": "body", "network": map[string]any{"allow": []string{"host.sandbox.internal:1"}}}); resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(data), "created with") {
		t.Errorf("a cell that changes the network: %d %s", resp.StatusCode, data)
	}
	if resp, data := ts.call(t, request{method: http.MethodGet, path: "/api/sandbox/sessions/" + id}); resp.StatusCode != http.StatusOK || !strings.Contains(string(data), allowed) {
		t.Errorf("the session does not say its network: %d %s", resp.StatusCode, data)
	}
	// A plain session's runs get its network unless they give their own.
	_, plain := create(map[string]any{"language": "python", "network": map[string]any{"allow": []string{allowed}}})
	resp, data = ts.execute(t, map[string]any{"language": "python", "session_id": plain,
		"code": fmt.Sprintf("import urllib.request\nprint(urllib.request.urlopen('http://host.sandbox.internal:%d/', timeout=10).read().decode())", port)})
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(data), `"stdout":"sess-token\n"`) {
		t.Errorf("a run of a plain session with network: %d %s", resp.StatusCode, data)
	}
}

// TestNetworkBudgets: a run's byte budget for an allow entry ends what
// that entry's connections move past it (the program's read fails, the
// destination says why) while the run completes; a budget for no entry of
// the list, or of no bytes, is 400, and so is one for a session's network
// (each of its runs takes its own). A live sandbox's:
// TestSandboxNetworkBudgets.
func TestNetworkBudgets(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 1<<20)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, big) })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	allowed := fmt.Sprintf("host.sandbox.internal:%d", ln.Addr().(*net.TCPAddr).Port)
	cfg := testConfig()
	cfg.Network.Allow = []string{allowed}
	ts := startServer(t, cfg)
	code := `import urllib.request
try:
    print(len(urllib.request.urlopen("http://` + allowed + `/", timeout=20).read()))
except Exception as e:
    print("failed", type(e).__name__)`
	res := ts.run(t, map[string]any{"language": "python", "code": code, "network": map[string]any{"allow": []string{allowed}, "budgets": map[string]int64{allowed: 64 << 10}}})
	if res.Stdout != "failed IncompleteRead\n" && !strings.HasPrefix(res.Stdout, "failed ") {
		t.Errorf("a download past its budget: %q %q", res.Stdout, res.Stderr)
	}
	var why string
	for _, d := range res.Network.Destinations {
		why += d.Reason
	}
	if !strings.Contains(why, "byte budget of "+allowed) {
		t.Errorf("no destination says the budget ended it: %+v", res.Network.Destinations)
	}
	if res.Network.BytesIn > 64<<10 {
		t.Errorf("%d bytes in past a budget of %d", res.Network.BytesIn, 64<<10)
	}
	if again := ts.run(t, map[string]any{"language": "python", "code": code, "network": map[string]any{"allow": []string{allowed}}}); again.Stdout != fmt.Sprint(1<<20)+"\n" {
		t.Errorf("without a budget: %q", again.Stdout)
	}
	for _, bad := range []map[string]int64{{"example.com": 10}, {allowed: 0}} {
		if resp, data := ts.execute(t, map[string]any{"language": "python", "code": "1", "network": map[string]any{"allow": []string{allowed}, "budgets": bad}}); resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(data), "budgets") {
			t.Errorf("budgets %v: %d %s", bad, resp.StatusCode, data)
		}
	}
	b, _ := json.Marshal(map[string]any{"language": "python", "network": map[string]any{"allow": []string{allowed}, "budgets": map[string]int64{allowed: 10}}})
	if resp, data := ts.call(t, request{method: "POST", path: "/api/sandbox/sessions", body: b}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a session's budgets: %d %s", resp.StatusCode, data)
	}
}
