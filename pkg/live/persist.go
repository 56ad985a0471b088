package live

import (
	"bufio"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/lib/records"
	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
)

// Sandboxes that outlive the process: with a StateDir and an Adopter,
// each sandbox's agent talks to the host over a Unix socket of the host's
// (StateDir/sock/ID/agent.sock, mounted read-only in the sandbox), the
// sandbox is started so that it survives this process, and a record of it
// (StateDir/ID.json, 0600: owner, token, timeout, the engine's record, the
// agent's secret) is kept from its creation to its end. Detach, at
// shutdown, leaves the sandboxes running; the next Manager on the same
// directory adopts each (the engine checks it is still the same sandbox),
// listens on its socket again, takes the agent back when it connects with
// its secret, learns its running processes, and arms its timeout.

// Adopter is a Starter that can take over a sandbox that an earlier
// process started, by its record.
type Adopter interface {
	Adopt(record json.RawMessage, o AdoptOptions) (Running, error)
}

// HandOff is a Running that this process can let go of at Detach, for
// the next to take over: what it served for the sandbox (a network
// device) stops, and its Wait returns.
type HandOff interface {
	Detach() error
}

// Recorder is a Running whose record an Adopter can take over.
type Recorder interface {
	Record() json.RawMessage
}

// record is a sandbox's file in StateDir.
type record struct {
	ID, Owner, Template string
	Started, End        time.Time
	Metadata            map[string]string `json:",omitempty"`
	Memory              int64
	Languages           []string `json:",omitempty"`
	Token, Secret       string
	PrivatePorts        bool             `json:",omitempty"`
	Network             []string         // null: it has none; []: it reaches nothing
	NetworkBudgets      map[string]int64 `json:",omitempty"`
	Secrets             []string         `json:",omitempty"`
	Image               string           `json:",omitempty"`
	Env                 []string         `json:",omitempty"`
	// Paused: it was paused, Left of its timeout to go when resumed.
	Paused, AutoPause bool          `json:",omitempty"`
	Left              time.Duration `json:",omitempty"`
	// CreateEnv is the environment it was made with (for its forks).
	CreateEnv map[string]string `json:",omitempty"`
	Isolation string            `json:",omitempty"`
	IdlePause time.Duration     `json:",omitempty"`
	// ForkedMemory: it was forked with its parent's memory.
	ForkedMemory bool `json:",omitempty"`
	// Evicted: it is written to disk (evict.go), with its memory
	// (EvictedMemory) or its files only; Engine is null.
	Evicted, EvictedMemory bool `json:",omitempty"`
	Engine                 json.RawMessage
}

// connectTimeout bounds the wait for an agent to connect.
const connectTimeout = 30 * time.Second

func (m *Manager) persistent() bool {
	_, ok := m.start.(Adopter)
	return ok && m.cfg.StateDir != ""
}

func (m *Manager) sockDir(id string) string { return filepath.Join(m.cfg.StateDir, "sock", id) }

// listen makes the socket the agent of sandbox id connects to.
func (m *Manager) listen(id string) (*net.UnixListener, error) {
	dir := m.sockDir(id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// The sandbox's user (another host uid) must reach the socket through
	// its mount, and create nothing there.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	return listenIn(dir, agent.SocketName)
}

// accept waits for s's agent on ln: the first connection whose hello
// carries s's secret (anything else that connects is dropped).
func accept(ctx context.Context, ln *net.UnixListener, secret string) (net.Conn, *bufio.Reader, error) {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { ln.SetDeadline(time.Now()) })
	defer stop()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil, fmt.Errorf("live: the sandbox's agent did not connect within %v", connectTimeout)
			}
			return nil, nil, err
		}
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		rd := bufio.NewReaderSize(conn, 64<<10)
		line, err := rd.ReadSlice('\n')
		var hello agent.Event
		if err == nil && json.Unmarshal(line, &hello) == nil && hello.Type == agent.EvHello &&
			subtle.ConstantTimeCompare(hello.Data, []byte(secret)) == 1 {
			conn.SetReadDeadline(time.Time{})
			return conn, rd, nil
		}
		conn.Close()
	}
}

// startSocket starts s with its agent on a socket, to outlive this process.
func (m *Manager) startSocket(ctx context.Context, s *Sandbox, o StartOptions) error {
	if err := os.MkdirAll(m.cfg.StateDir, 0o700); err != nil {
		return fmt.Errorf("live: the state dir: %w", err)
	}
	ln, err := m.listen(s.ID)
	if err != nil {
		return fmt.Errorf("live: the agent's socket: %w", err)
	}
	defer ln.Close()
	s.secret = records.NewID("")
	o.SocketDir, o.Secret = m.sockDir(s.ID), s.secret
	run, err := m.start.StartLive(ctx, o, nil, nil)
	if err != nil {
		os.RemoveAll(m.sockDir(s.ID))
		return err
	}
	conn, rd, err := accept(ctx, ln, s.secret)
	if err != nil {
		run.Kill()
		run.Wait()
		os.RemoveAll(m.sockDir(s.ID))
		return err
	}
	s.client, s.closers = NewClient(conn, rd), []io.Closer{conn}
	s.setBox(run)
	return nil
}

