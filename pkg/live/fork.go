package live

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/lib/records"
	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
)

// Checkpointer is a Running whose whole state, its memory and running
// processes with its files, can be written out (gVisor's checkpoint):
// Checkpoint writes it into dir, its files bounded by max bytes (-1 none;
// an error that wraps ErrTooLarge past it), and returns the bytes written.
// The sandbox goes on; its agent loses its connection and connects again.
type Checkpointer interface {
	Checkpoint(ctx context.Context, dir string, max int64) (int64, error)
}

// Restorer is a Starter that makes a sandbox go on from what a
// Checkpointer wrote in dir, started as o says (its own socket directory):
// its agent, the checkpointed one's copy, connects there with the
// checkpointed sandbox's secret.
type Restorer interface {
	Restore(ctx context.Context, o StartOptions, dir string) (Running, error)
}

// redialWait bounds how long a checkpoint waits for its sandbox's agent to
// connect again.
const redialWait = 30 * time.Second

// checkpointer is s's Checkpointer with the Manager's Restorer, when its
// sandboxes can be written out and made again from that.
func (m *Manager) checkpointer(s *Sandbox) (Checkpointer, Restorer, bool) {
	c, ok := s.box().(Checkpointer)
	r, rok := m.start.(Restorer)
	return c, r, ok && rok && m.persistent()
}

// checkpoint writes s's whole state into dir (its files at most max
// bytes) with c. A paused sandbox is resumed for it (its agent must
// answer) and paused again after; the agent's requests wait meanwhile.
func (m *Manager) checkpoint(ctx context.Context, s *Sandbox, c Checkpointer, dir string, max int64) (int64, error) {
	if _, ok := c.(evictedWhole); ok {
		return c.Checkpoint(ctx, dir, max) // from the disk, where it is
	}
	if resumed, err := m.resume(s, 0); err != nil {
		return 0, err
	} else if resumed {
		defer m.pause(context.WithoutCancel(ctx), s)
	}
	return m.writeOut(ctx, s, c, dir, max)
}

// writeOut is checkpoint of s, which runs.
func (m *Manager) writeOut(ctx context.Context, s *Sandbox, c Checkpointer, dir string, max int64) (int64, error) {
	// The agent's requests wait while it is written out: its connection
	// ends with the checkpoint, and the agent connects again.
	release, err := s.client.Hold(ctx, func() (io.Writer, io.Reader, error) { return m.reconnect(s) })
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	conns := slices.Clone(s.closers)
	s.mu.Unlock()
	n, err := c.Checkpoint(ctx, dir, max)
	halfClose(conns) // its agent reads the end, and connects again
	if !release(redialWait) {
		m.cfg.Log.Warn("live sandbox written out: its agent did not connect again", "id", s.ID)
	}
	return n, err
}

// forkMemory is Fork of s, which can be written out: each child goes on
// from s's memory, processes and files at one moment.
func (m *Manager) forkMemory(ctx context.Context, s *Sandbox, c Checkpointer, n int, timeout time.Duration) ([]*Sandbox, []error, error) {
	if timeout > m.cfg.MaxTimeout {
		return nil, nil, fmt.Errorf("%w: a timeout of %v is over the most a sandbox may live, %v", ErrInvalid, timeout, m.cfg.MaxTimeout)
	}
	dir, err := os.MkdirTemp(m.cfg.StateDir, ".fork-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	if _, err := m.checkpoint(ctx, s, c, dir, 2*m.cfg.DiskBytes); err != nil {
		return nil, nil, fmt.Errorf("live: writing the sandbox out: %w", err)
	}
	o := s.options()
	o.Timeout = timeout
	kids, errs := make([]*Sandbox, n), make([]error, n)
	for i := range n {
		kids[i], errs[i] = m.createRestored(ctx, s.Owner, o, dir, s.secret)
	}
	return kids, errs, nil
}

