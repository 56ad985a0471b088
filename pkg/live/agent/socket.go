package agent

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// OrphanTimeout is how long an agent in the socket mode waits for a host
// to come back before it ends (and its sandbox with it).
var OrphanTimeout = 10 * time.Minute

// maxHeld bounds the frames an agent holds while no host is connected;
// past it output frames are dropped, never ends and answers.
const maxHeld = 8 << 20

// mainSocket is Main in the socket mode.
func mainSocket(path string) error {
	secret := os.Getenv(EnvSecret)
	os.Unsetenv(EnvSocket)
	os.Unsetenv(EnvSecret)
	if err := setUndumpable(); err != nil {
		return fmt.Errorf("making the agent undumpable: %w", err)
	}
	// The host's end of stderr may be gone (a restarted server): a write
	// there must not end the agent.
	signal.Ignore(syscall.SIGPIPE)
	return ServeSocket(path, secret)
}

// ServeSocket serves the host on the Unix socket at path, connecting again
// whenever the connection ends, until no host has been there for
// OrphanTimeout; then it kills what it started and returns.
//
// SIGUSR1 makes it drop its connection and connect again: after a
// checkpoint of its sandbox (gVisor's), whose host connections ended
// without its reads hearing of it.
func ServeSocket(path, secret string) error {
	l := &link{}
	a := newAgent(l)
	a.relay = filepath.Join(filepath.Dir(path), RelayName)
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	go func() {
		for range usr1 {
			l.drop()
			a.dropRelays()
		}
	}()
	hello, _ := json.Marshal(Event{Type: EvHello, Data: []byte(secret)})
	lost := time.Now()
	for {
		conn, err := net.DialTimeout("unix", path, 5*time.Second)
		if err != nil {
			if time.Since(lost) > OrphanTimeout {
				a.killAll()
				a.unwatchAll()
				a.running.Wait()
				return fmt.Errorf("no host at %s for %v", path, OrphanTimeout)
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if _, err := conn.Write(append(hello, '\n')); err != nil {
			conn.Close()
			continue
		}
		l.attach(conn)
		_ = a.serve(conn)
		l.detach()
		conn.Close()
		// A watch's events have no one to go to any more.
		a.unwatchAll()
		lost = time.Now()
	}
}

// link is the socket mode's frame writer: to the connected host, or held
// until one connects.
type link struct {
	mu   sync.Mutex
	conn net.Conn
	held [][]byte
	size int
}

func (l *link) writeFrame(b []byte, keep bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil {
		if _, err := l.conn.Write(b); err == nil {
			return
		}
		l.conn.Close() // its reader ends, and serve with it
		l.conn = nil
	}
	if keep || l.size+len(b) <= maxHeld {
		l.held = append(l.held, b)
		l.size += len(b)
	}
}

// attach makes conn the host's connection, after the frames held for it.
func (l *link) attach(conn net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, b := range l.held {
		if _, err := conn.Write(b); err != nil {
			l.held = l.held[i:]
			conn.Close()
			return
		}
	}
	l.held, l.size, l.conn = nil, 0, conn
}

// drop closes the host's connection (its reader ends, and serve with it).
func (l *link) drop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil {
		l.conn.Close()
	}
}

func (l *link) detach() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.conn = nil
}
