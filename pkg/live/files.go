package live

import (
	"context"
	"errors"
	"io"
	"os"

	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
)

// Files of any size, in chunks of agent.MaxChunk: one frame never holds
// more, whatever the file.

// FileReader reads a file of a sandbox a chunk at a time.
type FileReader struct {
	s    *Sandbox
	ctx  context.Context
	path string
	off  int64
	buf  []byte
	eof  bool
}

// Open opens the file at path in s for reading; its first chunk is read
// now, so that an error (agent.CodeNotFound...) comes before any data.
func (s *Sandbox) Open(ctx context.Context, path string) (*FileReader, error) {
	f := &FileReader{s: s, ctx: ctx, path: path}
	if err := f.fill(); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *FileReader) fill() error {
	ev, err := f.s.client.Call(f.ctx, agent.Request{Op: agent.OpReadFile, Path: f.path, Offset: f.off})
	if err != nil {
		return err
	}
	f.buf, f.eof = ev.Data, ev.EOF
	f.off += int64(len(ev.Data))
	if len(ev.Data) == 0 {
		f.eof = true
	}
	return nil
}

// Read reads the next bytes of the file.
func (f *FileReader) Read(p []byte) (int, error) {
	for len(f.buf) == 0 {
		if f.eof {
			return 0, io.EOF
		}
		if err := f.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, f.buf)
	f.buf = f.buf[n:]
	return n, nil
}

// WriteFile makes the file at path in s (and its parents) with r's bytes,
// replacing what was there; it returns the file as it then is.
func (s *Sandbox) WriteFile(ctx context.Context, path string, r io.Reader, mode os.FileMode) (*agent.Entry, error) {
	buf := make([]byte, agent.MaxChunk)
	first := true
	for {
		n, err := io.ReadFull(r, buf)
		last := err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF)
		if err != nil && !last {
			return nil, err
		}
		if n > 0 || first {
			ev, cerr := s.client.Call(ctx, agent.Request{Op: agent.OpWriteFile, Path: path, Data: buf[:n], Mode: mode, Append: !first})
			if cerr != nil {
				return nil, cerr
			}
			if last {
				return ev.Entry, nil
			}
			first = false
		}
		if last {
			ev, err := s.client.Call(ctx, agent.Request{Op: agent.OpStat, Path: path})
			return ev.Entry, err
		}
	}
}
