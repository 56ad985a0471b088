package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sandbox-run/sandbox-run/pkg/executor"
)

// The WebSocket endpoint, against a real server on 127.0.0.1. Every
// handshake answer is checked against the OpenAPI document like the HTTP
// answers, and every message against its WSServerMessage schema.

// wsClient is a test's connection; it collects the output events.
type wsClient struct {
	t      testing.TB
	c      *websocket.Conn
	resp   *http.Response
	output map[string]*bytes.Buffer // by stream
}

// dialWS makes the handshake and checks the answer against the document.
func (ts *testServer) dialWS(t testing.TB, header http.Header, subprotocols ...string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	return ts.dialWSURL(t, ts.url+WSPath, header, subprotocols...)
}

func (ts *testServer) dialWSURL(t testing.TB, url string, header http.Header, subprotocols ...string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: header, Subprotocols: subprotocols})
	if resp != nil {
		var body []byte
		if resp.Body != nil {
			body, _ = io.ReadAll(resp.Body)
		}
		testDoc.check(t, http.MethodGet, WSPath, resp, body)
	}
	if c != nil {
		c.SetReadLimit(-1)
	}
	return c, resp, err
}

// ws opens a connection (with key, if not "") or fails the test.
func (ts *testServer) ws(t testing.TB, key string) *wsClient {
	t.Helper()
	h := http.Header{}
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	c, resp, err := ts.dialWS(t, h)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	w := &wsClient{t: t, c: c, resp: resp, output: map[string]*bytes.Buffer{}}
	t.Cleanup(func() { c.CloseNow() })
	return w
}

// start sends the first message: body with "type": "execute".
func (w *wsClient) start(body map[string]any) {
	w.t.Helper()
	w.send(with(body, "type", "execute"))
}

func (w *wsClient) send(v any) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.c.Write(ctx, websocket.MessageText, mustJSON(w.t, v)); err != nil {
		w.t.Fatalf("send %v: %v", v, err)
	}
}

func (w *wsClient) sendBinary(b []byte) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.c.Write(ctx, websocket.MessageBinary, b); err != nil {
		w.t.Fatalf("send binary: %v", err)
	}
}

// recv reads one message, checks it against the document and, for an
// output event, its offset, and collects its data.
func (w *wsClient) recv() WSServerMessage {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	typ, data, err := w.c.Read(ctx)
	if err != nil {
		w.t.Fatalf("read: %v (stdout so far %q)", err, w.stdout())
	}
	if typ != websocket.MessageText {
		w.t.Fatalf("a %v message from the server", typ)
	}
	if err := testDoc.validate("/components/schemas/WSServerMessage", data); err != nil {
		w.t.Errorf("message does not match WSServerMessage: %v\n%s", err, truncate(data))
	}
	var m WSServerMessage
	if err := json.Unmarshal(data, &m); err != nil {
		w.t.Fatalf("message %s: %v", truncate(data), err)
	}
	switch m.Type {
	case "stdout", "stderr", "compile":
		b := w.output[m.Type]
		if b == nil {
			b = &bytes.Buffer{}
			w.output[m.Type] = b
		}
		if m.Offset != int64(b.Len()) {
			w.t.Errorf("%s event at offset %d, want %d", m.Type, m.Offset, b.Len())
		}
		chunk := []byte(m.Data)
		if m.Encoding == "base64" {
			if chunk, err = base64.StdEncoding.DecodeString(m.Data); err != nil {
				w.t.Errorf("base64 event: %v", err)
			}
		}
		b.Write(chunk)
	}
	return m
}

func (w *wsClient) stdout() string {
	if b := w.output["stdout"]; b != nil {
		return b.String()
	}
	return ""
}

// waitStdout reads output until stdout ends with suffix.
func (w *wsClient) waitStdout(suffix string) {
	w.t.Helper()
	for !strings.HasSuffix(w.stdout(), suffix) {
		if m := w.recv(); m.Type == "result" || m.Type == "error" {
			w.t.Fatalf("the run ended (%s %s) before stdout ended with %q; stdout %q", m.Type, m.Error, suffix, w.stdout())
		}
	}
}

