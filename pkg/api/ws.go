package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/sandbox-run/sandbox-run/pkg/runner"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// The WebSocket endpoint for interactive programs: GET /api/sandbox/ws.
//
// A program that asks for input and waits gets it: the client sends stdin
// as the program runs, and receives the same typed events as the SSE
// stream (see stream.go).
//
// Handshake. A WebSocket handshake (RFC 6455) on GET /api/sandbox/ws. It
// needs the execute scope when keys are configured, given as
// "Authorization: Bearer <key>". Clients that cannot set headers
// (browsers) offer two subprotocols instead: "sandbox-run.v1" and
// "bearer.<key>" (the key must then be a valid header token, as hex or
// base64url keys are). The server only ever selects "sandbox-run.v1", so
// the key is never echoed back; a key in the URL (?api_key=) is not
// accepted. Refusals are HTTP answers, as for POST /api/sandbox/execute:
// 401/403 (key), 429 (the key's rate or concurrency cap, with
// Retry-After), 503 (shutting down), 426 (not a WebSocket handshake), and
// the WebSocket library's own 400 (a malformed handshake) and 403 (a
// browser page of another origin: cross-origin handshakes are refused, so
// no web page can drive a server with auth off on loopback).
//
// Client messages. The first is a JSON text message:
//
//	{"type": "execute", ...the fields of POST /api/sandbox/execute}
//
// checked like a POST body (unknown fields, bounds, max_body_bytes, the
// key's rate limit and concurrency, file ids, sessions) and run through
// the same worker pool. async, callback_url and test_cases are refused;
// input_data, if any, is the start of stdin. It must come within
// read_timeout_seconds, or the connection is closed. Then, any number of:
//
//	{"type": "stdin", "data": "text"}                  bytes for the program's stdin
//	{"type": "stdin", "data": "AAE=", "encoding": "base64"}
//	(a binary message)                                 its bytes, as is, for stdin
//	{"type": "eof"}                                    close stdin (the program reads EOF)
//	{"type": "kill"}                                   end the run: its result has limit_reason "canceled"
//	{"type": "resize", ...}                            accepted and ignored (no TTY)
//
// A message is at most 1 MiB, and all of stdin (input_data included) at
// most max_body_bytes. A malformed or unknown message, stdin after eof,
// or too much stdin ends the run with an error message (a protocol
// error). Closing the connection, or its loss, kills the run.
//
// Server messages, all JSON text:
//
//	{"type": "compile"|"stdout"|"stderr", "offset": N, "data": "...", "encoding": "base64"?}
//	{"type": "result", "result": {...the object POST /api/sandbox/execute answers}}
//	{"type": "error", "error": "...", "status": 400, "execution_id": "..."?}
//
// Output events are the SSE stream's: offsets count each stream's bytes
// before the chunk, chunks are UTF-8 text or base64. Exactly one result
// or error ends the conversation, then the server closes the connection
// normally (1000). An error's status is what POST would have answered
// (400 invalid request or protocol error, 413 too large, 500, 503 queue
// full or shutting down), or 0 when the client killed the run before it
// started. A sandbox set-up failure is a result of status error_setup.
//
// Limits and back-pressure. Output caps (max_output_bytes) apply as
// without streaming. Nothing is buffered for a slow reader: writing an
// event waits for the connection, so the program blocks on its full pipe
// while its time limits run; a client that accepts nothing for 30 s is
// taken for gone (the run is killed). For stdin, at most 256 KiB that the
// program has not read yet are held; beyond that the server stops reading
// the socket until the program reads (TCP back-pressure on the client),
// so an eof or kill sent behind unread input waits too: close the
// connection to kill such a run at once.
//
// Keepalive. After 15 s without a message the server pings (WebSocket
// ping); a client that does not answer within 15 s is taken for gone.
// Clients answer pings by reading the connection, which they do anyway.
//
// Deadlines. net/http clears the connection's read and write deadlines
// (ReadTimeout, WriteTimeout) when a handler hijacks it, so a run lasts as
// long as its own limits (up to the maximum timeout), whatever the
// server's timeouts. Graceful shutdown waits for interactive runs like
// the others: http.Server.Shutdown does not track hijacked connections,
// so a background task gives them the rest of the grace period, then
// kills them (they end with an error of status 503).

const (
	// wsMessageLimit bounds a message after the first.
	wsMessageLimit = 1 << 20
	// wsStdinBuffer bounds the stdin held for the program.
	wsStdinBuffer = 256 << 10
	// wsWriteTimeout is how long a message may wait for a client.
	wsWriteTimeout = 30 * time.Second
	// wsEnvelope is room for "type" in the first message besides the body.
	wsEnvelope = 64
)

