package api

import (
	"net/http"
	"strings"
	"testing"
)

// TestCrossSiteChanges: on a server without keys, no route that changes
// anything (an upload, a session, a deletion, not only a run) answers a web
// page of another site: 403 before the handler, and nothing is stored. The
// server's own page, and clients that send no Origin, are served.
func TestCrossSiteChanges(t *testing.T) {
	ts := startServer(t, testConfig())
	evil := http.Header{"Origin": {"http://evil.example"}}
	sess := ts.createSession(t, "", map[string]any{"language": "python"})
	for _, r := range []request{
		{method: http.MethodPost, path: "/api/sandbox/files?name=a.txt", body: []byte("x"), contentType: "application/octet-stream", header: evil},
		{method: http.MethodPost, path: "/api/sandbox/sessions", body: []byte(`{"language":"python"}`), header: evil},
		{method: http.MethodDelete, path: "/api/sandbox/sessions/" + sess.SessionID, header: evil},
		{method: http.MethodPost, path: "/api/sandbox/execute", body: []byte(`{"language":"python","code":"print(1)"}`), header: evil},
	} {
		resp, body := ts.call(t, r)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "evil.example") {
			t.Errorf("%s %s from another site: %d %s", r.method, r.path, resp.StatusCode, body)
		}
	}
	if resp, body := ts.get(t, "/api/sandbox/files", ""); resp.StatusCode != http.StatusOK || strings.Contains(string(body), "a.txt") {
		t.Errorf("a refused upload was stored: %s", body)
	}
	if resp, _ := ts.get(t, "/api/sandbox/sessions/"+sess.SessionID, ""); resp.StatusCode != http.StatusOK {
		t.Errorf("a refused deletion ended the session: %d", resp.StatusCode)
	}
	same := http.Header{"Origin": {ts.url}}
	resp, body := ts.call(t, request{method: http.MethodPost, path: "/api/sandbox/files?name=b.txt", body: []byte("y"), contentType: "application/octet-stream", header: same})
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("an upload from the server's own page: %d %s", resp.StatusCode, body)
	}
	resp, body = ts.call(t, request{method: http.MethodDelete, path: "/api/sandbox/sessions/" + sess.SessionID})
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("a deletion from a client that is no browser: %d %s", resp.StatusCode, body)
	}
}