// final reads up to the result or error, and then wants a normal close.
func (w *wsClient) final() WSServerMessage {
	w.t.Helper()
	for {
		m := w.recv()
		if m.Type != "result" && m.Type != "error" {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, data, err := w.c.Read(ctx)
		if websocket.CloseStatus(err) != websocket.StatusNormalClosure {
			w.t.Errorf("after the %s: %v %q, want a normal close", m.Type, err, data)
		}
		return m
	}
}

// result wants the run's result.
func (w *wsClient) result() *executor.Result {
	w.t.Helper()
	m := w.final()
	if m.Type != "result" || m.Result == nil {
		w.t.Fatalf("got %s %q (status %d), want a result", m.Type, m.Error, m.Status)
	}
	return m.Result
}

// wantWSError wants an error message with status, containing the texts.
func (w *wsClient) wantError(status int, contains ...string) WSServerMessage {
	w.t.Helper()
	m := w.final()
	if m.Type != "error" || m.Status != status {
		w.t.Errorf("got %s %q status %d, want an error of status %d", m.Type, m.Error, m.Status, status)
	}
	for _, c := range contains {
		if !strings.Contains(m.Error, c) {
			w.t.Errorf("error %q lacks %q", m.Error, c)
		}
	}
	return m
}

const guessProgram = `import os, sys
secret = int(os.environ["SECRET"])
tries = 0
while True:
    print("guess?", flush=True)
    line = sys.stdin.readline()
    if not line:
        print("no more guesses", flush=True)
        sys.exit(3)
    tries += 1
    n = int(line)
    if n < secret:
        print("higher", flush=True)
    elif n > secret:
        print("lower", flush=True)
    else:
        print(f"correct in {tries}", flush=True)
        break
`

// A program that asks and waits gets its answers: each guess is sent only
// once its prompt has arrived, so the output is live and the program waits
// for input.
func TestWebSocketGuessTheNumber(t *testing.T) {
	t.Parallel()
	ts := startServer(t, testConfig())
	w := ts.ws(t, "")
	if p := w.c.Subprotocol(); p != "" {
		t.Errorf("subprotocol %q though none was offered", p)
	}
	w.start(with(py(guessProgram), "env", map[string]string{"SECRET": "37"}, "timeout_seconds", 30))
	lo, hi, tries := 1, 100, 0
	for {
		w.waitStdout("guess?\n")
		guess := (lo + hi) / 2
		tries++
		line := fmt.Sprintf("%d\n", guess)
		switch tries % 3 { // the three ways to send stdin
		case 0:
			w.send(map[string]string{"type": "stdin", "data": line})
		case 1:
			w.send(map[string]string{"type": "stdin", "data": base64.StdEncoding.EncodeToString([]byte(line)), "encoding": "base64"})
		case 2:
			w.sendBinary([]byte(line))
		}
		before := len(w.stdout())
		for !strings.Contains(w.stdout()[before:], "\n") {
			w.recv()
		}
		answer, _, _ := strings.Cut(w.stdout()[before:], "\n")
		switch {
		case answer == "higher":
			lo = guess + 1
		case answer == "lower":
			hi = guess - 1
		case answer == fmt.Sprintf("correct in %d", tries):
			res := w.result()
			if res.Status != executor.StatusCompleted || res.ExitCode != 0 || res.Stdout != w.stdout() {
				t.Errorf("result %+v; events' stdout %q", res, w.stdout())
			}
			if guess != 37 || tries > 7 {
				t.Errorf("guessed %d in %d tries", guess, tries)
			}
			return
		default:
			t.Fatalf("answer %q to %d; stdout %q", answer, guess, w.stdout())
		}
		if tries > 10 {
			t.Fatalf("no end: stdout %q", w.stdout())
		}
	}
}

// input_data is the start of stdin; eof ends it.
func TestWebSocketEOF(t *testing.T) {
	t.Parallel()
	ts := startServer(t, testConfig())
	w := ts.ws(t, "")
	w.start(map[string]any{"language": "bash", "code": "cat; echo done >&2", "input_data": "first\n"})
	w.waitStdout("first\n")
	w.send(map[string]string{"type": "stdin", "data": "second\n"})
	w.waitStdout("first\nsecond\n") // cat echoes as it reads
	w.sendBinary([]byte{0xff, 0xfe, '\n'})
	w.send(map[string]string{"type": "eof"})
	w.send(map[string]string{"type": "eof"}) // twice is fine
	res := w.result()
	want := "first\nsecond\n\xff\xfe\n"
	if res.Status != executor.StatusCompleted || w.stdout() != want || res.Stderr != "done\n" {
		t.Errorf("result %+v, events' stdout %q", res, w.stdout())
	}
	if res.StdoutEncoding != "base64" {
		t.Errorf("stdout_encoding %q", res.StdoutEncoding)
	}
}

// kill ends the run: the result says canceled.
func TestWebSocketKill(t *testing.T) {
	t.Parallel()
	ts := startServer(t, testConfig())
	w := ts.ws(t, "")
	start := time.Now()
	w.start(py("print('waiting', flush=True)\ninput()\nprint('never')"))
	w.waitStdout("waiting\n")
	w.send(map[string]string{"type": "resize", "cols": "80"}) // ignored
	w.send(map[string]string{"type": "kill"})
	res := w.result()
	if res.LimitReason != "canceled" || res.Status == executor.StatusCompleted || strings.Contains(res.Stdout, "never") {
		t.Errorf("result %+v, want limit_reason canceled", res)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %v", d)
	}
}

// Output caps apply to the streamed output too.
func TestWebSocketOutputCap(t *testing.T) {
	t.Parallel()
	ts := startServer(t, testConfig())
	w := ts.ws(t, "")
	w.start(with(py("import sys\nfor i in range(100):\n    sys.stdout.write('x' * 100 + '\\n')\n    sys.stdout.flush()"), "max_output_bytes", 1000))
	res := w.result()
	if !res.StdoutTruncated || res.LimitReason != "output" || len(res.Stdout) != 1000 {
		t.Errorf("result: truncated %v, limit %q, %d bytes of stdout", res.StdoutTruncated, res.LimitReason, len(res.Stdout))
	}
	if n := len(w.stdout()); n > 1000 {
		t.Errorf("%d bytes of stdout events, above the cap of 1000", n)
	}
}

// Stdin is held up to a bound while the program does not read: a client
// that sends more waits (TCP back-pressure), and nothing is lost.
func TestWebSocketStdinBackPressure(t *testing.T) {
	t.Parallel()
	ts := startServer(t, testConfig())
	w := ts.ws(t, "")
	w.start(py("import sys, time\nprint('sleeping', flush=True)\ntime.sleep(1)\ndata = sys.stdin.buffer.read()\nprint(len(data), data.count(b'y'))"))
	w.waitStdout("sleeping\n")
	chunk := bytes.Repeat([]byte("y"), 64<<10)
	for range 48 { // 3 MiB, twelve times the buffer
		w.sendBinary(chunk)
	}
	w.send(map[string]string{"type": "eof"})
	res := w.result()
	if want := fmt.Sprintf("sleeping\n%d %d\n", 48<<16, 48<<16); res.Stdout != want {
		t.Errorf("stdout %q, want %q", res.Stdout, want)
	}
}

func TestStdinPipeBound(t *testing.T) {
	t.Parallel()
	p := newStdinPipe(10)
	if err := p.Write([]byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	wrote := make(chan error, 1)
	go func() { wrote <- p.Write([]byte("abcdefghijklmno")) }()
	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-wrote:
		t.Fatalf("Write beyond the bound returned at once (%v)", err)
	default:
	}
	if waiting, n := p.stalled(); !waiting || n != 1 {
		t.Errorf("stalled %v %d", waiting, n)
	}
	p.mu.Lock()
	if p.buf.Len() > 10 {
		t.Errorf("%d bytes held, above the bound", p.buf.Len())
	}
	p.mu.Unlock()
	var got []byte
	buf := make([]byte, 4)
	for len(got) < 25 {
		n, err := p.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, buf[:n]...)
	}
	if err := <-wrote; err != nil || string(got) != "0123456789abcdefghijklmno" {
		t.Errorf("read %q, write %v", got, err)
	}
	p.CloseWrite()
	if n, err := p.Read(buf); n != 0 || err != io.EOF {
		t.Errorf("after eof: %d %v", n, err)
	}
	// Close unblocks a waiting writer and reader.
	q := newStdinPipe(1)
	q.Write([]byte("a"))
	go func() { wrote <- q.Write([]byte("b")) }()
	read := make(chan error, 1)
	r := newStdinPipe(1)
	go func() { _, err := r.Read(buf); read <- err }()
	time.Sleep(20 * time.Millisecond)
	q.Close()
	r.Close()
	if err := <-wrote; !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("write after close: %v", err)
	}
	if err := <-read; !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("read after close: %v", err)
	}
}

