package api

import (
	"encoding/json"
	"net/http"
	"testing"
)

// A JavaScript interpreter session over the API takes top-level await:
// a declaration that awaits is the next cell's, the value is the awaited
// one, and a rejected await is the cell's exception (the session goes on).
func TestInterpreterJavaScriptAwaitSession(t *testing.T) {
	t.Parallel()
	ts := startServer(t, testConfig())
	resp, data := ts.call(t, request{method: http.MethodPost, path: "/api/sandbox/sessions",
		body: mustJSON(t, map[string]any{"language": "javascript", "interpreter": true})})
	var sess struct {
		SessionID string `json:"session_id"`
	}
	if err := json.Unmarshal(data, &sess); err != nil || resp.StatusCode/100 != 2 {
		t.Fatalf("create: %d %s", resp.StatusCode, data)
	}
	type answer struct {
		Status    string            `json:"status"`
		Value     map[string]string `json:"result"`
		Exception *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"exception"`
	}
	cell := func(code string) answer {
		t.Helper()
		resp, data := ts.execute(t, map[string]any{"language": "javascript", "session_id": sess.SessionID, "code": code})
		var a answer
		if err := json.Unmarshal(data, &a); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%q: %d %s", code, resp.StatusCode, data)
		}
		return a
	}
	if a := cell("const a = await new Promise(r => setTimeout(() => r(2), 10))"); a.Status != "completed" {
		t.Fatalf("a declaration that awaits: %+v", a)
	}
	if a := cell("await Promise.resolve(a * 21)"); a.Status != "completed" || a.Value["text/plain"] != "42" {
		t.Errorf("an awaited value: %+v", a)
	}
	if a := cell("await Promise.reject(new TypeError('no'))"); a.Status != "error_runtime" || a.Exception == nil ||
		a.Exception.Type != "TypeError" || a.Exception.Message != "no" {
		t.Errorf("a rejected await: %+v", a)
	}
	if a := cell("a"); a.Status != "completed" || a.Value["text/plain"] != "2" {
		t.Errorf("after the rejection: %+v", a)
	}
}
