package api

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/sandbox-run/sandbox-run/pkg/runner"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// Streaming: POST /api/sandbox/execute with Accept: text/event-stream
// answers with Server-Sent Events as the run happens:
//
//	event: progress  data: {"offset": 0, "data": "preparing Go's build cache ...: 5s\n"}
//	event: compile   data: {"offset": 0, "data": "main.c:1: error ..."}
//	event: stdout    data: {"offset": 0, "data": "first\n"}
//	event: stderr    data: {"offset": 0, "data": "...", "encoding": "base64"}
//	event: result    data: <the object the non-streaming call returns>
//	event: error     data: {"error": "...", "status": 500, "execution_id": "..."?}
//	                 (instead of result, if the run failed to run: status is
//	                 what the same failure answers without streaming, 503
//	                 when the run was canceled)
//
// Offsets count the bytes of each stream before the chunk. Chunks are text
// when they are valid UTF-8 (a character split between reads is held back
// for the next chunk) and base64 otherwise. An idle stream gets a comment
// line every keepaliveEvery. Output caps apply as without streaming. A
// slow reader is never buffered for: writing an event waits for the
// connection, the program blocks on its full pipe meanwhile, and its time
// limits keep running (back-pressure, documented in docs/API.md).

const keepaliveEvery = 15 * time.Second

func wantsEventStream(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

// eventSink sends events to one client; it is safe for concurrent use.
type eventSink struct {
	mu      sync.Mutex
	send    func(event string, payload any) error // called with mu held
	offsets map[string]int64
	pending map[string][]byte // an incomplete UTF-8 sequence per stream
	last    time.Time
	err     error
}

func newEventSink(send func(event string, payload any) error) *eventSink {
	return &eventSink{send: send, offsets: map[string]int64{}, pending: map[string][]byte{}, last: time.Now()}
}

// writer returns the io.Writer of one stream ("stdout", "stderr", "compile").
func (e *eventSink) writer(stream string) io.Writer { return streamWriter{e, stream} }

type streamWriter struct {
	e      *eventSink
	stream string
}

// Write never fails: a gone client ends the run through its context.
func (w streamWriter) Write(p []byte) (int, error) {
	w.e.chunk(w.stream, p, false)
	return len(p), nil
}

func (e *eventSink) chunk(stream string, p []byte, final bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	data := append(e.pending[stream], p...)
	e.pending[stream] = nil
	if !final {
		if cut := incompleteTail(data); cut > 0 {
			e.pending[stream] = append([]byte(nil), data[len(data)-cut:]...)
			data = data[:len(data)-cut]
		}
	}
	if len(data) == 0 {
		return
	}
	ev := Event{Type: stream, Offset: e.offsets[stream]}
	// Text, or base64 when not UTF-8 or mostly control bytes.
	ev.Data, ev.Encoding = wire.EncodeOutput(data)
	e.offsets[stream] += int64(len(data))
	e.emit(stream, ev)
}

// incompleteTail is the length of a UTF-8 sequence cut off at the end of b.
func incompleteTail(b []byte) int {
	for i := 1; i <= 3 && i <= len(b); i++ {
		c := b[len(b)-i]
		if c&0xc0 == 0x80 {
			continue // a continuation byte: look further back
		}
		if c >= 0xc0 && !utf8.FullRune(b[len(b)-i:]) {
			return i
		}
		return 0
	}
	return 0
}

// flush sends what was held back, at the end of the run.
func (e *eventSink) flush() {
	for _, s := range []string{"compile", "stdout", "stderr"} {
		e.chunk(s, nil, true)
	}
}

func (e *eventSink) emit(event string, payload any) {
	if e.err == nil {
		e.err = e.send(event, payload)
		e.last = time.Now()
	}
}

// event sends a final or control event.
func (e *eventSink) event(event string, payload any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.emit(event, payload)
}

// keepalive sends a heartbeat when nothing was sent for a while, until done.
func (e *eventSink) keepalive(done <-chan struct{}, beat func() error) {
	t := time.NewTicker(keepaliveEvery / 3)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			e.mu.Lock()
			if time.Since(e.last) >= keepaliveEvery && e.err == nil {
				e.err = beat()
				e.last = time.Now()
			}
			e.mu.Unlock()
		}
	}
}

// attach routes a request's live output into the sink.
func (e *eventSink) attach(x *runner.Run) {
	x.Stdout, x.Stderr, x.CompileOutput = e.writer("stdout"), e.writer("stderr"), e.writer("compile")
	x.Progress = e.writer("progress")
}

// finish sends the result (or the error) after the last output.
func (e *eventSink) finish(res *wire.Result, err error) {
	e.flush()
	if err != nil {
		id := ""
		if res != nil {
			id = res.ExecutionID
		}
		// A stream's reader who is still there to read it learns of a
		// cancel only from the server's shutdown, as on the WebSocket.
		e.event("error", streamErrorOf(err, id))
		return
	}
	e.event("result", res)
}

func (s *Server) streamExecute(w http.ResponseWriter, r *http.Request, req *ExecuteRequest, key *runner.Key) {
	rc := http.NewResponseController(w)
	sink := newEventSink(func(event string, payload any) error {
		if res, ok := payload.(*wire.Result); ok {
			// Streamed: one line of JSON (WriteJSON ends it), then the
			// blank line that ends the event.
			out := bufio.NewWriterSize(w, 64<<10)
			fmt.Fprintf(out, "event: %s\ndata: ", event)
			if err := res.WriteJSON(out, false); err != nil {
				return err
			}
			out.WriteString("\n")
			if err := out.Flush(); err != nil {
				return err
			}
			return rc.Flush()
		}
		b, err := marshalJSON(payload)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n", event, b); err != nil {
			return err
		}
		return rc.Flush()
	})
	run := runner.Run{Request: req, Tenant: key.ID(), Via: "sse"}
	sink.attach(&run)
	done := make(chan struct{})
	defer func() {
		// Nothing may write to w once the handler has returned.
		sink.mu.Lock()
		sink.err = io.ErrClosedPipe
		sink.mu.Unlock()
		close(done)
	}()
	started := false
	run.OnStart = func() {
		// Headers go out once a worker is free: until then a full queue
		// can still be a plain 503.
		started = true
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		w.WriteHeader(http.StatusOK)
		rc.Flush()
		go sink.keepalive(done, func() error {
			if _, err := io.WriteString(w, ": keepalive\n\n"); err != nil {
				return err
			}
			return rc.Flush()
		})
	}
	res, err := s.execute(r.Context(), run)
	if !started {
		s.writeExecuteError(w, err, nil)
		return
	}
	sink.finish(res, err)
}
