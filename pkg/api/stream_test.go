package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/executor"
)

// sseEvent is one parsed Server-Sent Event and when it arrived.
type sseEvent struct {
	name string
	data []byte
	at   time.Duration
}

// stream posts an execution with Accept: text/event-stream and reads the
// events as they arrive.
func (ts *testServer) stream(t *testing.T, body any) (*http.Response, []sseEvent) {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), "POST", ts.url+"/api/sandbox/execute", bytes.NewReader(mustJSON(t, body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	start := time.Now()
	resp, err := ts.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp, nil
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	var events []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			cur = sseEvent{name: strings.TrimPrefix(line, "event: "), at: time.Since(start)}
		case strings.HasPrefix(line, "data: "):
			cur.data = []byte(strings.TrimPrefix(line, "data: "))
		case line == "" && cur.name != "":
			events = append(events, cur)
			cur = sseEvent{}
		}
	}
	return resp, events
}

// checkEvents validates every event against the document and returns the
// concatenated bytes of each stream and the final event.
func checkEvents(t *testing.T, events []sseEvent) (map[string][]byte, sseEvent) {
	t.Helper()
	if len(events) == 0 {
		t.Fatal("no events")
	}
	streams := map[string][]byte{}
	for i, ev := range events[:len(events)-1] {
		if err := testDoc.validate("/components/schemas/StreamEvent", ev.data); err != nil {
			t.Fatalf("event %d (%s) does not match StreamEvent: %v: %s", i, ev.name, err, ev.data)
		}
		var e Event
		json.Unmarshal(ev.data, &e)
		if e.Type != ev.name {
			t.Errorf("event %s carries type %s", ev.name, e.Type)
		}
		if e.Offset != int64(len(streams[e.Type])) {
			t.Errorf("%s offset %d, want %d", e.Type, e.Offset, len(streams[e.Type]))
		}
		chunk := []byte(e.Data)
		if e.Encoding == "base64" {
			chunk, _ = base64.StdEncoding.DecodeString(e.Data)
		}
		streams[e.Type] = append(streams[e.Type], chunk...)
	}
	last := events[len(events)-1]
	schema := map[string]string{"result": "/components/schemas/ExecuteResponse", "error": "/components/schemas/Error"}[last.name]
	if schema == "" {
		t.Fatalf("last event is %q, want result or error", last.name)
	}
	if err := testDoc.validate(schema, last.data); err != nil {
		t.Fatalf("%s event does not match the document: %v", last.name, err)
	}
	return streams, last
}

func TestStreamIsLive(t *testing.T) {
	ts := startServer(t, testConfig())
	_, events := ts.stream(t, py("import time, sys\nprint('first', flush=True)\nsys.stderr.write('warn\\n'); sys.stderr.flush()\ntime.sleep(1)\nprint('second')"))
	streams, last := checkEvents(t, events)
	if string(streams["stdout"]) != "first\nsecond\n" || string(streams["stderr"]) != "warn\n" {
		t.Fatalf("streams %q", streams)
	}
	res := decodeResult(t, last.data)
	if last.name != "result" || res.Status != "completed" || res.Stdout != "first\nsecond\n" {
		t.Fatalf("result %+v", res)
	}
	// stdout and stderr are separate pipes: their events may interleave
	// either way, but "first" must come long before the program ends.
	for _, ev := range events {
		if ev.name == "stdout" {
			if last.at-ev.at < 800*time.Millisecond {
				t.Fatalf("first stdout event at %v, result at %v: output is not live", ev.at, last.at)
			}
			break
		}
	}
}

