package sandbox

import (
	"bytes"
	"io"
)

// Capture is what a run keeps of one of its program's streams: up to Max
// bytes, and no more than Budget (when set) grants, each passed on to
// Live as it comes; the first time it must drop some it calls Exceeded.
// What is past them is dropped, so the program never blocks on a full
// pipe. With Stream everything goes to Live only and nothing is kept
// (Spec.Stream). One writer at a time; read it (Bytes) once the writer is
// done. Every isolation backend captures output so.
type Capture struct {
	Max      int64
	Live     io.Writer
	Budget   *Budget
	Stream   bool
	Exceeded func()

	buf       bytes.Buffer
	truncated bool
}

// Write keeps what p may add, and never fails.
func (c *Capture) Write(p []byte) (int, error) {
	if c.Stream {
		if c.Live != nil {
			c.Live.Write(p)
		}
		return len(p), nil
	}
	keep := max(min(int64(len(p)), c.Max-int64(c.buf.Len())), 0)
	if keep > 0 && c.Budget != nil {
		keep = c.Budget.Take(keep)
	}
	if keep > 0 {
		c.buf.Write(p[:keep])
		if c.Live != nil {
			c.Live.Write(p[:keep])
		}
	}
	if keep < int64(len(p)) && !c.truncated {
		c.truncated = true
		if c.Exceeded != nil {
			c.Exceeded()
		}
	}
	return len(p), nil
}

// Bytes is what it kept, and whether it dropped any.
func (c *Capture) Bytes() ([]byte, bool) { return c.buf.Bytes(), c.truncated }
