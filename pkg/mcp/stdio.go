package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Stdio is the transport of `sandbox-run mcp`: newline-delimited JSON-RPC
// on in and out, as the SDK's IOTransport, except for the end of input.
//
// A host may write its requests and close its end at once (printf ... |
// sandbox-run mcp). The SDK's connection stops writing as soon as it reads
// EOF, so the answers to calls still running would be lost: here EOF
// reaches the SDK only once every call read has been answered (or the
// connection is closed).
func Stdio(in io.Reader, out io.Writer) sdk.Transport {
	return &stdioTransport{in: in, out: out}
}

type stdioTransport struct {
	in  io.Reader
	out io.Writer
}

func (t *stdioTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	pr, pw := io.Pipe()
	r := &pipeReader{PipeReader: pr, closed: make(chan struct{})}
	c := &callCounter{changed: make(chan struct{}), closed: r.closed}
	go func() {
		err := c.forward(pw, t.in)
		if err == nil {
			// The input ended: wait for the answers before passing EOF on.
			c.waitIdle()
		}
		pw.CloseWithError(err)
	}()
	return (&sdk.IOTransport{Reader: r, Writer: &responseWriter{w: t.out, c: c}}).Connect(ctx)
}

// callCounter counts the calls read and not yet answered.
type callCounter struct {
	mu      sync.Mutex
	pending int
	changed chan struct{} // closed and replaced whenever pending changes
	closed  chan struct{} // closed when the SDK closes its reader
}

func (c *callCounter) add(n int) {
	if n == 0 {
		return
	}
	c.mu.Lock()
	c.pending = max(0, c.pending+n)
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

func (c *callCounter) waitIdle() {
	for {
		c.mu.Lock()
		n, changed := c.pending, c.changed
		c.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-changed:
		case <-c.closed:
			return
		}
	}
}

// forward copies in to pw line by line, counting the calls (messages with
// a method and an id, alone or in a batch). It returns nil at the end of
// in, or the error that stopped it.
func (c *callCounter) forward(pw *io.PipeWriter, in io.Reader) error {
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			c.add(countMessages(line, true))
			if _, werr := pw.Write(line); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// countMessages counts the calls (requests=true) or the responses in one
// line of JSON-RPC: an object or a batch of them.
func countMessages(line []byte, requests bool) int {
	type message struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	line = bytes.TrimSpace(line)
	var msgs []message
	if bytes.HasPrefix(line, []byte("[")) {
		if json.Unmarshal(line, &msgs) != nil {
			return 0
		}
	} else {
		var m message
		if json.Unmarshal(line, &m) != nil {
			return 0
		}
		msgs = []message{m}
	}
	n := 0
	for _, m := range msgs {
		hasID := len(m.ID) > 0 && string(m.ID) != "null"
		if hasID && (m.Method != "") == requests {
			n++
		}
	}
	return n
}

// responseWriter writes the SDK's messages to out and counts the answers.
type responseWriter struct {
	w   io.Writer
	c   *callCounter
	mu  sync.Mutex
	buf []byte
}

func (w *responseWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	w.mu.Lock()
	w.buf = append(w.buf, p...)
	answered := 0
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		answered += countMessages(w.buf[:i], false)
		w.buf = w.buf[i+1:]
	}
	w.mu.Unlock()
	w.c.add(-answered)
	return n, err
}

// Close leaves out open: stdout belongs to the process.
func (w *responseWriter) Close() error { return nil }

type pipeReader struct {
	*io.PipeReader
	once   sync.Once
	closed chan struct{}
}

func (r *pipeReader) Close() error {
	r.once.Do(func() { close(r.closed) })
	return r.PipeReader.Close()
}
