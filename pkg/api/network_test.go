package api

import (
	"encoding/json"
	"fmt"
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