// A client that goes away kills its sandbox.
func TestWebSocketDisconnectKillsSandbox(t *testing.T) {
	wantNoSandbox(t) // nothing of earlier tests
	cfg := testConfig()
	cfg.Workers = 1
	ts := startServer(t, cfg)
	w := ts.ws(t, "")
	start := time.Now()
	w.start(py("import time\nprint('up', flush=True)\ntime.sleep(30)"))
	w.waitStdout("up\n")
	if len(sandboxProcesses()) == 0 {
		t.Fatal("no sandbox process while the program runs")
	}
	w.c.CloseNow() // no close handshake: the connection just ends
	wantNoSandbox(t)
	waitFor(5*time.Second, func() bool { _, m := ts.ready(t); return m["in_flight"] == float64(0) })
	// The worker is free for the next run.
	w2 := ts.ws(t, "")
	w2.start(py("print('next')"))
	if res := w2.result(); res.Stdout != "next\n" {
		t.Errorf("next run: %+v", res)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("took %v: the sleep was not killed", d)
	}
	ts.wantCanceled(t, 1)
}

// Bad first messages get an error message and a normal close.
func TestWebSocketInvalidFirstMessage(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.MaxBodyBytes = 4096
	ts := startServer(t, cfg)
	cases := []struct {
		name     string
		msg      any // JSON, or []byte sent as a binary message
		status   int
		contains string
	}{
		{"not JSON", "{nope", 400, "malformed JSON"},
		{"no type", py("print(1)"), 400, `"type": "execute"`},
		{"other type", with(py("print(1)"), "type", "stdin"), 400, `"type": "execute"`},
		{"unknown field", with(py("print(1)"), "type", "execute", "bogus", 1), 400, "bogus"},
		{"no code", map[string]any{"type": "execute", "language": "python"}, 400, "code is required"},
		{"limit above maximum", with(py("print(1)"), "type", "execute", "timeout_seconds", 1e6), 400, "above the maximum"},
		{"async", with(py("print(1)"), "type", "execute", "async", true), 400, "async"},
		{"test cases", with(py("print(1)"), "type", "execute", "test_cases", []map[string]any{{"input_data": "x"}}), 400, "test_cases"},
		{"unsupported language", map[string]any{"type": "execute", "language": "cobol-2099", "code": "x"}, 400, "cobol-2099"},
		{"too large", with(py(strings.Repeat("#", 5000)), "type", "execute"), 413, "larger than 4096"},
		{"binary", []byte(`{"type":"execute"}`), 400, "JSON text message"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := ts.ws(t, "")
			if b, ok := c.msg.([]byte); ok {
				w.sendBinary(b)
			} else {
				w.send(c.msg)
			}
			w.wantError(c.status, c.contains)
		})
	}
}

