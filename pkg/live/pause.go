package live

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
)

// Pauser is a Running whose processes can be frozen where they are and
// thawed (the engine's cgroup freezer).
type Pauser interface {
	Pause(ctx context.Context) error
	Resume() error
}

// Errors of Pause.
var (
	// ErrPaused is a pause of a sandbox that is paused already.
	ErrPaused = errors.New("live: the sandbox is paused already")
	// ErrNoPause is a sandbox that cannot be paused here (its starter's
	// sandboxes cannot, or the host has no cgroup freezer).
	ErrNoPause = errors.New("live: this sandbox cannot be paused")
)

// pauseTimeout bounds the freezing of a sandbox's processes.
const pauseTimeout = 10 * time.Second

// Pause pauses owner's sandbox id: its processes are frozen where they
// are (their memory and files kept, no CPU given), and its timeout stops
// until it is resumed. A paused sandbox counts against its owner's and
// the server's limits as a running one does, and still ends at the
// longest life a sandbox has (Config.MaxTimeout from its start). Any call
// to its agent resumes it (Client), as Resume does.
func (m *Manager) Pause(ctx context.Context, owner, id string) error {
	s, err := m.Get(owner, id)
	if err != nil {
		return err
	}
	return m.pause(ctx, s)
}

func (m *Manager) pause(ctx context.Context, s *Sandbox) error {
	s.pauseMu.Lock()
	defer s.pauseMu.Unlock()
	if s.Paused() {
		return ErrPaused // evicted too
	}
	p, ok := s.box().(Pauser)
	if !ok {
		return ErrNoPause
	}
	ctx, cancel := context.WithTimeout(ctx, pauseTimeout)
	defer cancel()
	if err := p.Pause(ctx); err != nil {
		return fmt.Errorf("%w: %v", ErrNoPause, err)
	}
	s.mu.Lock()
	s.paused.Store(true)
	s.pausedSince = time.Now()
	s.left = max(time.Until(s.end), time.Second)
	if s.timer != nil {
		s.timer.Stop()
	}
	s.mu.Unlock()
	m.armEvict(s)
	return m.save(s)
}

// Resume resumes owner's sandbox id if it is paused, and says whether it
// was. Its timeout starts again: d from now, or, with d 0, what was left
// of it when it was paused. A sandbox that was not paused gets d (when
// not 0) as SetTimeout gives it.
func (m *Manager) Resume(owner, id string, d time.Duration) (resumed bool, err error) {
	if d < 0 || d > m.cfg.MaxTimeout {
		return false, fmt.Errorf("%w: a timeout of %v: give one from 1 s to %v", ErrInvalid, d, m.cfg.MaxTimeout)
	}
	s, err := m.Get(owner, id)
	if err != nil {
		return false, err
	}
	return m.resume(s, d)
}

func (m *Manager) resume(s *Sandbox, d time.Duration) (bool, error) {
	resumed, learn, err := m.resumeLocked(s, d)
	if learn {
		s.learnProcs() // back from disk with its memory: its processes
	}
	return resumed, err
}

// resumeLocked is resume under s's pauseMu; learn says s came back from
// the disk with its running processes, which its agent lists.
func (m *Manager) resumeLocked(s *Sandbox, d time.Duration) (resumed, learn bool, err error) {
	s.pauseMu.Lock()
	defer s.pauseMu.Unlock()
	if !s.Paused() {
		if d > 0 {
			return false, false, m.SetTimeout(s.Owner, s.ID, d)
		}
		return false, false, nil
	}
	if s.evicted.Load() {
		learn, err = m.comeBack(s)
	} else {
		err = s.box().(Pauser).Resume()
	}
	if err != nil {
		return false, false, err
	}
	s.mu.Lock()
	if s.evictTimer != nil {
		s.evictTimer.Stop()
	}
	if d == 0 {
		d = s.left
	}
	s.paused.Store(false)
	s.end = time.Now().Add(d)
	if s.timer != nil {
		s.timer.Reset(d)
	}
	s.mu.Unlock()
	m.armIdle(s)
	return true, learn, m.save(s)
}

// Paused says whether the sandbox is paused.
func (s *Sandbox) Paused() bool { return s.paused.Load() }

// State is "paused" or "running", as every door names it.
func (s *Sandbox) State() string {
	if s.Paused() {
		return "paused"
	}
	return "running"
}

// wake resumes s if it is paused: a call to its agent is on its way. A
// sandbox evicted to disk that cannot come back fails the call.
func (m *Manager) wake(s *Sandbox) error {
	if !s.Paused() {
		return nil
	}
	if _, err := m.resume(s, 0); err != nil {
		m.cfg.Log.Warn("live sandbox not resumed for a call", "id", s.ID, "err", err)
		if s.evicted.Load() {
			// The call fails as the agent's refusals do (every door
			// answers those): no room for it yet, or it cannot come back.
			code, le := agent.CodeInternal, (*LimitError)(nil)
			if errors.As(err, &le) && le.Full {
				code = agent.CodeNoSpace
			}
			return &Error{Code: code, Msg: err.Error()}
		}
	}
	return nil
}

// expire is s's timeout: it ends s, or pauses it when it was made to
// (CreateOptions.AutoPause).
func (m *Manager) expire(s *Sandbox) {
	if s.AutoPause {
		if err := m.pause(context.Background(), s); err == nil || errors.Is(err, ErrPaused) {
			return
		}
	}
	m.end(s)
}
