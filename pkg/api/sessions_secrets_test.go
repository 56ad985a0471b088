package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestInterpreterSessionSecrets: an interpreter session made with secrets
// (and the network of their hosts) runs every cell with their
// placeholders, each cell's requests getting the value the store has as
// the cell starts (a PUT between cells reaches the next); the session
// says which secrets it has; a session naming secrets without a network,
// or another key's, is refused, and so is a cell naming other secrets.
func TestInterpreterSessionSecrets(t *testing.T) {
	t.Parallel()
	allow, got := secretsUpstream(t)
	ts := startServer(t, twoKeysConfig(allow))
	call := func(method, path, key string, body any) (*http.Response, []byte) {
		b, _ := json.Marshal(body)
		return ts.call(t, request{method: method, path: path, body: b, key: key})
	}
	put := func(value string) {
		t.Helper()
		if resp, data := call(http.MethodPut, "/api/sandbox/secrets/TOKEN", "key-of-tenant-a",
			map[string]any{"value": value, "hosts": []string{"host.sandbox.internal"}}); resp.StatusCode != http.StatusOK {
			t.Fatalf("PUT: %d %s", resp.StatusCode, data)
		}
	}
	first, second := "v1-"+strings.Repeat("a", 24), "v2-"+strings.Repeat("b", 24)
	put(first)

	network := map[string]any{"allow": []string{allow}}
	for name, c := range map[string]struct {
		key  string
		body map[string]any
	}{
		"no network":   {"key-of-tenant-a", map[string]any{"language": "python", "interpreter": true, "secrets": []string{"TOKEN"}}},
		"another key":  {"key-of-tenant-b", map[string]any{"language": "python", "interpreter": true, "secrets": []string{"TOKEN"}, "network": network}},
		"named twice":  {"key-of-tenant-a", map[string]any{"language": "python", "interpreter": true, "secrets": []string{"TOKEN", "TOKEN"}, "network": network}},
		"no such name": {"key-of-tenant-a", map[string]any{"language": "python", "interpreter": true, "secrets": []string{"NONE"}, "network": network}},
	} {
		if resp, data := call(http.MethodPost, "/api/sandbox/sessions", c.key, c.body); resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(data), "secrets") {
			t.Errorf("%s: %d %s", name, resp.StatusCode, data)
		}
	}
	resp, data := call(http.MethodPost, "/api/sandbox/sessions", "key-of-tenant-a",
		map[string]any{"language": "python", "interpreter": true, "secrets": []string{"TOKEN"}, "network": network})
	var info SessionInfo
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(data, &info) != nil || strings.Join(info.Secrets, ",") != "TOKEN" {
		t.Fatalf("create: %d %s", resp.StatusCode, data)
	}
	defer call(http.MethodDelete, "/api/sandbox/sessions/"+info.SessionID, "key-of-tenant-a", nil)
	cell := func(code string, extra map[string]any) (int, map[string]any) {
		t.Helper()
		body := map[string]any{"language": "python", "session_id": info.SessionID, "code": code}
		for k, v := range extra {
			body[k] = v
		}
		resp, data := call(http.MethodPost, "/api/sandbox/execute", "key-of-tenant-a", body)
		var out map[string]any
		json.Unmarshal(data, &out)
		return resp.StatusCode, out
	}
	get := `urllib.request.urlopen(urllib.request.Request("http://` + allow + `/%s", headers={"Authorization": "Bearer " + tok}), timeout=30).read().decode()`
	if st, out := cell("import os, urllib.request\ntok = os.environ['TOKEN']\nprint(tok.startswith('SANDBOX_RUN_SECRET_TOKEN_'))\n"+fmt.Sprintf(get, "one"), nil); st != http.StatusOK || out["stdout"] != "True\n" || out["status"] != "completed" {
		t.Fatalf("the first cell: %d %v", st, out)
	}
	put(second)
	if st, out := cell(fmt.Sprintf(get, "two"), nil); st != http.StatusOK || out["status"] != "completed" || strings.Contains(fmt.Sprint(out), second) {
		t.Fatalf("the second cell: %d %v", st, out)
	}
	if got := got(); !slices.Equal(got, []string{"Bearer " + first + " /one", "Bearer " + second + " /two"}) {
		t.Errorf("the upstream got %q: want each cell's value", got)
	}
	if st, out := cell("1", map[string]any{"secrets": []string{"OTHER"}}); st != http.StatusBadRequest {
		t.Errorf("a cell naming other secrets: %d %v", st, out)
	}
	if resp, data := ts.get(t, "/api/sandbox/sessions/"+info.SessionID, "key-of-tenant-a"); resp.StatusCode != http.StatusOK || !strings.Contains(string(data), `"secrets":["TOKEN"]`) {
		t.Errorf("GET the session: %d %s", resp.StatusCode, data)
	}
}
