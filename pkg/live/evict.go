package live

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/lib/linktree"
)

// Eviction: a paused sandbox is written to disk (StateDir/evicted/ID) and
// ended, so that it holds no memory; it stays the same sandbox (its id,
// token, timeout, client and calls), paused, until any call or a resume
// brings it back. Under a backend that writes a sandbox out whole
// (Checkpointer: gVisor) it comes back with its memory and running
// processes; under others with its files (its home and /tmp), its
// processes ended. A create past the server's memory evicts paused
// sandboxes that keep their memory so; Config.EvictAfter evicts any
// paused that long. An evicted sandbox counts against its owner's count
// of sandboxes but not against the server's memory; it still ends at the
// longest life a sandbox has (Config.MaxTimeout from its start), and
// outlives the server as any other. Snapshots and forks of it are taken
// from the disk, without bringing it back.

// Errors of Evict.
var (
	// ErrNoEvict is a sandbox that cannot be written to disk here (a
	// server that keeps no state, or a sandbox whose files cannot be
	// copied).
	ErrNoEvict = errors.New("live: this sandbox cannot be evicted to disk here")
	// ErrNotPaused is an eviction of a sandbox that runs: pause it first.
	ErrNotPaused = errors.New("live: only a paused sandbox is evicted to disk: pause it first")
)

// evictDir is where sandbox id is kept while it is evicted.
func (m *Manager) evictDir(id string) string { return filepath.Join(m.cfg.StateDir, "evicted", id) }

// Evicted says whether the sandbox is written to disk, its memory given
// back (it is paused too).
func (s *Sandbox) Evicted() bool { return s.evicted.Load() }

// Evict writes owner's paused sandbox id to disk and ends what ran it
// (Manager's eviction, above). A sandbox evicted already is left so.
func (m *Manager) Evict(ctx context.Context, owner, id string) error {
	s, err := m.Get(owner, id)
	if err != nil {
		return err
	}
	return m.evict(ctx, s)
}

func (m *Manager) evict(ctx context.Context, s *Sandbox) error {
	if !m.persistent() {
		return ErrNoEvict
	}
	s.pauseMu.Lock()
	defer s.pauseMu.Unlock()
	if !s.Paused() {
		return ErrNotPaused
	}
	if s.evicted.Load() {
		return nil
	}
	old := s.box()
	c, _, whole := m.checkpointer(s)
	f, files := old.(Filer)
	if !whole && !files {
		return ErrNoEvict
	}
	dir := m.evictDir(s.ID)
	tmp := dir + ".new"
	os.RemoveAll(tmp)
	os.RemoveAll(dir)
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return err
	}
	ev := m.newEvicted(s, dir, whole)
	var err error
	if whole {
		err = m.writeFrozen(ctx, s, old.(Pauser), c, ev, tmp)
	} else {
		_, err = f.SaveFiles(ctx, tmp, 2*m.cfg.DiskBytes) // frozen as it is; its home and /tmp at most
	}
	if err == nil {
		err = os.Rename(tmp, dir)
	}
	if err != nil {
		ev.Kill() // its clock
		os.RemoveAll(tmp)
		return fmt.Errorf("live: writing the sandbox to disk: %w", err)
	}
	ev.streams = s.client.streamIDs()
	s.client.suspend(ev.next)
	s.evicted.Store(true)
	s.setBox(ev.box())
	old.Kill()
	s.closeConns()
	m.release("", s.Memory)
	if err := m.save(s); err != nil {
		m.cfg.Log.Warn("live sandbox evicted: its record not kept", "id", s.ID, "err", err)
	}
	return nil
}

// writeFrozen writes s, paused, out whole into dir with c, as it is: its
// agent is thawed to read every request sent to it (Client.Hold, whose
// redial is ev's: the agent's next connection is the one it makes once it
// is back), frozen again, and written out frozen (nothing runs past what
// is written); it stays frozen.
func (m *Manager) writeFrozen(ctx context.Context, s *Sandbox, p Pauser, c Checkpointer, ev *evicted, dir string) error {
	pause := func() error {
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pauseTimeout)
		defer cancel()
		return p.Pause(pctx)
	}
	if err := p.Resume(); err != nil {
		return err
	}
	release, err := s.client.Hold(ctx, ev.next)
	if err != nil {
		pause()
		return err
	}
	if err = pause(); err == nil {
		_, err = c.Checkpoint(ctx, dir, 2*m.cfg.DiskBytes)
	}
	release(0) // not waiting for a connection: it is made once it is back
	return err
}

