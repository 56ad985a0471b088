package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// Session is an interactive run on the server's WebSocket (GET
// /api/sandbox/ws): the program's stdin is written as it runs, and its
// output arrives as events.
//
//	s, err := c.Interactive(ctx, &wire.ExecuteRequest{Language: "python", Code: code})
//	go func() { s.WriteStdin([]byte("42\n")); s.CloseStdin() }()
//	for ev := range s.Events() { ... }   // stdout, stderr and compile chunks
//	res, err := s.Result()
//
// Events must be drained: the session reads the connection only as fast
// as they are taken, and the server does not buffer for a slow reader (it
// gives up on a client that takes nothing for 30 s). All methods are safe
// for concurrent use.
type Session struct {
	conn   *websocket.Conn
	ctx    context.Context
	events chan wire.Event
	done   chan struct{}
	closed chan struct{} // Close was called
	once   sync.Once

	mu  sync.Mutex
	res *wire.Result
	err error
}

// stdinChunk bounds one stdin message (the server takes up to 1 MiB).
const stdinChunk = 64 << 10

// Interactive starts req on the server over its WebSocket and returns at
// once: the program may still wait for a worker. Refusals before the run
// (a bad key, the key's rate limit, a request the server rejects, a full
// queue) are returned as *Error, here or from Result. ctx bounds the whole
// session: cancelling it closes the connection, which makes the server
// kill the run. async, callback_url and test_cases cannot run
// interactively.
func (c *Client) Interactive(ctx context.Context, req *wire.ExecuteRequest) (*Session, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	first := []byte(`{"type":"execute"`)
	if b := bytes.TrimSpace(body); len(b) > 2 {
		first = append(append(first, ','), b[1:]...)
	} else {
		first = append(first, '}')
	}
	h := http.Header{}
	h.Set("User-Agent", "sandbox-run-client")
	if c.apiKey != "" {
		h.Set("Authorization", "Bearer "+c.apiKey)
	}
	conn, resp, err := websocket.Dial(ctx, c.baseURL+wire.WSPath, &websocket.DialOptions{
		HTTPClient:   c.hc,
		HTTPHeader:   h,
		Subprotocols: []string{wire.WSSubprotocol},
	})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			var data []byte
			if resp.Body != nil {
				data, _ = io.ReadAll(resp.Body)
			}
			return nil, newError(resp, data)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("websocket: %w", ctx.Err())
		}
		return nil, err
	}
	conn.SetReadLimit(1 << 30) // a result holds the output and files: the server bounds them
	if err := conn.Write(ctx, websocket.MessageText, first); err != nil {
		conn.CloseNow()
		return nil, fmt.Errorf("send request: %w", err)
	}
	s := &Session{conn: conn, ctx: ctx, events: make(chan wire.Event, 64), done: make(chan struct{}), closed: make(chan struct{})}
	go s.readLoop()
	return s, nil
}

func (s *Session) readLoop() {
	defer close(s.done)
	defer close(s.events)
	final := false
	for {
		typ, data, err := s.conn.Read(s.ctx)
		if err != nil {
			if !final {
				s.fail(s.lostError(err))
			}
			return
		}
		if typ != websocket.MessageText || final {
			continue
		}
		var m wire.WSServerMessage
		if err := json.Unmarshal(data, &m); err != nil {
			s.fail(fmt.Errorf("malformed message from the server: %w", err))
			s.conn.CloseNow()
			return
		}
		switch m.Type {
		case "stdout", "stderr", "compile":
			select {
			case s.events <- m.Event:
			case <-s.ctx.Done():
				s.fail(fmt.Errorf("websocket: %w", s.ctx.Err()))
				s.conn.CloseNow()
				return
			case <-s.closed:
				s.fail(errors.New("the session was closed"))
				return
			}
		case "result":
			final = true
			if m.Result == nil {
				s.fail(errors.New("the server sent a result without one"))
				continue
			}
			s.mu.Lock()
			s.res = m.Result
			if m.Result.Status == wire.StatusSetupError {
				// As Execute's 500: the sandbox could not be set up.
				s.err = &Error{StatusCode: http.StatusInternalServerError, Message: m.Result.Error, ExecutionID: m.Result.ExecutionID}
			}
			s.mu.Unlock()
		case "error":
			final = true
			if m.Status == 0 { // killed before it started
				s.fail(fmt.Errorf("server: %s", m.Error))
			} else {
				s.fail(&Error{StatusCode: m.Status, Message: m.Error, ExecutionID: m.ExecutionID})
			}
		}
	}
}

// lostError describes a connection that ended before the result.
func (s *Session) lostError(err error) error {
	select {
	case <-s.closed:
		return errors.New("the session was closed")
	default:
	}
	if s.ctx.Err() != nil {
		return fmt.Errorf("websocket: %w", s.ctx.Err())
	}
	return fmt.Errorf("the connection ended before the result: %w", err)
}

func (s *Session) fail(err error) {
	s.mu.Lock()
	if s.err == nil && s.res == nil {
		s.err = err
	}
	s.mu.Unlock()
}

// Events delivers the output as it happens: "stdout", "stderr" and
// "compile" chunks, in order, with their offsets (Data is base64 when
// Encoding says so). It is closed when the session ends.
func (s *Session) Events() <-chan wire.Event { return s.events }

// Done is closed when the session has ended.
func (s *Session) Done() <-chan struct{} { return s.done }

// WriteStdin sends p to the program's stdin. It blocks while the server
// holds as much unread input as it will (the program does not read).
func (s *Session) WriteStdin(p []byte) error {
	for len(p) > 0 {
		n := min(len(p), stdinChunk)
		if err := s.conn.Write(s.ctx, websocket.MessageBinary, p[:n]); err != nil {
			return s.writeError(err)
		}
		p = p[n:]
	}
	return nil
}

// CloseStdin ends the program's input: it reads EOF after what was sent.
func (s *Session) CloseStdin() error {
	return s.send(s.ctx, wire.WSClientMessage{Type: "eof"})
}

// Kill ends the run; Result then gives a result with limit_reason
// "canceled". If the message cannot be sent in a few seconds (the server
// is not reading: the program has not read a large input), the connection
// is closed instead, which kills the run too, and Result gives an error.
func (s *Session) Kill() error {
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	return s.send(ctx, wire.WSClientMessage{Type: "kill"})
}

// Close closes the connection at once; a run still going is killed.
func (s *Session) Close() error {
	s.once.Do(func() { close(s.closed) })
	err := s.conn.CloseNow()
	<-s.done
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Result waits for the end of the run and returns its result. Its error is
// an *Error when the server refused or could not run the request (as
// Execute's), and otherwise a connection or context error. As with
// Execute, a sandbox set-up failure gives both a result (status
// error_setup) and an *Error.
func (s *Session) Result() (*wire.Result, error) {
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.res, s.err
}

func (s *Session) send(ctx context.Context, m wire.WSClientMessage) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := s.conn.Write(ctx, websocket.MessageText, b); err != nil {
		return s.writeError(err)
	}
	return nil
}

func (s *Session) writeError(err error) error {
	select {
	case <-s.done:
		return fmt.Errorf("the session is over: %w", err)
	default:
		return err
	}
}