// save writes s's record (persistent managers only).
func (m *Manager) save(s *Sandbox) error {
	if !m.persistent() || s.secret == "" {
		return nil
	}
	rec, ok := s.box().(Recorder)
	if !ok {
		return errors.New("the starter's sandboxes have no record")
	}
	s.mu.Lock()
	r := record{ID: s.ID, Owner: s.Owner, Template: s.Template, Started: s.Started, End: s.end, Metadata: s.Metadata,
		Memory: s.Memory, Languages: s.Languages, Token: s.Token, Secret: s.secret, PrivatePorts: s.PrivatePorts,
		Network: s.Network, NetworkBudgets: s.NetworkBudgets, Secrets: s.Secrets, Image: s.Image, Env: s.env, Paused: s.Paused(), AutoPause: s.AutoPause, Left: s.left, CreateEnv: s.opts.Env, Engine: rec.Record(),
		Isolation: s.Isolation, ForkedMemory: s.ForkedMemory, IdlePause: s.IdlePause}
	if ev, ok := s.box().(evictedBox); ok {
		r.Evicted, r.EvictedMemory = true, ev.base().whole
	}
	s.mu.Unlock()
	// Written whole (renamed into place) but not synced: a record lost to
	// a power cut loses a sandbox that the cut ended anyway, and a sync
	// would be on the way of every create.
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(m.cfg.StateDir, ".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(m.cfg.StateDir, s.ID+".json"))
}

// forget removes what s kept on disk.
func (m *Manager) forget(s *Sandbox) {
	if m.cfg.StateDir == "" {
		return
	}
	os.Remove(filepath.Join(m.cfg.StateDir, s.ID+".json"))
	os.RemoveAll(m.sockDir(s.ID))
	os.RemoveAll(m.evictDir(s.ID))
	os.RemoveAll(m.filesDir(s.ID))
}

// orphan takes an event of a process an earlier client started (after a
// restart) to its Proc.
func (s *Sandbox) orphan(ev agent.Event) {
	if ev.PID == 0 {
		return // an answer to a request of the earlier client's
	}
	last := ev.Type == agent.EvExit || ev.Type == agent.EvError
	s.mu.Lock()
	p := s.procs[ev.PID]
	switch {
	case p != nil && last:
		delete(s.procs, ev.PID)
	case p == nil && !last:
		// Output it held for us before we listed its processes.
		p = &Proc{PID: ev.PID, sb: s}
		if s.procs == nil {
			s.procs = map[int]*Proc{}
		}
		s.procs[ev.PID] = p
	}
	s.mu.Unlock()
	if p != nil {
		p.publish(ev)
	}
}

// Reattached says how many sandboxes this Manager took over from an
// earlier process.
func (m *Manager) Reattached() int { return m.reattached }

// reattach takes over the sandboxes StateDir records, in parallel; a
// sandbox that cannot be (gone, its agent silent) is ended and forgotten.
func (m *Manager) reattach() {
	entries, _ := os.ReadDir(m.cfg.StateDir)
	// A socket without a record is a ready sandbox's (ready.go) of a
	// process that did not end cleanly: its agent, with no host, ends it.
	socks, _ := os.ReadDir(filepath.Join(m.cfg.StateDir, "sock"))
	for _, e := range socks {
		if _, err := os.Stat(filepath.Join(m.cfg.StateDir, e.Name()+".json")); os.IsNotExist(err) {
			os.RemoveAll(m.sockDir(e.Name()))
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		wg.Go(func() {
			if m.adopt(filepath.Join(m.cfg.StateDir, e.Name())) {
				mu.Lock()
				m.reattached++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// adopt takes over the sandbox recorded at path.
func (m *Manager) adopt(path string) bool {
	b, err := os.ReadFile(path)
	var r record
	if err == nil {
		err = json.Unmarshal(b, &r)
	}
	if err != nil || r.ID == "" || filepath.Base(path) != r.ID+".json" {
		os.Remove(path)
		return false
	}
	s := &Sandbox{ID: r.ID, Owner: r.Owner, Template: r.Template, Started: r.Started, Metadata: r.Metadata, Memory: r.Memory,
		Languages: r.Languages, Token: r.Token, PrivatePorts: r.PrivatePorts, Network: r.Network, NetworkBudgets: r.NetworkBudgets, Secrets: r.Secrets, Image: r.Image, secret: r.Secret, env: r.Env, ended: make(chan struct{}), end: r.End,
		AutoPause: r.AutoPause, left: r.Left, opts: CreateOptions{Env: r.CreateEnv}, Isolation: r.Isolation, ForkedMemory: r.ForkedMemory, IdlePause: r.IdlePause}
	if r.Evicted {
		return m.adoptEvicted(s, r)
	}
	var ao AdoptOptions
	if ao.Secrets, err = m.secretsOf(r.Owner, r.Secrets); err != nil {
		// Its network goes on without them: their placeholders go out
		// as they are.
		m.cfg.Log.Warn("live sandbox taken over without its secrets", "id", r.ID, "err", err)
	}
	run, err := m.start.(Adopter).Adopt(r.Engine, ao)
	if err != nil {
		// Most often it ended meanwhile.
		m.cfg.Log.Info("live sandbox not taken over", "id", r.ID, "err", err)
		m.forget(s)
		return false
	}
	s.setBox(run)
	if p, ok := run.(Pauser); ok {
		// A process that died while it paused it may have left it frozen
		// (and its record not saying so): its agent must run to connect.
		// One that is to stay paused is paused again below.
		p.Resume()
	}
	left := time.Until(r.End)
	if r.Paused {
		left = r.Left // handed on thawed (the engine's Detach): paused again below
	}
	ln, err := m.listen(r.ID)
	if err != nil || left <= 0 {
		if ln != nil {
			ln.Close()
		}
		run.Kill()
		run.Wait()
		m.forget(s)
		return false
	}
	defer ln.Close()
	conn, rd, err := accept(context.Background(), ln, r.Secret)
	if err != nil {
		m.cfg.Log.Warn("live sandbox not taken over: its agent", "id", r.ID, "err", err)
		run.Kill()
		run.Wait()
		m.forget(s)
		return false
	}
	s.client, s.closers = newClient(conn, rd, s.orphan), []io.Closer{conn}
	s.learnProcs()
	if r.Paused {
		p, ok := run.(Pauser)
		err := ErrNoPause
		if ok {
			ctx, cancel := context.WithTimeout(context.Background(), pauseTimeout)
			err = p.Pause(ctx)
			cancel()
		}
		if err == nil {
			s.paused.Store(true)
		} else {
			m.cfg.Log.Warn("live sandbox taken over running: it was paused", "id", r.ID, "err", err)
			s.end = time.Now().Add(left)
		}
	}
	m.mu.Lock()
	m.memory += r.Memory
	m.mu.Unlock()
	m.run(s, left)
	if reg := m.cfg.Registry; reg != nil {
		if err := reg.Add(s); err != nil {
			m.cfg.Log.Warn("live sandbox taken over but not recorded", "id", s.ID, "err", err)
		}
	}
	return true
}

// Detach leaves every sandbox running for the next process when this
// Manager's sandboxes can outlive it (it ends them otherwise: Close), and
// refuses new ones. Their agents wait for a host to connect to again.
func (m *Manager) Detach() {
	if !m.persistent() {
		m.Close()
		return
	}
	for _, s := range m.shutReady() {
		m.discard(s)
	}
	for _, s := range m.shut() {
		s.mu.Lock()
		s.timer.Stop()
		s.mu.Unlock()
		m.save(s)
		s.closeConns()
		if h, ok := s.box().(HandOff); ok {
			s.handed.Store(true) // its Wait returns now: its record stays
			h.Detach()
		}
	}
}

// adoptEvicted takes over s, evicted to disk by an earlier process as r
// says: it stays there, paused, until it is used.
func (m *Manager) adoptEvicted(s *Sandbox, r record) bool {
	dir := m.evictDir(r.ID)
	if _, err := os.Stat(dir); err != nil || !time.Now().Before(s.Started.Add(m.cfg.MaxTimeout)) {
		m.cfg.Log.Info("live sandbox evicted to disk not taken over", "id", r.ID, "err", err)
		m.forget(s)
		return false
	}
	ev := m.newEvicted(s, dir, r.EvictedMemory)
	s.client = suspendedClient(s.orphan, ev.next)
	s.setBox(ev.box())
	s.evicted.Store(true)
	s.paused.Store(true)
	s.pausedSince = time.Now()
	m.run(s, max(r.Left, time.Second))
	if reg := m.cfg.Registry; reg != nil {
		if err := reg.Add(s); err != nil {
			m.cfg.Log.Warn("live sandbox taken over but not recorded", "id", s.ID, "err", err)
		}
	}
	return true
}