// comeBack brings s back from the disk (under its pauseMu): started again
// from what was written there, its agent given to its client. It runs;
// whole says it has its memory and running processes (for the caller to
// learn, once its pauseMu is let go: a call would resume it).
func (m *Manager) comeBack(s *Sandbox) (whole bool, err error) {
	ev := s.box().(evictedBox).base()
	m.mu.Lock()
	if m.cfg.MaxMemoryBytes > 0 && m.memory+s.Memory > m.cfg.MaxMemoryBytes {
		m.mu.Unlock()
		return false, &LimitError{Msg: fmt.Sprintf("the live sandboxes' memory would exceed the server's %d MiB: the sandbox stays on disk; retry later", m.cfg.MaxMemoryBytes>>20), Full: true}
	}
	m.memory += s.Memory
	m.mu.Unlock()
	fail := func(err error) (bool, error) {
		m.release("", s.Memory)
		return false, fmt.Errorf("live: bringing the sandbox back from disk: %w", err)
	}
	ln, err := m.listen(s.ID)
	if err != nil {
		return fail(err)
	}
	defer ln.Close()
	so := m.startOptions(s.Owner, s.options())
	so.SocketDir, so.Secret = m.sockDir(s.ID), s.secret
	if so.Secrets, err = m.secretsOf(s.Owner, s.Secrets); err != nil {
		return fail(err)
	}
	so.Lifetime = time.Until(s.Started.Add(m.cfg.MaxTimeout))
	ctx := context.Background()
	var run Running
	cow := !ev.whole && m.startsFromFiles()
	switch {
	case ev.whole:
		run, err = m.start.(Restorer).Restore(ctx, so, ev.dir)
	case cow:
		// Its files copy-on-write over what was written to disk.
		if so.Files, err = m.linkFiles(s.ID, ev.dir); err == nil {
			run, err = m.start.StartLive(ctx, so, nil, nil)
		}
	default:
		run, err = m.start.StartLive(ctx, so, nil, nil)
	}
	if cow && errors.Is(err, ErrNoCopyOnWrite) {
		m.noCow.Store(true)
		cow = false
		os.RemoveAll(so.Files)
		so.Files = ""
		run, err = m.start.StartLive(ctx, so, nil, nil)
	}
	if err != nil {
		return fail(err)
	}
	kill := func(err error) (bool, error) {
		run.Kill()
		run.Wait()
		return fail(err)
	}
	conn, rd, err := accept(ctx, ln, s.secret)
	if err != nil {
		return kill(err)
	}
	if !ev.whole && !cow {
		f, ok := run.(Filer)
		if !ok {
			conn.Close()
			return kill(ErrNoEvict)
		}
		if err := f.LoadFiles(ev.dir); err != nil {
			conn.Close()
			return kill(err)
		}
	}
	select {
	case ev.back <- agentConn{conn, rd}:
	case <-time.After(connectTimeout):
		conn.Close()
		return kill(errors.New("its client did not take the agent"))
	}
	s.mu.Lock()
	s.closers = []io.Closer{conn}
	s.mu.Unlock()
	s.setBox(run)
	s.evicted.Store(false)
	ev.Kill() // what waited for the evicted one waits for run
	if !s.client.awaitRedial(redialWait) {
		m.cfg.Log.Warn("live sandbox back from disk: its client did not take the agent", "id", s.ID)
	}
	if !ev.whole {
		s.mu.Lock()
		s.procs = nil
		s.mu.Unlock()
		s.client.endStreams(ev.streams, "the sandbox was evicted to disk: its processes ended")
	}
	os.RemoveAll(ev.dir)
	return ev.whole, nil
}

// agentConn is an agent's connection, its hello read.
type agentConn struct {
	conn net.Conn
	rd   *bufio.Reader
}

// evicted is what runs an evicted sandbox: nothing. Wait returns when it
// is killed (or comes back: then another runs it), or at the end of its
// life.
type evicted struct {
	dir   string
	whole bool
	back  chan agentConn // the agent's connection once it is back
	done  chan struct{}
	once  sync.Once
	life  *time.Timer
	// streams are the client's streams when it was evicted: under its
	// files only, they end when it comes back.
	streams []uint64
}

// newEvicted is s written to dir (whole: with its memory), ending at the
// end of its life.
func (m *Manager) newEvicted(s *Sandbox, dir string, whole bool) *evicted {
	ev := &evicted{dir: dir, whole: whole, back: make(chan agentConn), done: make(chan struct{})}
	ev.life = time.AfterFunc(time.Until(s.Started.Add(m.cfg.MaxTimeout)), ev.Kill)
	return ev
}