// Messages that break the protocol during a run end it with an error.
func TestWebSocketProtocolErrors(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.MaxBodyBytes = 4096
	ts := startServer(t, cfg)
	wait := py("print('ready', flush=True)\nimport sys, time\nsys.stdin.read()\ntime.sleep(30)\nprint('never')")
	cases := []struct {
		name     string
		send     func(w *wsClient)
		status   int
		contains string
	}{
		{"unknown type", func(w *wsClient) { w.send(map[string]string{"type": "paste"}) }, 400, `unknown message type "paste"`},
		{"not JSON", func(w *wsClient) { w.c.Write(context.Background(), websocket.MessageText, []byte("{")) }, 400, "malformed message"},
		{"bad base64", func(w *wsClient) { w.send(map[string]string{"type": "stdin", "data": "!!", "encoding": "base64"}) }, 400, "base64"},
		{"bad encoding", func(w *wsClient) { w.send(map[string]string{"type": "stdin", "data": "x", "encoding": "utf-16"}) }, 400, "utf-16"},
		{"second execute", func(w *wsClient) { w.start(py("print(2)")) }, 400, "one execute message"},
		{"stdin after eof", func(w *wsClient) {
			w.send(map[string]string{"type": "eof"})
			w.send(map[string]string{"type": "stdin", "data": "late"})
		}, 400, "stdin after eof"},
		{"too much stdin", func(w *wsClient) {
			w.sendBinary(bytes.Repeat([]byte("z"), 3000))
			w.sendBinary(bytes.Repeat([]byte("z"), 3000))
		}, 413, "stdin larger than 4096"},
		{"message too big", func(w *wsClient) { w.sendBinary(make([]byte, wsMessageLimit+1)) }, 413, "message larger than"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := ts.ws(t, "")
			w.start(wait)
			w.waitStdout("ready\n")
			c.send(w)
			m := w.wantError(c.status, c.contains)
			if m.ExecutionID == "" {
				t.Errorf("no execution_id in %+v", m)
			}
			if strings.Contains(w.stdout(), "never") {
				t.Errorf("the run went on: %q", w.stdout())
			}
		})
	}
}

