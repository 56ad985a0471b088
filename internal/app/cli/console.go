package cli

import (
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// Console is this command's stdout and stderr as the program's output
// and the CLI's own messages share them: it remembers whether the last
// byte written ended a line, so that a message ("sandbox-run: timeout")
// never continues a line the program left unfinished.
type Console struct {
	mu     sync.Mutex
	out    *os.File
	err    *os.File
	outMid *bool // the last byte written to out ended no line
	errMid *bool // the same for err (the same flag when they are one file)
}

// NewConsole is the console of the files out and err.
func NewConsole(out, err *os.File) *Console {
	c := &Console{out: out, err: err, outMid: new(bool), errMid: new(bool)}
	if sameFile(out, err) {
		c.errMid = c.outMid // a terminal, or one pipe for both
	}
	return c
}

// sameFile says whether a and b are the same open file (a terminal, one
// pipe): then what one prints shows right after what the other printed.
func sameFile(a, b *os.File) bool {
	var sa, sb unix.Stat_t
	if unix.Fstat(int(a.Fd()), &sa) != nil || unix.Fstat(int(b.Fd()), &sb) != nil {
		return false
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino && sa.Rdev == sb.Rdev
}

type consoleWriter struct {
	c   *Console
	f   *os.File
	mid *bool
}

func (w consoleWriter) Write(p []byte) (int, error) {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	n, err := w.f.Write(p)
	if n > 0 {
		*w.mid = p[n-1] != '\n'
	}
	return n, err
}

// Stdout and Stderr are the writers the program's output goes through.
func (c *Console) Stdout() io.Writer { return consoleWriter{c, c.out, c.outMid} }
func (c *Console) Stderr() io.Writer { return consoleWriter{c, c.err, c.errMid} }

// Message writes the CLI's own text to stderr, on a line of its own.
func (c *Console) Message(s string) {
	if s == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if *c.errMid {
		c.err.WriteString("\n")
	}
	c.err.WriteString(s)
	*c.errMid = s[len(s)-1] != '\n'
}

// Printf is Message with a format.
func (c *Console) Printf(format string, a ...any) { c.Message(fmt.Sprintf(format, a...)) }
