package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// An interactive run's stdin travels from the API side to the worker in
// chunks, each a NATS request on sandbox-run.stdin.<id> that the worker
// answers once the program's stdin pipe took it: one chunk in flight, so a
// program that does not read holds its caller back (back-pressure) and
// nothing piles up in between. A chunk sent again (its answer lost in a
// reconnect) is recognised by its sequence number and taken once.

// stdinChunk is one chunk of stdin; EOF ends it.
type stdinChunk struct {
	Seq  uint64 `json:"seq"`
	Data []byte `json:"data,omitempty"`
	EOF  bool   `json:"eof,omitempty"`
}

// stdinAnswer is the worker's answer to a chunk; Closed says the run no
// longer reads stdin (send no more).
type stdinAnswer struct {
	Closed bool `json:"closed,omitempty"`
}

// stdinChunkBytes is the most one chunk carries.
const stdinChunkBytes = 32 << 10

// stdinTry bounds the wait for one chunk's answer before it is sent again.
const stdinTry = 30 * time.Second

// sendStdin copies r to the worker of run id until r ends (EOF sent), the
// worker says the run reads no more, or ctx ends.
func (c *Conn) sendStdin(ctx context.Context, id string, r io.Reader) {
	buf := make([]byte, stdinChunkBytes)
	var seq uint64
	for {
		n, err := r.Read(buf)
		if n > 0 {
			seq++
			if !c.sendChunk(ctx, id, stdinChunk{Seq: seq, Data: buf[:n]}) {
				return
			}
		}
		if err != nil {
			seq++
			c.sendChunk(ctx, id, stdinChunk{Seq: seq, EOF: true})
			return
		}
	}
}

// sendChunk sends one chunk until the worker answers it; false when no
// more should be sent.
func (c *Conn) sendChunk(ctx context.Context, id string, ch stdinChunk) bool {
	data, _ := json.Marshal(ch)
	for ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, stdinTry)
		msg, err := c.nc.RequestWithContext(rctx, stdinPrefix+id+stdinSuffix, c.seal(kindStdin, id, data))
		cancel()
		if err == nil {
			var a stdinAnswer
			_ = json.Unmarshal(msg.Data, &a)
			return !a.Closed
		}
		if errors.Is(err, nats.ErrConnectionClosed) {
			return false
		}
		// No responders: the worker has not taken the run yet (or is
		// between attempts); a timeout: the answer was lost. Again.
		sleep(ctx, 50*time.Millisecond)
	}
	return false
}

// stdinPipe is the worker's side: chunks in order into the reader the run
// reads.
type stdinPipe struct {
	pr *io.PipeReader
	pw *io.PipeWriter
	c  *Conn
	id string

	mu   sync.Mutex
	last uint64
	done bool
}

// receiveStdin subscribes to run id's stdin and returns the reader of it
// and a function that ends it (the run is over).
func (c *Conn) receiveStdin(id string) (io.Reader, func(), error) {
	pr, pw := io.Pipe()
	p := &stdinPipe{pr: pr, pw: pw, c: c, id: id}
	sub, err := c.nc.Subscribe(stdinPrefix+id+stdinSuffix, p.handle)
	if err != nil {
		return nil, nil, err
	}
	_ = sub.SetPendingLimits(-1, 64<<20)
	_ = c.nc.FlushTimeout(5 * time.Second)
	return pr, func() {
		_ = sub.Unsubscribe()
		_ = pr.Close() // a chunk being written gives up
	}, nil
}

// handle takes one chunk: written to the pipe (waiting until the program
// reads it), then answered.
func (p *stdinPipe) handle(m *nats.Msg) {
	var ch stdinChunk
	data, ok := p.c.open(kindStdin, p.id, m.Data)
	if !ok || json.Unmarshal(data, &ch) != nil {
		return
	}
	p.mu.Lock()
	closed, dup := p.done, ch.Seq <= p.last
	p.mu.Unlock()
	if !closed && !dup {
		var err error
		if ch.EOF {
			err = p.pw.Close()
		} else {
			_, err = p.pw.Write(ch.Data)
		}
		p.mu.Lock()
		p.last = ch.Seq
		if err != nil || ch.EOF {
			p.done = true
		}
		closed = p.done
		p.mu.Unlock()
	}
	answer, _ := json.Marshal(stdinAnswer{Closed: closed})
	_ = m.Respond(answer)
}