func TestStreamEncodings(t *testing.T) {
	ts := startServer(t, testConfig())
	// A euro sign split across two writes arrives whole; a lone 0xff is base64.
	code := "import sys, time\nsys.stdout.buffer.write(b'\\xe2\\x82'); sys.stdout.flush(); time.sleep(0.2)\nsys.stdout.buffer.write(b'\\xac\\n'); sys.stdout.flush(); time.sleep(0.2)\nsys.stdout.buffer.write(b'\\xff\\n')"
	_, events := ts.stream(t, py(code))
	streams, _ := checkEvents(t, events)
	if got := streams["stdout"]; !bytes.Equal(got, []byte("€\n\xff\n")) {
		t.Fatalf("stdout %q", got)
	}
	var texts, b64 int
	for _, ev := range events[:len(events)-1] {
		var e Event
		json.Unmarshal(ev.data, &e)
		if e.Encoding == "base64" {
			b64++
		} else if strings.Contains(e.Data, "€") {
			texts++
		}
	}
	if texts != 1 || b64 != 1 {
		t.Errorf("want the euro sign as one text event and 0xff as base64: %d text, %d base64", texts, b64)
	}
}

func TestStreamCompileAndLimits(t *testing.T) {
	ts := startServer(t, testConfig())
	_, events := ts.stream(t, map[string]any{"language": "c", "code": "int main(void){ return undefined_name; }"})
	streams, last := checkEvents(t, events)
	if res := decodeResult(t, last.data); res.Status != "error_compile" || !strings.Contains(string(streams["compile"]), "undefined_name") {
		t.Fatalf("status %s compile %q", res.Status, streams["compile"])
	}
	_, events = ts.stream(t, with(py("while True: print('x' * 100)"), "max_output_bytes", 1000))
	streams, last = checkEvents(t, events)
	res := decodeResult(t, last.data)
	if len(streams["stdout"]) != 1000 || !res.StdoutTruncated || res.LimitReason != "output" {
		t.Fatalf("streamed %d bytes, truncated=%v limit=%q", len(streams["stdout"]), res.StdoutTruncated, res.LimitReason)
	}
}

func TestStreamQueueFullIsPlain503(t *testing.T) {
	cfg := testConfig()
	cfg.Workers, cfg.Queue = 1, 0
	ts := startServer(t, cfg)
	go ts.send(t, executeRequest(t, py("import time; time.sleep(3)")))
	ts.waitInFlight(t, 1)
	resp, _ := ts.stream(t, py("print(1)"))
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

func TestIncompleteTail(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{{"abc", 0}, {"a\xe2\x82", 2}, {"a\xe2", 1}, {"\xe2\x82\xac", 0}, {"\xf0\x9f\x9a", 3}, {"\xff", 0}, {"", 0}, {"\x80\x80\x80\x80", 0}} {
		if got := incompleteTail([]byte(c.in)); got != c.want {
			t.Errorf("incompleteTail(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

// TestStreamErrorEventStatus: the error event that ends a stream instead
// of a result says with what status the same failure answers without
// streaming, and which execution it was; it matches the document's Error.
func TestStreamErrorEventStatus(t *testing.T) {
	for _, c := range []struct {
		err    error
		res    *executor.Result
		status int
		id     string
	}{
		{errCanceled, &executor.Result{ExecutionID: "exec_1"}, http.StatusServiceUnavailable, "exec_1"},
		{&requestError{status: http.StatusUnprocessableEntity, msg: "no such version"}, nil, http.StatusUnprocessableEntity, ""},
		{errors.New("sandbox: setup failed"), nil, http.StatusInternalServerError, ""},
	} {
		var name string
		var data []byte
		sink := newEventSink(func(event string, payload any) error {
			name, data = event, mustJSON(t, payload)
			return nil
		})
		sink.finish(c.res, c.err)
		var e StreamError
		if err := json.Unmarshal(data, &e); err != nil || name != "error" {
			t.Fatalf("%v: event %s: %s", c.err, name, data)
		}
		if e.Status != c.status || e.ExecutionID != c.id || e.Error == "" {
			t.Errorf("%v: error event %s, want status %d and execution_id %q", c.err, data, c.status, c.id)
		}
		if err := testDoc.validate("/components/schemas/Error", data); err != nil {
			t.Errorf("%v: error event does not match the document: %v", c.err, err)
		}
	}
}
