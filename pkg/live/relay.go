package live

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/lib/records"
	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
)

// ErrAgentDial is a Running's DialTCP that cannot reach the sandbox's
// ports from the host (gVisor's network stack is its own): the sandbox's
// agent relays them (agent.OpDial), through a socket beside its own.
var ErrAgentDial = errors.New("live: the sandbox's ports are reached through its agent")

// relayWait bounds the wait for the agent's relay connection.
const relayWait = 10 * time.Second

// relay is a sandbox's socket for the connections its agent relays, and
// the dials waiting for theirs, by token.
type relay struct {
	mu      sync.Mutex
	ln      *net.UnixListener
	waiting map[string]chan net.Conn
	closed  bool
}

// dialAgent connects to port on s's loopback through its agent.
func (s *Sandbox) dialAgent(ctx context.Context, port int) (net.Conn, error) {
	r, err := s.relayOf()
	if err != nil {
		return nil, err
	}
	token := records.NewID("")
	ch := make(chan net.Conn, 1)
	r.mu.Lock()
	r.waiting[token] = ch
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.waiting, token)
		r.mu.Unlock()
	}()
	if _, err := s.client.Call(ctx, agent.Request{Op: agent.OpDial, Port: port, Token: token}); err != nil {
		return nil, fmt.Errorf("live: port %d: %w", port, err)
	}
	select {
	case c := <-ch:
		return c, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(relayWait):
		return nil, fmt.Errorf("live: port %d: the agent's relay did not connect", port)
	}
}

// relayOf is s's relay, listening from its first use on.
func (s *Sandbox) relayOf() (*relay, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.relay != nil {
		return s.relay, nil
	}
	if s.relayDir == "" {
		return nil, errors.New("live: this sandbox's ports are not relayed here")
	}
	ln, err := listenIn(s.relayDir, agent.RelayName)
	if err != nil {
		return nil, fmt.Errorf("live: the relay's socket: %w", err)
	}
	s.relay = &relay{ln: ln, waiting: map[string]chan net.Conn{}}
	go s.relay.serve()
	return s.relay, nil
}

// serve hands each connection to the dial whose token it sends first
// (one that sends none it knows is closed).
func (r *relay) serve() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			token, err := readLine(c, 64)
			c.SetReadDeadline(time.Time{})
			r.mu.Lock()
			ch := r.waiting[token]
			delete(r.waiting, token)
			r.mu.Unlock()
			if err != nil || ch == nil {
				c.Close()
				return
			}
			ch <- c
		}()
	}
}

// close stops it.
func (r *relay) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.closed = true
		r.ln.Close()
	}
}

// readLine reads up to a newline, a byte at a time (what follows it is
// the connection's), at most max bytes.
func readLine(c net.Conn, max int) (string, error) {
	var b [1]byte
	var line []byte
	for len(line) < max {
		if _, err := c.Read(b[:]); err != nil {
			return "", err
		}
		if b[0] == '\n' {
			return string(line), nil
		}
		line = append(line, b[0])
	}
	return "", errors.New("live: a relay's token is too long")
}

// listenIn makes the Unix socket name in dir, which the sandbox's user
// reaches through its mount (mode 0666; the directory it cannot write).
// A data dir's path may be longer than a socket's 107 bytes: it is bound
// through the directory's descriptor.
func listenIn(dir, name string) (*net.UnixListener, error) {
	path := filepath.Join(dir, name)
	os.Remove(path) // an earlier process's
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), name), Net: "unix"})
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}