// box is ev as the Running it is: a Checkpointer when it keeps memory,
// a Filer otherwise.
func (ev *evicted) box() Running {
	if ev.whole {
		return evictedWhole{ev}
	}
	return evictedFiles{ev}
}

// next is the agent's next connection for the client: once it is back.
func (ev *evicted) next() (io.Writer, io.Reader, error) {
	select {
	case c := <-ev.back:
		return c.conn, c.rd, nil
	case <-ev.done:
		return nil, nil, ErrGone
	}
}

func (ev *evicted) Wait() error {
	<-ev.done
	return nil
}

func (ev *evicted) Kill() {
	ev.once.Do(func() {
		ev.life.Stop()
		close(ev.done)
	})
}

// Detach hands it on: its record and directory stay for the next process.
func (ev *evicted) Detach() error {
	ev.Kill()
	return nil
}

func (ev *evicted) DialTCP(context.Context, int) (net.Conn, error) {
	return nil, errors.New("live: the sandbox is evicted to disk")
}

func (ev *evicted) Stats() (Stats, error) { return Stats{}, nil }

// Record is an evicted sandbox's part of its record: none (the record
// says it is evicted).
func (ev *evicted) Record() json.RawMessage { return json.RawMessage("null") }

func (ev *evicted) base() *evicted { return ev }

// linked is what linktree.Link returned, its bound in live's terms.
func linked(n int64, err error) (int64, error) {
	if errors.Is(err, linktree.ErrTooLarge) {
		err = fmt.Errorf("%w: %w", ErrTooLarge, err)
	}
	return n, err
}

// evictedBox is an evicted sandbox's Running.
type evictedBox interface{ base() *evicted }

// evictedWhole is an evicted sandbox with its memory: a checkpoint of it
// is a copy of what was written.
type evictedWhole struct{ *evicted }

func (ev evictedWhole) Checkpoint(ctx context.Context, dir string, max int64) (int64, error) {
	return linked(linktree.Link(ev.dir, dir, max))
}

// evictedFiles is an evicted sandbox with its files only.
type evictedFiles struct{ *evicted }

func (ev evictedFiles) SaveFiles(ctx context.Context, dir string, max int64) (int64, error) {
	return linked(linktree.Link(ev.dir, dir, max))
}

func (ev evictedFiles) LoadFiles(string) error {
	return errors.New("live: the sandbox is evicted to disk")
}

// evictPaused evicts the paused sandboxes that keep their memory on disk
// (whole: nothing of them is lost), the longest paused first, until mem
// bytes more fit in the server's memory: a create that the paused ones
// would refuse otherwise. It says whether they fit.
func (m *Manager) evictPaused(ctx context.Context, mem int64) bool {
	m.mu.Lock()
	var paused []*Sandbox
	for _, s := range m.boxes {
		if _, _, whole := m.checkpointer(s); whole && s.Paused() && !s.evicted.Load() {
			paused = append(paused, s)
		}
	}
	m.mu.Unlock()
	slices.SortFunc(paused, func(a, b *Sandbox) int { return a.pausedAt().Compare(b.pausedAt()) })
	for _, s := range paused {
		if m.fits(mem) {
			return true
		}
		if err := m.evict(ctx, s); err != nil && !errors.Is(err, ErrNotPaused) {
			m.cfg.Log.Warn("live sandbox not evicted to make room", "id", s.ID, "err", err)
		}
	}
	return m.fits(mem)
}

// fits says whether mem bytes more fit in the server's memory.
func (m *Manager) fits(mem int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cfg.MaxMemoryBytes <= 0 || m.memory+mem <= m.cfg.MaxMemoryBytes
}

// pausedAt is when s was last paused.
func (s *Sandbox) pausedAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pausedSince
}

// armEvict evicts s once it has stayed paused for Config.EvictAfter.
func (m *Manager) armEvict(s *Sandbox) {
	if m.cfg.EvictAfter <= 0 || !m.persistent() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	since := s.pausedSince
	if s.evictTimer != nil {
		s.evictTimer.Stop()
	}
	s.evictTimer = time.AfterFunc(m.cfg.EvictAfter, func() {
		select {
		case <-s.ended:
			return
		default:
		}
		if s.pausedAt() != since {
			return // resumed and paused again since: a later timer's
		}
		if err := m.evict(context.Background(), s); err != nil && !errors.Is(err, ErrNotPaused) {
			m.cfg.Log.Warn("live sandbox not evicted", "id", s.ID, "err", err)
		}
	})
}