// Keys: the Authorization header, or the bearer subprotocol; never the URL.
func TestWebSocketAuth(t *testing.T) {
	t.Parallel()
	ts := startServer(t, keyConfig(
		APIKey{ID: "runner", Key: "exec-secret", Scopes: []string{ScopeExecute}},
		APIKey{ID: "ops", Key: "admin-secret", Scopes: []string{ScopeAdmin}},
		APIKey{ID: "slow", Key: "slow-secret", RatePerSecond: 0.01, Burst: 1},
		APIKey{ID: "one", Key: "one-secret", MaxConcurrent: 1},
	))
	refused := func(name string, status int, header http.Header, url string, subprotocols ...string) *http.Response {
		t.Helper()
		c, resp, err := ts.dialWSURL(t, url, header, subprotocols...)
		if err == nil {
			c.CloseNow()
			t.Errorf("%s: the handshake succeeded", name)
			return nil
		}
		if resp == nil || resp.StatusCode != status {
			t.Errorf("%s: %v, want %d", name, err, status)
		}
		return resp
	}
	bearer := func(k string) http.Header { return http.Header{"Authorization": {"Bearer " + k}} }
	u := ts.url + WSPath
	if resp := refused("no key", 401, nil, u); resp != nil && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("401 without WWW-Authenticate: %v", resp.Header)
	}
	refused("wrong key", 401, bearer("wrong"), u)
	refused("wrong key subprotocol", 401, nil, u, WSSubprotocol, WSBearerPrefix+"wrong")
	refused("key in the URL", 401, nil, u+"?api_key=exec-secret")
	refused("another origin", 403, http.Header{"Origin": {"http://evil.example"}, "Authorization": {"Bearer exec-secret"}}, u)

	run := func(name string, header http.Header, subprotocols ...string) {
		t.Helper()
		c, resp, err := ts.dialWS(t, header, subprotocols...)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			return
		}
		w := &wsClient{t: t, c: c, resp: resp, output: map[string]*bytes.Buffer{}}
		defer c.CloseNow()
		if len(subprotocols) > 0 && c.Subprotocol() != WSSubprotocol {
			t.Errorf("%s: subprotocol %q, want %q", name, c.Subprotocol(), WSSubprotocol)
		}
		if p := resp.Header.Get("Sec-WebSocket-Protocol"); strings.Contains(p, "secret") {
			t.Errorf("%s: the key is echoed: %q", name, p)
		}
		w.start(py("print('authorized')"))
		if res := w.result(); res.Stdout != "authorized\n" {
			t.Errorf("%s: %+v", name, res)
		}
	}
	run("execute key", bearer("exec-secret"))
	run("admin key", bearer("admin-secret"))
	run("key as subprotocol", nil, WSSubprotocol, WSBearerPrefix+"exec-secret")
	run("same origin", http.Header{"Origin": {ts.url}, "Authorization": {"Bearer exec-secret"}})

	// The key's rate limit and concurrency cap, before the upgrade.
	run("rate limited key, first", bearer("slow-secret"))
	refused("rate limited key, second", 429, bearer("slow-secret"), u)
	first := ts.ws(t, "one-secret")
	first.start(py("print('one', flush=True)\ninput()"))
	first.waitStdout("one\n")
	refused("concurrency cap", 429, bearer("one-secret"), u)
	first.send(map[string]string{"type": "stdin", "data": "\n"})
	first.result()
	waitFor(5*time.Second, func() bool {
		_, m := ts.ready(t)
		return m["in_flight"] == float64(0)
	})
	run("concurrency cap, after", bearer("one-secret"))

	// Plain HTTP is told to upgrade.
	resp, data := ts.call(t, request{method: http.MethodGet, path: WSPath, key: "exec-secret"})
	wantError(t, resp, data, http.StatusUpgradeRequired, "WebSocket")
	if resp.Header.Get("Upgrade") != "websocket" {
		t.Errorf("426 without Upgrade: %v", resp.Header)
	}
	resp, data = ts.call(t, request{method: http.MethodPost, path: WSPath, key: "exec-secret"})
	wantError(t, resp, data, http.StatusMethodNotAllowed)
}

