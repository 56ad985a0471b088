package live

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"

	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
)

// Processes of a sandbox, as its callers see them: a process's events go
// to every subscriber, the caller that started it and those that attach
// later (E2B's Connect), each at its own pace.

// Proc is a process started in a sandbox.
type Proc struct {
	PID int
	// Request is what started it.
	Request agent.Request

	mu   sync.Mutex
	subs []*Sub
	exit *agent.Event // its last event, once it came
	// sb is its sandbox, which a subscriber waiting for its events keeps
	// awake (IdlePause).
	sb *Sandbox
}

// maxQueued bounds the output a slow subscriber has not read yet; past it
// output events are dropped for that subscriber (Sub.Dropped), never the
// last event.
const maxQueued = 16 << 20

// Sub is one subscriber's queue of a process's events.
type Sub struct {
	p      *Proc
	mu     sync.Mutex
	q      []agent.Event
	bytes  int
	wake   chan struct{}
	closed bool
	// Dropped counts output events dropped because the subscriber fell
	// behind by more than maxQueued.
	Dropped int
}

func (p *Proc) publish(ev agent.Event) {
	p.mu.Lock()
	if ev.Type == agent.EvExit || ev.Type == agent.EvError {
		p.exit = &ev
	}
	subs := slices.Clone(p.subs)
	p.mu.Unlock()
	for _, s := range subs {
		s.push(ev)
	}
}

// Subscribe gives a queue of p's events from now on (its last event at
// once if it has ended).
func (p *Proc) Subscribe() *Sub {
	s := &Sub{p: p, wake: make(chan struct{}, 1)}
	p.mu.Lock()
	p.subs = append(p.subs, s)
	exit := p.exit
	p.mu.Unlock()
	if exit != nil {
		s.push(*exit)
	}
	return s
}

// Ended says whether p's last event came.
func (p *Proc) Ended() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit != nil
}

func (s *Sub) push(ev agent.Event) {
	s.mu.Lock()
	last := ev.Type == agent.EvExit || ev.Type == agent.EvError
	if !s.closed && (last || s.bytes+len(ev.Data) <= maxQueued) {
		s.q = append(s.q, ev)
		s.bytes += len(ev.Data)
	} else if !s.closed {
		s.Dropped++
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// ErrEnded is Next after the last event.
var ErrEnded = errors.New("live: the process's events have ended")

// Next waits for the next event; after the last (an agent.EvExit, or an
// agent.EvError when the sandbox went away) it returns ErrEnded.
func (s *Sub) Next(ctx context.Context) (agent.Event, error) {
	if sb := s.p.sb; sb != nil {
		sb.busy(1)
		defer sb.busy(-1)
	}
	for {
		s.mu.Lock()
		if len(s.q) > 0 {
			ev := s.q[0]
			s.q = s.q[1:]
			s.bytes -= len(ev.Data)
			if ev.Type == agent.EvExit || ev.Type == agent.EvError {
				s.closed = true
			}
			s.mu.Unlock()
			return ev, nil
		}
		closed := s.closed
		s.mu.Unlock()
		if closed {
			return agent.Event{}, ErrEnded
		}
		select {
		case <-s.wake:
		case <-ctx.Done():
			return agent.Event{}, ctx.Err()
		}
	}
}

// Close stops s's queue (the process goes on).
func (s *Sub) Close() {
	s.mu.Lock()
	s.closed, s.q = true, nil
	s.mu.Unlock()
	p := s.p
	p.mu.Lock()
	p.subs = slices.DeleteFunc(p.subs, func(x *Sub) bool { return x == s })
	p.mu.Unlock()
}

// Start starts a process in s (r as agent.OpStart takes it) and returns it
// with the caller's subscription, which has every event after the start.
func (s *Sandbox) Start(ctx context.Context, r agent.Request) (*Proc, *Sub, error) {
	p := &Proc{Request: r, sb: s}
	sub := p.Subscribe()
	if len(s.env) > 0 { // its creator's, under the process's own
		r.Env = append(slices.Clip(s.env), r.Env...)
	}
	pid, err := s.client.Start(ctx, r, func(ev agent.Event) {
		p.publish(ev)
		if ev.Type == agent.EvExit || ev.Type == agent.EvError {
			s.mu.Lock()
			maps.DeleteFunc(s.procs, func(_ int, x *Proc) bool { return x == p })
			s.mu.Unlock()
		}
	})
	if err != nil {
		return nil, nil, err
	}
	p.PID = pid
	s.mu.Lock()
	if !p.Ended() {
		if s.procs == nil {
			s.procs = map[int]*Proc{}
		}
		s.procs[pid] = p
	}
	s.mu.Unlock()
	return p, sub, nil
}

// Procs are s's running processes known here (started through Start, or
// learned from its agent: a sandbox taken over, forked or made from a
// snapshot), by pid.
func (s *Sandbox) Procs() []*Proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Collect(maps.Values(s.procs))
	slices.SortFunc(out, func(a, b *Proc) int { return a.PID - b.PID })
	return out
}

// Proc is s's running process pid, started through Start.
func (s *Sandbox) Proc(pid int) (*Proc, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.procs[pid]
	return p, ok
}
