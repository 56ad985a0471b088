package local

import (
	"context"
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
// host: each is the agent in a sandbox of x's engine.
func LiveStarter(x *executor.Executor) live.Starter { return liveStarter{x} }

type liveStarter struct{ x *executor.Executor }

func (s liveStarter) StartLive(ctx context.Context, o live.StartOptions, req io.Reader, events io.Writer) (live.Running, error) {
	p, err := s.x.StartLive(ctx, executor.LiveSpec{Languages: o.Languages, Env: o.Env, Tenant: o.Owner,
		Limits: sandbox.Limits{Memory: o.MemoryBytes, WallTime: o.Lifetime, CPUTime: o.Lifetime, Processes: liveProcesses,
			WorkSize: o.DiskBytes, TmpSize: o.DiskBytes},
		Requests: req, Events: events})
	if err != nil {
		return nil, err
	}
	return liveProcess{p}, nil
}

type liveProcess struct{ p *sandbox.Process }

func (l liveProcess) Wait() error { _, err := l.p.Wait(); return err }
func (l liveProcess) Kill()       { l.p.Kill() }

func (l liveProcess) Stats() (live.Stats, error) {
	s, err := l.p.Stats()
	return live.Stats{CPU: time.Duration(s.CPU), Memory: s.Memory, MemoryPeak: s.MemoryPeak, Disk: s.Disk, DiskTotal: s.DiskTotal}, err
}

func (l liveProcess) DialTCP(ctx context.Context, port int) (net.Conn, error) {
	return l.p.DialTCP(ctx, port)
}

// LiveStarter starts live sandboxes on b's executor when it is this host's
// engine (nil otherwise: a fake executor in tests).
func (b Backend) LiveStarter() live.Starter {
	if x, ok := b.x.(*executor.Executor); ok {
		return liveStarter{x}
	}
	return nil
}