// A full queue is an error of status 503 after the upgrade.
func TestWebSocketQueueFull(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Workers, cfg.Queue = 1, 0
	ts := startServer(t, cfg)
	busy := ts.ws(t, "")
	busy.start(py("print('busy', flush=True)\ninput()"))
	busy.waitStdout("busy\n")
	w := ts.ws(t, "")
	w.start(py("print(1)"))
	w.wantError(http.StatusServiceUnavailable, "busy")
	busy.send(map[string]string{"type": "eof"})
	busy.result()
}

// A connection outlives the server's read timeout: hijacked connections
// have no deadlines.
func TestWebSocketOutlivesServerTimeouts(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.ReadTimeoutSeconds, cfg.IdleTimeoutSeconds = 1, 1
	ts := serveServer(t, cfg)
	w := ts.ws(t, "")
	w.start(py("print('name?', flush=True)\nprint('hello ' + input())"))
	w.waitStdout("name?\n")
	time.Sleep(2500 * time.Millisecond)
	w.send(map[string]string{"type": "stdin", "data": "late\n"})
	if res := w.result(); res.Stdout != "name?\nhello late\n" {
		t.Errorf("result %+v", res)
	}
}

// Shutdown lets interactive runs finish within the grace period, then
// kills them.
func TestWebSocketGracefulShutdown(t *testing.T) {
	cfg := testConfig()
	cfg.ShutdownGraceSeconds = 3
	ts := serveServer(t, cfg)
	quick, slow := ts.ws(t, ""), ts.ws(t, "")
	quick.start(py("print('q', flush=True)\ns = input()\nimport time\ntime.sleep(1)\nprint(s)"))
	slow.start(py("import time\nprint('s', flush=True)\ntime.sleep(60)"))
	quick.waitStdout("q\n")
	slow.waitStdout("s\n")
	start := time.Now()
	ts.cancel()
	// New connections are refused once the listener is closed; the open
	// ones go on.
	time.Sleep(300 * time.Millisecond)
	quick.send(map[string]string{"type": "stdin", "data": "finished\n"})
	if res := quick.result(); res.Status != executor.StatusCompleted || res.Stdout != "q\nfinished\n" {
		t.Errorf("quick run: %+v", res)
	}
	slow.wantError(http.StatusServiceUnavailable, "shutting down")
	if d := time.Since(start); d < 2*time.Second || d > 15*time.Second {
		t.Errorf("the slow run ended %v after the shutdown began, want about the grace period of 3s", d)
	}
	select {
	case err := <-ts.done:
		ts.done <- err
	case <-time.After(20 * time.Second):
		t.Errorf("Serve did not return")
	}
}
