package live

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/lib/records"
	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
)

// Cloner is a Running whose whole state, its memory and running processes
// with its files, can be copied into new sandboxes (gVisor's checkpoint and
// restore): each clone is started as its StartOptions say (its own socket
// directory), and its agent, the original's copy, connects there with the
// original's secret. The original's agent loses its connection and connects
// again. A clone that could not be made is its error.
type Cloner interface {
	Clone(ctx context.Context, o []StartOptions) ([]Running, []error, error)
}

// redialWait bounds how long a fork waits for its sandbox's agent to
// connect again after the checkpoint.
const redialWait = 30 * time.Second

// forkMemory is Fork of s, whose running can clone itself: each child
// goes on from s's memory, processes and files at one moment.
func (m *Manager) forkMemory(ctx context.Context, s *Sandbox, c Cloner, n int, timeout time.Duration) ([]*Sandbox, []error, error) {
	if timeout <= 0 {
		timeout = m.cfg.DefaultTimeout
	}
	if timeout > m.cfg.MaxTimeout {
		return nil, nil, fmt.Errorf("%w: a timeout of %v is over the most a sandbox may live, %v", ErrInvalid, timeout, m.cfg.MaxTimeout)
	}
	// A paused sandbox is forked running (its agent must answer), and
	// paused again after.
	if resumed, err := m.resume(s, 0); err != nil {
		return nil, nil, err
	} else if resumed {
		defer m.pause(context.WithoutCancel(ctx), s)
	}
	kids, errs := make([]*Sandbox, n), make([]error, n)
	type slot struct {
		i  int
		ln *net.UnixListener
	}
	var slots []slot
	var opts []StartOptions
	o := s.options()
	drop := func(sl slot, err error) {
		sl.ln.Close()
		m.forget(kids[sl.i])
		m.release(kids[sl.i].ID, kids[sl.i].Memory)
		kids[sl.i], errs[sl.i] = nil, err
	}
	for i := range n {
		id := records.NewID("sbx")
		if errs[i] = m.reserve(s.Owner, id, s.Memory); errs[i] != nil {
			continue
		}
		kid := &Sandbox{ID: id, Owner: s.Owner, Template: s.Template, Started: time.Now(), Metadata: maps.Clone(o.Metadata),
			Memory: s.Memory, Languages: slices.Clone(s.Languages), Token: records.NewID(""), PrivatePorts: s.PrivatePorts,
			Network: slices.Clone(s.Network), Image: s.Image, AutoPause: s.AutoPause, Isolation: s.Isolation,
			ForkedMemory: true, secret: s.secret, env: slices.Clone(s.env), ended: make(chan struct{})}
		ln, err := m.listen(id)
		if err != nil {
			m.release(id, s.Memory)
			errs[i] = fmt.Errorf("live: the agent's socket: %w", err)
			continue
		}
		kids[i] = kid
		so := m.startOptions(s.Owner, o)
		so.SocketDir, so.Secret = m.sockDir(id), s.secret
		slots, opts = append(slots, slot{i, ln}), append(opts, so)
	}
	if len(slots) == 0 {
		return kids, errs, nil
	}
	// The agent's requests wait while it is copied: the copy's connection
	// ends with the checkpoint, and the agent connects again.
	release, err := s.client.Hold(ctx, func() (io.Writer, io.Reader, error) { return m.reconnect(s) })
	if err != nil {
		for _, sl := range slots {
			drop(sl, nil)
		}
		return nil, nil, err
	}
	s.mu.Lock()
	conns := slices.Clone(s.closers)
	s.mu.Unlock()
	runs, cerrs, err := c.Clone(ctx, opts)
	halfClose(conns) // its agent reads the end, and connects again
	if !release(redialWait) {
		m.cfg.Log.Warn("live sandbox forked: its agent did not connect again", "id", s.ID)
	}
	if err != nil {
		for _, sl := range slots {
			drop(sl, nil)
		}
		return nil, nil, err
	}
	for j, sl := range slots {
		kid := kids[sl.i]
		if cerrs[j] != nil {
			drop(sl, cerrs[j])
			continue
		}
		if err := m.attach(ctx, kid, runs[j], sl.ln); err != nil {
			runs[j].Kill()
			runs[j].Wait()
			drop(sl, err)
			continue
		}
		sl.ln.Close()
		kid.end = kid.Started.Add(timeout)
		kid.opts = CreateOptions{Env: maps.Clone(o.Env)}
		if err := m.save(kid); err != nil {
			kid.running.Kill()
			kid.running.Wait()
			drop(sl, fmt.Errorf("live: keeping the sandbox's record: %w", err))
			continue
		}
		m.run(kid, timeout)
		if r := m.cfg.Registry; r != nil {
			if err := r.Add(kid); err != nil {
				kid.running.Kill()
				<-kid.ended
				kids[sl.i], errs[sl.i] = nil, fmt.Errorf("live: recording the sandbox: %w", err)
			}
		}
	}
	return kids, errs, nil
}

// attach takes s's agent, run's, when it connects on ln with s's secret,
// and learns its running processes.
func (m *Manager) attach(ctx context.Context, s *Sandbox, run Running, ln *net.UnixListener) error {
	conn, rd, err := accept(ctx, ln, s.secret)
	if err != nil {
		return err
	}
	s.running, s.client, s.closers = run, newClient(conn, rd, s.orphan), []io.Closer{conn}
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
			s.procs[p.PID] = &Proc{PID: p.PID}
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
