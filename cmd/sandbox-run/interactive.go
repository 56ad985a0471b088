package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/api"
	"github.com/sandbox-run/sandbox-run/pkg/client"
)

// executeInteractive runs req on the server over its WebSocket with this
// command's stdin attached: what is read from stdin goes to the program as
// it comes (a terminal in its usual line mode sends a line at a time), EOF
// (Ctrl-D) closes the program's stdin, and its output is printed as it
// comes, stdout to stdout and stderr and compiler output to stderr. The
// exit code is execute's. SIGINT or SIGTERM kills the run (exit 130).
//
// Without --server, --interactive runs locally with live stdin: the local
// text mode streams already (see executeLocal).
func executeInteractive(c *client.Client, f *executeFlags, req *api.ExecuteRequest) int {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)

	// The session's context: cancelled only to give up on the server (a
	// signal while connecting, or a kill that gets no answer).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type started struct {
		s   *client.Session
		err error
	}
	dialed := make(chan started, 1)
	go func() {
		s, err := c.Interactive(ctx, req)
		dialed <- started{s, err}
	}()
	var sess *client.Session
	select {
	case d := <-dialed:
		if d.err != nil {
			return remoteFailure(ctx, f.server, d.err)
		}
		sess = d.s
	case <-sig:
		cancel()
		return fatalf(exitInterrupted, "interrupted")
	}

	interrupted := make(chan struct{})
	go func() {
		select {
		case <-sig:
		case <-sess.Done():
			return
		}
		close(interrupted)
		sess.Kill()
		select {
		case <-sess.Done():
		case <-time.After(5 * time.Second):
			cancel() // closing the connection kills the run too
		}
	}()
	go copyStdin(sess, os.Stdin)

	for ev := range sess.Events() {
		printEvent(ev)
	}
	res, err := sess.Result()
	select {
	case <-interrupted:
		return fatalf(exitInterrupted, "interrupted: the run was killed")
	default:
	}
	if res == nil {
		var ae *client.Error
		if !errors.As(err, &ae) {
			return fatalf(exitSetup, "lost the connection to %s: %v", f.server, err)
		}
		return remoteFailure(ctx, f.server, err)
	}
	// A result with an error is a sandbox set-up failure: reported like a
	// local one.
	return finish(f, res, nil)
}

// copyStdin sends what r gives to the program, then EOF. It stops when the
// session ends.
func copyStdin(s *client.Session, r io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if s.WriteStdin(buf[:n]) != nil {
				return
			}
		}
		if err != nil {
			// EOF, or a stdin that cannot be read (closed): either way the
			// program gets no more.
			if !errors.Is(err, io.EOF) {
				fmt.Fprintf(os.Stderr, "sandbox-run: reading stdin: %v\n", err)
			}
			s.CloseStdin()
			return
		}
	}
}
