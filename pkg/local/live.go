package local

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/live"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// liveProcesses bounds the processes of one live sandbox (all of them,
// over its whole life at once).
const liveProcesses = 512

// LiveStarter is x as the starter of live sandboxes (pkg/live) on this
// host: each is the agent in a sandbox of x's engine. It is a live.Adopter:
// a sandbox whose agent is on a socket is detached from this process as it
// starts, and taken over by the engine at once (and by the next process's
// after a restart), so that the two are one path.
func LiveStarter(x *executor.Executor) live.Starter { return liveStarter{x} }

type liveStarter struct{ x *executor.Executor }

// liveSpec is the executor's form of o.
func liveSpec(o live.StartOptions) executor.LiveSpec {
	return executor.LiveSpec{Languages: o.Languages, Env: o.Env, Tenant: o.Owner,
		Limits: sandbox.Limits{Memory: o.MemoryBytes, WallTime: o.Lifetime, CPUTime: o.Lifetime, Processes: liveProcesses,
			WorkSize: o.DiskBytes, TmpSize: o.DiskBytes},
		SocketDir: o.SocketDir, Secret: o.Secret}
}

// PrewarmLive keeps n sandboxes ready for live sandboxes started with o.
func (s liveStarter) PrewarmLive(o live.StartOptions, n int) error {
	return s.x.PrewarmLive(liveSpec(o), n)
}

func (s liveStarter) StartLive(ctx context.Context, o live.StartOptions, req io.Reader, events io.Writer) (live.Running, error) {
	spec := liveSpec(o)
	spec.Requests, spec.Events = req, events
	p, err := s.x.StartLive(ctx, spec)
	if err != nil {
		return nil, err
	}
	if o.SocketDir == "" {
		return liveProcess{p}, nil
	}
	d, err := p.Detach()
	if err != nil {
		p.Kill()
		p.Wait()
		return nil, err
	}
	a, err := s.x.Engine().Adopt(d)
	if err != nil {
		return nil, err
	}
	return adopted{a, d}, nil
}

// Adopt takes over a sandbox by the record an earlier process kept.
func (s liveStarter) Adopt(rec json.RawMessage) (live.Running, error) {
	var d sandbox.Detached
	if err := json.Unmarshal(rec, &d); err != nil {
		return nil, err
	}
	a, err := s.x.Engine().Adopt(&d)
	if err != nil {
		return nil, err
	}
	return adopted{a, &d}, nil
}

func stats(s sandbox.Stats, err error) (live.Stats, error) {
	return live.Stats{CPU: time.Duration(s.CPU), Memory: s.Memory, MemoryPeak: s.MemoryPeak, Disk: s.Disk, DiskTotal: s.DiskTotal}, err
}

// liveProcess is a sandbox that ends with this process.
type liveProcess struct{ p *sandbox.Process }

func (l liveProcess) Wait() error                { _, err := l.p.Wait(); return err }
func (l liveProcess) Kill()                      { l.p.Kill() }
func (l liveProcess) Stats() (live.Stats, error) { return stats(l.p.Stats()) }
func (l liveProcess) DialTCP(ctx context.Context, port int) (net.Conn, error) {
	return l.p.DialTCP(ctx, port)
}

// adopted is a sandbox that can outlive this process, and its record.
type adopted struct {
	a *sandbox.Adopted
	d *sandbox.Detached
}

func (l adopted) Wait() error                { return l.a.Wait() }
func (l adopted) Kill()                      { l.a.Kill() }
func (l adopted) Stats() (live.Stats, error) { return stats(l.a.Stats()) }
func (l adopted) DialTCP(ctx context.Context, port int) (net.Conn, error) {
	return l.a.DialTCP(ctx, port)
}

// Record is what the next process needs to take the sandbox over.
func (l adopted) Record() json.RawMessage {
	b, _ := json.Marshal(l.d)
	return b
}

// LiveStarter starts live sandboxes on b's executor when it is this host's
// engine (nil otherwise: a fake executor in tests).
func (b Backend) LiveStarter() live.Starter {
	if x, ok := b.x.(*executor.Executor); ok {
		return liveStarter{x}
	}
	return nil
}