type wsResultMessage struct {
	Type   string       `json:"type"`
	Result *wire.Result `json:"result"`
}

type wsErrorMessage struct {
	Type string `json:"type"`
	StreamError
}

// streamErrorOf is the StreamError for err (SSE and WebSocket alike).
func streamErrorOf(err error, executionID string) StreamError {
	m := StreamError{Error: err.Error(), Status: http.StatusInternalServerError, ExecutionID: executionID}
	var re *requestError
	switch {
	case errors.As(err, &re):
		m.Status = re.status
	case errors.Is(err, errCanceled):
		m.Status, m.Error = http.StatusServiceUnavailable, "execution canceled: the server is shutting down"
	}
	return m
}

// wsEndpoint serves the WebSocket and keeps count of its connections for
// graceful shutdown.
type wsEndpoint struct {
	s      *Server
	active atomic.Int64
	// stop ends every interactive run at the end of the grace period.
	stop    context.Context
	stopAll context.CancelFunc
}

func (s *Server) registerWebSocket() {
	h := &wsEndpoint{s: s}
	h.stop, h.stopAll = context.WithCancel(context.Background())
	s.route("GET "+WSPath, "", h.serve) // authenticates itself (the subprotocol)
	s.background = append(s.background, h.drain)
}

// drain runs while Serve does. Serve's Shutdown does not wait for hijacked
// connections: once it is over, drain lets interactive runs finish until
// the grace period (counted from the start of the shutdown) ends, and then
// kills them.
func (h *wsEndpoint) drain(ctx context.Context) {
	var since time.Time
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for since.IsZero() && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-t.C:
			if h.s.run.Draining() {
				since = time.Now()
			}
		}
	}
	<-ctx.Done()
	if since.IsZero() {
		since = time.Now()
	}
	if n := h.active.Load(); n > 0 {
		h.s.log.Info("waiting for interactive runs", "connections", n)
	}
	deadline := since.Add(seconds(h.s.cfg.ShutdownGraceSeconds))
	for h.active.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if h.active.Load() == 0 {
		return
	}
	h.s.log.Warn("grace period over: killing interactive runs", "connections", h.active.Load())
	h.stopAll()
	deadline = time.Now().Add(20 * time.Second) // the kill, the last message, the close handshake
	for h.active.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
}

func (h *wsEndpoint) serve(w http.ResponseWriter, r *http.Request) {
	s := h.s
	h.active.Add(1)
	defer h.active.Add(-1)
	key, status, msg := s.authenticate(wsAuthRequest(r), ScopeExecute)
	if status != 0 {
		refuseAuth(w, status, msg, nil)
		return
	}
	if !headerHasToken(r.Header, "Upgrade", "websocket") {
		w.Header().Set("Upgrade", "websocket")
		w.Header().Set("Connection", "Upgrade")
		s.reject(w, &requestError{status: http.StatusUpgradeRequired, msg: "this endpoint speaks WebSocket: send a WebSocket handshake (Upgrade: websocket), then the request as {\"type\": \"execute\", ...}"}, "invalid")
		return
	}
	r = r.WithContext(runner.WithCaller(r.Context(), callerOf(r, key)))
	leave, ok := s.admitKey(w, r, 1, true)
	if !ok {
		return
	}
	var once sync.Once
	leaveOnce := func() { once.Do(leave) }
	defer leaveOnce()
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		Subprotocols:    []string{WSSubprotocol},
		CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil {
		s.metrics.Rejected.WithLabelValues("invalid").Inc()
		return // Accept answered
	}
	defer conn.CloseNow()
	run := &wsRun{h: h, conn: conn, key: key, reqCtx: r.Context(), leave: leaveOnce}
	run.serve()
}

// wsAuthRequest returns r, or a copy with the key of a "bearer.<key>"
// subprotocol as its Authorization header when r has none.
func wsAuthRequest(r *http.Request) *http.Request {
	if r.Header.Get("Authorization") != "" {
		return r
	}
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(v, ",") {
			if key, ok := strings.CutPrefix(strings.TrimSpace(p), WSBearerPrefix); ok && key != "" {
				r2 := new(http.Request)
				*r2 = *r
				r2.Header = r.Header.Clone()
				r2.Header.Set("Authorization", "Bearer "+key)
				return r2
			}
		}
	}
	return r
}

