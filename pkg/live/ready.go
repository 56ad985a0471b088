package live

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/lib/records"
)

// Sandboxes kept ready: a persistent Manager with Config.Prewarm keeps
// that many sandboxes started, their agents connected, from its first
// create on. A create of the default kind (no languages, network, image or
// memory of its own, a timeout the ready sandbox's age leaves room for)
// takes one instead of starting one, and gives it only what is the
// caller's: owner, metadata, timeout, token, record. Its environment goes
// with each process it starts (Sandbox.Start), not in its agent's. What
// is taken is refilled in the background. Ready sandboxes count against
// no limit (nobody's memory, no place among MaxTotal); they end with the
// Manager (Close and Detach end them: they are nobody's to hand on), and
// one whose agent goes away is dropped.

// readyFits says whether a create with o (living timeout) may take a
// ready sandbox.
func (m *Manager) readyFits(o CreateOptions) bool {
	return m.cfg.Prewarm > 0 && m.persistent() && o.Languages == nil && o.Network == nil && o.Image == "" && o.Isolation == "" && o.files == "" &&
		(o.MemoryBytes <= 0 || o.MemoryBytes == m.cfg.DefaultMemoryBytes)
}

// takeReady is a ready sandbox for a create with o that lives timeout, or
// nil: none fits, or none is ready.
func (m *Manager) takeReady(o CreateOptions, timeout time.Duration) *Sandbox {
	if !m.readyFits(o) {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for len(m.ready) > 0 {
		s := m.ready[0]
		m.ready = m.ready[1:]
		select {
		case <-s.client.Done(): // its watch drops it
			continue
		default:
		}
		if time.Since(s.Started)+timeout > m.cfg.MaxTimeout {
			// Its engine ends it at MaxTimeout from its start: too old
			// for this timeout (it stays for shorter ones).
			m.ready = append(m.ready, s)
			return nil
		}
		close(s.taken)
		m.readyTaken++
		return s
	}
	return nil
}

// putBack returns s, taken but not given (a create refused), to the ready.
func (m *Manager) putBack(s *Sandbox) {
	m.mu.Lock()
	if !m.closed {
		s.taken = make(chan struct{})
		m.ready = append(m.ready, s)
		m.mu.Unlock()
		go m.watchReady(s)
		return
	}
	m.mu.Unlock()
	m.discard(s)
}

// fill starts ready sandboxes, in the background, until Prewarm are
// (one filler at a time).
func (m *Manager) fill() {
	if m.cfg.Prewarm <= 0 || !m.persistent() {
		return
	}
	m.mu.Lock()
	if m.filling || m.closed {
		m.mu.Unlock()
		return
	}
	m.filling = true
	m.mu.Unlock()
	go func() {
		for {
			m.mu.Lock()
			if m.closed || len(m.ready) >= m.cfg.Prewarm {
				m.filling = false
				m.mu.Unlock()
				return
			}
			m.mu.Unlock()
			s, err := m.startReady()
			m.mu.Lock()
			if err != nil || m.closed {
				m.filling = false
				m.mu.Unlock()
				if err != nil {
					m.cfg.Log.Warn("live: a sandbox to keep ready did not start", "err", err)
				} else {
					m.discard(s)
				}
				return
			}
			m.ready = append(m.ready, s)
			m.mu.Unlock()
			go m.watchReady(s)
		}
	}()
}

// startReady starts a sandbox of the default kind, nobody's yet.
func (m *Manager) startReady() (*Sandbox, error) {
	s := &Sandbox{ID: records.NewID("sbx"), Started: time.Now(), Memory: m.cfg.DefaultMemoryBytes,
		ended: make(chan struct{}), taken: make(chan struct{})}
	if err := m.startSocket(context.Background(), s, m.startOptions("", CreateOptions{})); err != nil {
		return nil, err
	}
	return s, nil
}

// watchReady drops s from the ready when its agent goes away before a
// create takes it.
func (m *Manager) watchReady(s *Sandbox) {
	select {
	case <-s.taken:
		return
	case <-s.client.Done():
	}
	m.mu.Lock()
	i := slices.Index(m.ready, s)
	if i >= 0 {
		m.ready = slices.Delete(m.ready, i, i+1)
	}
	m.mu.Unlock()
	if i >= 0 {
		m.discard(s)
	}
}

// shutReady closes the Manager to new sandboxes (a filler at work lets
// its own go) and takes every ready sandbox away.
func (m *Manager) shutReady() []*Sandbox {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	all := m.ready
	m.ready = nil
	for _, s := range all {
		close(s.taken)
	}
	return all
}

// discard ends s, a sandbox nobody was given, and removes what it left.
func (m *Manager) discard(s *Sandbox) {
	s.box().Kill()
	_ = s.box().Wait()
	s.closeConns()
	m.forget(s)
}

// give makes s, taken from the ready, owner's sandbox as o says.
func (s *Sandbox) give(owner string, o CreateOptions) {
	s.Owner, s.Template, s.Started, s.Metadata = owner, o.Template, time.Now(), maps.Clone(o.Metadata)
	s.Token, s.PrivatePorts, s.AutoPause, s.IdlePause = records.NewID(""), o.PrivatePorts, o.AutoPause, o.IdlePause
	s.env = envList(o.Env)
}

// envList is env as NAME=value, by name.
func envList(env map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// Ready says how many sandboxes are ready now, and how many creates took
// one so far.
func (m *Manager) Ready() (ready, taken int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.ready), m.readyTaken
}