// createRestored creates a sandbox of owner's as o says that goes on from
// what a checkpoint wrote in dir, its agent saying secret.
func (m *Manager) createRestored(ctx context.Context, owner string, o CreateOptions, dir, secret string) (*Sandbox, error) {
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = m.cfg.DefaultTimeout
	}
	if timeout > m.cfg.MaxTimeout {
		return nil, fmt.Errorf("%w: a timeout of %v is over the most a sandbox may live, %v", ErrInvalid, timeout, m.cfg.MaxTimeout)
	}
	r, ok := m.start.(Restorer)
	if !ok || !m.persistent() {
		return nil, ErrNoSnapshots
	}
	mem := o.MemoryBytes
	if mem <= 0 {
		mem = m.cfg.DefaultMemoryBytes
	}
	id := records.NewID("sbx")
	if err := m.reserve(owner, id, mem); err != nil {
		return nil, err
	}
	s := newSandbox(id, owner, o, mem, time.Now())
	s.ForkedMemory, s.secret, s.env = true, secret, envList(o.Env)
	fail := func(err error) (*Sandbox, error) {
		m.forget(s)
		m.release(id, mem)
		return nil, err
	}
	ln, err := m.listen(id)
	if err != nil {
		return fail(fmt.Errorf("live: the agent's socket: %w", err))
	}
	defer ln.Close()
	so := m.startOptions(owner, o)
	so.SocketDir, so.Secret = m.sockDir(id), secret
	if so.Secrets, err = m.secretsOf(owner, o.Secrets); err != nil {
		return fail(err)
	}
	run, err := r.Restore(context.WithoutCancel(ctx), so, dir)
	if err != nil {
		return fail(err)
	}
	if err := m.attach(ctx, s, run, ln); err != nil {
		run.Kill()
		run.Wait()
		return fail(err)
	}
	if err := m.admit(s, o, timeout); err != nil {
		return nil, err
	}
	return s, nil
}

// attach takes s's agent, run's, when it connects on ln with s's secret,
// and learns its running processes.
func (m *Manager) attach(ctx context.Context, s *Sandbox, run Running, ln *net.UnixListener) error {
	conn, rd, err := accept(ctx, ln, s.secret)
	if err != nil {
		return err
	}
	s.client, s.closers = newClient(conn, rd, s.orphan), []io.Closer{conn}
	s.setBox(run)
	s.learnProcs()
	return nil
}

// learnProcs asks s's agent for its running processes (started by an
// earlier client: a process before a restart, a sandbox forked), for those
// who attach to them or signal them.
func (s *Sandbox) learnProcs() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	ev, err := s.client.Call(ctx, agent.Request{Op: agent.OpList})
	cancel()
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.procs == nil {
		s.procs = map[int]*Proc{}
	}
	for _, p := range ev.Procs {
		if s.procs[p.PID] == nil {
			s.procs[p.PID] = &Proc{PID: p.PID, sb: s}
		}
		s.procs[p.PID].Request = agent.Request{Args: p.Args, Dir: p.Dir, Tag: p.Tag}
	}
}

// reconnect is s's agent's next connection on its socket (after a
// checkpoint ended the one it had).
func (m *Manager) reconnect(s *Sandbox) (io.Writer, io.Reader, error) {
	ln, err := m.listen(s.ID)
	if err != nil {
		return nil, nil, err
	}
	defer ln.Close()
	conn, rd, err := accept(context.Background(), ln, s.secret)
	if err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	old := s.closers
	s.closers = []io.Closer{conn}
	s.mu.Unlock()
	for _, c := range old {
		c.Close()
	}
	return conn, rd, nil
}

// halfClose ends what this process sends on an agent's connection: the
// agent reads its end (and connects again), what it sent before is still
// read here.
func halfClose(conns []io.Closer) {
	for _, c := range conns {
		if u, ok := c.(*net.UnixConn); ok {
			u.CloseWrite()
		}
	}
}