// headerHasToken reports whether a comma-separated header lists token.
func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// wsRun is one connection's run.
type wsRun struct {
	h      *wsEndpoint
	conn   *websocket.Conn
	key    *runner.Key
	reqCtx context.Context // the handler's: ends when the server gives up on runs
	leave  func()          // gives the key's concurrency slot back

	sink   *eventSink
	stdin  *stdinPipe
	cancel context.CancelFunc // ends the run

	stdinBytes int64 // read by the reader loop only
	stdinMax   int64
	cell       bool // an interpreter cell: no stdin messages

	mu       sync.Mutex
	finished bool  // the run is over: what the client does no longer matters
	killed   bool  // the client asked
	gone     bool  // the connection failed
	protoErr error // the client broke the protocol
}

var errMessageTooBig = errors.New("message too big")

// readMessage reads one message of at most limit bytes.
func readMessage(ctx context.Context, c *websocket.Conn, limit int64) (websocket.MessageType, []byte, error) {
	typ, r, err := c.Reader(ctx)
	if err != nil {
		return 0, nil, err
	}
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return 0, nil, err
	}
	if int64(len(b)) > limit {
		return typ, nil, errMessageTooBig
	}
	return typ, b, nil
}

func (r *wsRun) serve() {
	s := r.h.s
	r.conn.SetReadLimit(-1) // readMessage bounds each message
	wait := seconds(s.cfg.ReadTimeoutSeconds)
	if wait <= 0 {
		wait = time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	typ, data, err := readMessage(ctx, r.conn, s.cfg.MaxBodyBytes+wsEnvelope)
	cancel()
	switch {
	case errors.Is(err, errMessageTooBig):
		s.metrics.Rejected.WithLabelValues("too_large").Inc()
		r.end(&requestError{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("request larger than %d bytes", s.cfg.MaxBodyBytes)}, "")
		return
	case err != nil:
		return // gone, or silent for too long (the connection is closed)
	case typ != websocket.MessageText:
		s.metrics.Rejected.WithLabelValues("invalid").Inc()
		r.end(badRequest(`the first message must be a JSON text message: {"type": "execute", ...}`), "")
		return
	}
	req, err := decodeWSExecute(data, &s.cfg)
	if err == nil {
		err = s.prepare(r.reqCtx, req, r.key)
	}
	if err != nil {
		s.metrics.Rejected.WithLabelValues("invalid").Inc()
		r.end(err, "")
		return
	}

	runCtx, cancelRun := context.WithCancel(r.reqCtx)
	defer cancelRun()
	stopRun := context.AfterFunc(r.h.stop, cancelRun)
	defer stopRun()
	r.cancel = cancelRun
	run := runner.Run{Request: req, Tenant: r.key.ID(), Via: "ws", Interactive: true}
	r.stdin = newStdinPipe(wsStdinBuffer)
	defer r.stdin.Close()
	r.stdinMax = s.cfg.MaxBodyBytes
	switch {
	case req.Interpreter:
		// An interpreter cell reads its stdin whole before it runs: it is
		// input_data alone (feed refuses stdin messages).
		r.cell = true
		r.stdin.CloseWrite()
	case runner.Input(req) != nil:
		// input_data (a strings.Reader or bytes.Reader) is the start of
		// stdin, and counts towards its bound.
		in := runner.Input(req)
		if l, ok := in.(interface{ Len() int }); ok {
			r.stdinBytes = int64(l.Len())
		}
		run.Stdin = io.MultiReader(in, r.stdin)
	default:
		run.Stdin = r.stdin
	}
	r.sink = newEventSink(func(_ string, payload any) error { return r.write(payload) })
	r.sink.attach(&run)

	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		r.readLoop()
	}()
	done := make(chan struct{})
	go r.keepalive(done)

	res, err := s.execute(runCtx, run)
	close(done)
	r.leave()       // before the result: a client may start its next run at once
	r.stdin.Close() // the sandbox's stdin copier may be waiting for more
	r.mu.Lock()
	r.finished = true
	r.mu.Unlock()
	r.sink.flush()
	r.finish(res, err)
	r.conn.Close(websocket.StatusNormalClosure, "")
	<-readerDone
}

// decodeWSExecute reads the first message: {"type": "execute", ...} with
// the fields of a POST body, checked like one.
func decodeWSExecute(data []byte, cfg *Config) (*ExecuteRequest, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return nil, badRequest("malformed JSON: %v", err)
	}
	var typ string
	if raw, ok := fields["type"]; !ok || json.Unmarshal(raw, &typ) != nil || typ != "execute" {
		return nil, badRequest(`the first message must be {"type": "execute", ...the fields of POST /api/sandbox/execute}`)
	}
	delete(fields, "type")
	body, err := json.Marshal(fields)
	if err != nil {
		return nil, badRequest("malformed JSON: %v", err)
	}
	req, err := DecodeExecuteRequest(bytes.NewReader(body), cfg)
	if err != nil {
		return nil, err
	}
	switch {
	case req.Async || req.CallbackURL != "":
		return nil, badRequest("async and callback_url do not apply to interactive runs: use POST /api/sandbox/execute")
	case len(req.TestCases) > 0:
		return nil, badRequest("test_cases cannot run interactively: use POST /api/sandbox/execute")
	}
	return req, nil
}

