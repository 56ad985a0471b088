package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// An interpreter session over the API: cells keep their state and answer
// with the last expression's value; an exception keeps the session;
// DELETE ends the interpreter; a language without one is a 400.
func TestInterpreterSession(t *testing.T) {
	t.Parallel()
	ts := startServer(t, testConfig())
	create := func(body map[string]any) (*http.Response, []byte) {
		return ts.call(t, request{method: http.MethodPost, path: "/api/sandbox/sessions", body: mustJSON(t, body)})
	}
	if resp, data := create(map[string]any{"language": "bash", "interpreter": true}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a bash interpreter: %d %s", resp.StatusCode, data)
	}
	resp, data := create(map[string]any{"language": "python", "interpreter": true})
	var sess struct {
		SessionID   string `json:"session_id"`
		Interpreter bool   `json:"interpreter"`
	}
	if err := json.Unmarshal(data, &sess); err != nil || resp.StatusCode/100 != 2 || !sess.Interpreter {
		t.Fatalf("create: %d %s", resp.StatusCode, data)
	}
	cell := func(code string) map[string]any {
		resp, data := ts.execute(t, map[string]any{"language": "python", "session_id": sess.SessionID, "code": code})
		var r map[string]any
		if err := json.Unmarshal(data, &r); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%q: %d %s", code, resp.StatusCode, data)
		}
		return r
	}
	cell("x = 41")
	if r := cell("x + 1"); r["status"] != "completed" || r["result"].(map[string]any)["text/plain"] != "42" {
		t.Errorf("x + 1: %v", r)
	}
	if r := cell("raise ValueError('no')"); r["status"] != "error_runtime" || !strings.Contains(toJSON(r["exception"]), "ValueError") {
		t.Errorf("an exception: %v", r)
	}
	if r := cell("x"); r["result"].(map[string]any)["text/plain"] != "41" {
		t.Errorf("after the exception: %v", r)
	}
	if resp, data := ts.call(t, request{method: http.MethodDelete, path: "/api/sandbox/sessions/" + sess.SessionID}); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: %d %s", resp.StatusCode, data)
	}
	if resp, _ := ts.execute(t, map[string]any{"language": "python", "session_id": sess.SessionID, "code": "x"}); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a cell of a deleted session: %d", resp.StatusCode)
	}
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
