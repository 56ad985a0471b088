package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
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

// pythonInterpreter creates a python interpreter session and returns its
// id.
func (ts *testServer) pythonInterpreter(t *testing.T) string {
	t.Helper()
	resp, data := ts.call(t, request{method: http.MethodPost, path: "/api/sandbox/sessions",
		body: mustJSON(t, map[string]any{"language": "python", "interpreter": true})})
	var sess struct {
		SessionID string `json:"session_id"`
	}
	if err := json.Unmarshal(data, &sess); err != nil || resp.StatusCode/100 != 2 {
		t.Fatalf("create: %d %s", resp.StatusCode, data)
	}
	return sess.SessionID
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Cells stream and end as runs do: over SSE a cell's output arrives
// while it runs and its result carries the value; a client that goes
// away interrupts its cell (the session keeps its state); over the
// WebSocket a cell streams and answers too.
func TestInterpreterCellStreamCancelWebSocket(t *testing.T) {
	t.Parallel()
	ts := startServer(t, testConfig())
	sess := struct{ SessionID string }{ts.pythonInterpreter(t)}
	cell := func(code string) map[string]any {
		return map[string]any{"language": "python", "session_id": sess.SessionID, "code": code}
	}
	if resp, data := ts.execute(t, cell("x = 41")); resp.StatusCode != http.StatusOK {
		t.Fatalf("x = 41: %d %s", resp.StatusCode, data)
	}

	// SSE: live output, then the result with the value.
	_, events := ts.stream(t, cell("import time\nprint('first', flush=True)\ntime.sleep(1)\nprint('second')\nx + 1"))
	streams, last := checkEvents(t, events)
	if string(streams["stdout"]) != "first\nsecond\n" {
		t.Errorf("streamed stdout %q", streams["stdout"])
	}
	res := decodeResult(t, last.data)
	if last.name != "result" || res.Status != "completed" || res.Value["text/plain"] != "42" {
		t.Fatalf("streamed cell's result: %s", last.data)
	}
	for _, ev := range events {
		if ev.name == "stdout" {
			if last.at-ev.at < 800*time.Millisecond {
				t.Errorf("first stdout at %v, result at %v: a cell's output is not live", ev.at, last.at)
			}
			break
		}
	}

	// A client that goes away interrupts its cell; the state survives.
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.url+"/api/sandbox/execute",
		bytes.NewReader(mustJSON(t, cell("import time\ny = 1\ntime.sleep(60)\ny = 2"))))
	req.Header.Set("Content-Type", "application/json")
	time.AfterFunc(time.Second, cancel)
	start := time.Now()
	if resp, err := ts.client.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the canceled cell answered %d", resp.StatusCode)
	}
	resp, data := ts.execute(t, cell("(x, y)"))
	var after struct {
		Value     map[string]string `json:"result"`
		Restarted bool              `json:"restarted"`
	}
	if err := json.Unmarshal(data, &after); err != nil || resp.StatusCode != http.StatusOK || after.Value["text/plain"] != "(41, 1)" || after.Restarted {
		t.Errorf("after a canceled cell: %d %s", resp.StatusCode, data)
	}
	if waited := time.Since(start); waited > 30*time.Second {
		t.Errorf("the next cell waited %v: the canceled cell ran on", waited)
	}

	// WebSocket: the cell's output streams and its result comes.
	w := ts.ws(t, "")
	w.start(cell("print('ws', x)\nx * 2"))
	r := w.result()
	if r.Status != "completed" || r.Stdout != "ws 41\n" || r.Value["text/plain"] != "82" || w.stdout() != "ws 41\n" {
		t.Errorf("a cell over the WebSocket: %+v (streamed %q)", r, w.stdout())
	}
}