// write sends one message; a client that cannot take it in time is gone.
func (r *wsRun) write(v any) error {
	ctx, cancel := context.WithTimeout(context.Background(), wsWriteTimeout)
	defer cancel()
	if m, ok := v.(wsResultMessage); ok && m.Result != nil {
		return r.writeResult(ctx, m)
	}
	b, err := marshalJSON(v)
	if err != nil {
		return err
	}
	if err := r.conn.Write(ctx, websocket.MessageText, bytes.TrimSuffix(b, []byte("\n"))); err != nil {
		r.lost()
		return err
	}
	return nil
}

// writeResult sends the result message as one WebSocket message written
// in frames as it is encoded (wire.Result.WriteJSON): a large result
// is never built in one buffer.
func (r *wsRun) writeResult(ctx context.Context, m wsResultMessage) error {
	mw, err := r.conn.Writer(ctx, websocket.MessageText)
	if err == nil {
		out := bufio.NewWriterSize(mw, 64<<10)
		fmt.Fprintf(out, `{"type":%q,"result":`, m.Type)
		if err = m.Result.WriteJSON(out, false); err == nil {
			out.WriteString("}")
			err = out.Flush()
		}
		if cerr := mw.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		r.lost()
	}
	return err
}

// end sends the error that ends a connection before a run, and closes it.
func (r *wsRun) end(err error, executionID string) {
	r.write(wsError(err, executionID))
	r.conn.Close(websocket.StatusNormalClosure, "")
}

// wsError is the error message for err.
func wsError(err error, executionID string) wsErrorMessage {
	return wsErrorMessage{Type: "error", StreamError: streamErrorOf(err, executionID)}
}

// finish sends the last message.
func (r *wsRun) finish(res *wire.Result, err error) {
	r.mu.Lock()
	protoErr, killed, gone := r.protoErr, r.killed, r.gone
	r.mu.Unlock()
	id := ""
	if res != nil {
		id = res.ExecutionID
	}
	var m any
	switch {
	case gone:
		return // nobody to tell
	case protoErr != nil:
		m = wsError(protoErr, id)
	case err != nil && errors.Is(err, errCanceled) && killed:
		m = wsErrorMessage{Type: "error", StreamError: StreamError{Error: "killed by the client before it started"}}
	case err != nil:
		m = wsError(err, id)
	case !killed && (r.reqCtx.Err() != nil || r.h.stop.Err() != nil):
		// The server killed the run at the end of its grace period.
		m = wsError(errCanceled, id)
	default:
		m = wsResultMessage{Type: "result", Result: res}
	}
	r.sink.event("", m)
}

// lost notes that the connection failed: the run is killed.
func (r *wsRun) lost() {
	r.mu.Lock()
	if !r.finished {
		r.gone = true
	}
	r.mu.Unlock()
	if r.cancel != nil {
		r.cancel()
	}
}

// fail ends the run for a protocol error of the client.
func (r *wsRun) fail(err error) {
	r.mu.Lock()
	if !r.finished && r.protoErr == nil {
		r.protoErr = err
		r.h.s.metrics.Rejected.WithLabelValues("invalid").Inc()
	}
	r.mu.Unlock()
	r.cancel()
}

// readLoop reads the client's messages until the connection ends or the
// client breaks the protocol.
func (r *wsRun) readLoop() {
	for {
		typ, data, err := readMessage(context.Background(), r.conn, wsMessageLimit)
		switch {
		case errors.Is(err, errMessageTooBig):
			r.fail(&requestError{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("message larger than %d bytes", wsMessageLimit)})
			return
		case err != nil:
			r.lost() // closed or failed: the client is gone
			return
		case typ == websocket.MessageBinary:
			if !r.feed(data) {
				return
			}
			continue
		}
		var m WSClientMessage
		if err := json.Unmarshal(data, &m); err != nil {
			r.fail(badRequest("malformed message: %v", err))
			return
		}
		switch m.Type {
		case "stdin":
			b := []byte(m.Data)
			switch m.Encoding {
			case "", "utf-8":
			case "base64":
				if b, err = base64.StdEncoding.DecodeString(m.Data); err != nil {
					r.fail(badRequest("stdin data is not valid base64: %v", err))
					return
				}
			default:
				r.fail(badRequest("stdin encoding %q: use utf-8 or base64", m.Encoding))
				return
			}
			if !r.feed(b) {
				return
			}
		case "eof":
			r.stdin.CloseWrite()
		case "kill":
			r.mu.Lock()
			r.killed = true
			r.mu.Unlock()
			r.cancel()
		case "resize":
		case "execute":
			r.fail(badRequest("one execute message per connection: this one's run has started"))
			return
		default:
			r.fail(badRequest("unknown message type %q: use stdin, eof, kill or resize", m.Type))
			return
		}
	}
}

