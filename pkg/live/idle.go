package live

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"
)

// Idle pauses: a sandbox made with an IdlePause is paused once nobody has
// used it for that long: no call to its agent or its ports, none waiting
// for a process's output (a command run in the foreground, a code cell),
// no connection to its ports open. Processes that run by themselves do not
// keep it awake. Any call resumes it (as for any paused sandbox), and its
// idle clock starts again.

// touch notes a use of s now.
func (s *Sandbox) touch() { s.lastUse.Store(time.Now().UnixNano()) }

// busy counts a use of s that goes on (d: +1 as it starts, -1 as it ends).
func (s *Sandbox) busy(d int64) {
	s.inUse.Add(d)
	s.touch()
}

// armIdle starts s's idle clock (when it has an idle pause).
func (m *Manager) armIdle(s *Sandbox) {
	if s.IdlePause <= 0 {
		return
	}
	s.touch()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.idleTimer == nil {
		s.idleTimer = time.AfterFunc(s.IdlePause, func() { m.idle(s) })
	} else {
		s.idleTimer.Reset(s.IdlePause)
	}
}

// idle is s's idle clock: it pauses s when nobody has used it for its
// IdlePause, else waits for what is left.
func (m *Manager) idle(s *Sandbox) {
	select {
	case <-s.ended:
		return
	default:
	}
	if s.Paused() {
		return // a resume starts the clock again
	}
	left := s.IdlePause - time.Since(time.Unix(0, s.lastUse.Load()))
	if s.inUse.Load() > 0 {
		left = s.IdlePause
	}
	if left > 0 {
		s.mu.Lock()
		s.idleTimer.Reset(left)
		s.mu.Unlock()
		return
	}
	if err := m.pause(context.Background(), s); err != nil && !errors.Is(err, ErrPaused) {
		m.cfg.Log.Warn("live sandbox not paused when idle", "id", s.ID, "err", err)
	}
}

// stopIdle stops s's idle clock.
func (s *Sandbox) stopIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.idleTimer != nil {
		s.idleTimer.Stop()
	}
}

// usedConn is a connection to a sandbox's port, which keeps it awake
// while it is open.
type usedConn struct {
	net.Conn
	once sync.Once
	s    *Sandbox
}

func (c *usedConn) Close() error {
	c.once.Do(func() { c.s.busy(-1) })
	return c.Conn.Close()
}