// feed passes stdin to the program, waiting while the buffer is full.
func (r *wsRun) feed(b []byte) bool {
	r.stdinBytes += int64(len(b))
	switch {
	case r.cell:
		r.fail(badRequest("an interpreter cell takes no stdin messages: its stdin is the execute message's input_data"))
		return false
	case r.stdinBytes > r.stdinMax:
		r.fail(&requestError{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("stdin larger than %d bytes (max_body_bytes)", r.stdinMax)})
		return false
	case r.stdin.eof():
		r.fail(badRequest("stdin after eof"))
		return false
	}
	r.stdin.Write(b) // fails only once the run is over: the data is moot
	return true
}

// keepalive pings the client after keepaliveEvery without a message.
func (r *wsRun) keepalive(done <-chan struct{}) {
	t := time.NewTicker(keepaliveEvery / 3)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		r.sink.mu.Lock()
		idle := time.Since(r.sink.last) >= keepaliveEvery && r.sink.err == nil
		r.sink.mu.Unlock()
		if !idle {
			continue
		}
		// The reader loop takes the pong in: not while it waits for the
		// program to read its stdin.
		waiting, before := r.stdin.stalled()
		if waiting {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), keepaliveEvery)
		err := r.conn.Ping(ctx)
		cancel()
		waiting, after := r.stdin.stalled()
		if err != nil && !waiting && after == before {
			select {
			case <-done:
			default:
				r.h.s.log.Info("interactive client does not answer pings: killing its run", "error", err)
				r.lost()
			}
			return
		}
		r.sink.mu.Lock()
		r.sink.last = time.Now()
		r.sink.mu.Unlock()
	}
}

// stdinPipe is an interactive program's stdin: the reader loop writes what
// the client sends, the sandbox reads it. It holds at most limit bytes:
// Write waits for room beyond that.
type stdinPipe struct {
	mu      sync.Mutex
	cond    sync.Cond
	buf     bytes.Buffer
	limit   int
	closedW bool // the client sent eof
	closed  bool // the run is over
	waiting bool // Write waits for room
	stalls  int  // how many times Write waited
}

func newStdinPipe(limit int) *stdinPipe {
	p := &stdinPipe{limit: limit}
	p.cond.L = &p.mu
	return p
}

func (p *stdinPipe) Write(b []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(b) > 0 {
		if p.buf.Len() >= p.limit && !p.closed {
			p.stalls++
			p.waiting = true
			for p.buf.Len() >= p.limit && !p.closed {
				p.cond.Wait()
			}
			p.waiting = false
		}
		if p.closed {
			return io.ErrClosedPipe
		}
		n := min(len(b), p.limit-p.buf.Len())
		p.buf.Write(b[:n])
		b = b[n:]
		p.cond.Broadcast()
	}
	return nil
}

func (p *stdinPipe) Read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.buf.Len() == 0 && !p.closedW && !p.closed {
		p.cond.Wait()
	}
	switch {
	case p.closed:
		return 0, io.ErrClosedPipe
	case p.buf.Len() == 0:
		return 0, io.EOF
	}
	n, _ := p.buf.Read(b)
	p.cond.Broadcast()
	return n, nil
}

// CloseWrite ends the input: the program reads EOF after what is held.
func (p *stdinPipe) CloseWrite() {
	p.mu.Lock()
	p.closedW = true
	p.mu.Unlock()
	p.cond.Broadcast()
}

func (p *stdinPipe) eof() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closedW
}

// Close ends both sides: the run is over.
func (p *stdinPipe) Close() error {
	p.mu.Lock()
	p.closed = true
	p.buf = bytes.Buffer{}
	p.mu.Unlock()
	p.cond.Broadcast()
	return nil
}

// stalled says whether Write waits now, and how many times it has.
func (p *stdinPipe) stalled() (bool, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waiting, p.stalls
}
