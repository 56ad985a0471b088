package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"

	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/gvisor"
	"github.com/sandbox-run/sandbox-run/pkg/live"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// Live sandboxes under gVisor (StartOptions.Isolation "gvisor"): the agent
// in a sandbox of pkg/gvisor's, on its socket, outliving this process as the
// engine's do; they pause, copy their files, and are written out whole
// and made again from that (live.Checkpointer, live.Restorer): forks and
// snapshots with their memory. They have no network and no image yet;
// their ports are reached through their agents (gVisor's network stack is
// its own: live.ErrAgentDial).

// gvisorRunner is x's gVisor backend, or why there is none.
func gvisorRunner(x *executor.Executor) (*gvisor.Runner, error) {
	if g, ok := x.GVisor().(*gvisor.Runner); ok && g != nil {
		return g, nil
	}
	return nil, errors.New("isolation gvisor: this server cannot run gVisor (runsc is not installed: scripts/install-gvisor.sh builds it)")
}

// gvisorSpec is the sandbox spec of a live sandbox started with o under
// gVisor.
func gvisorSpec(x *executor.Executor, o live.StartOptions) (*sandbox.Spec, error) {
	switch {
	case o.Network != nil:
		return nil, errors.New("isolation gvisor: live sandboxes with a network run under the native isolation only, for now")
	case o.Image != "":
		return nil, errors.New("isolation gvisor: live sandboxes in an image run under the native isolation only, for now")
	}
	return x.LiveSandboxSpec(liveSpec(o))
}

// startGVisor starts a live sandbox as o says under gVisor.
func (s liveStarter) startGVisor(ctx context.Context, o live.StartOptions) (live.Running, error) {
	g, err := gvisorRunner(s.x)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", live.ErrInvalid, err)
	}
	spec, err := gvisorSpec(s.x, o)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", live.ErrInvalid, err)
	}
	lv, err := g.StartLive(ctx, spec)
	if err != nil {
		return nil, err
	}
	return gvisorLive{lv: lv, x: s.x}, nil
}

// adoptGVisor takes over the sandbox of r under gVisor.
func (s liveStarter) adoptGVisor(r gvisor.LiveRecord) (live.Running, error) {
	g, err := gvisorRunner(s.x)
	if err != nil {
		return nil, err
	}
	lv, err := g.AdoptLive(r)
	if err != nil {
		return nil, err
	}
	return gvisorLive{lv: lv, x: s.x}, nil
}

// gvisorLive is a live sandbox under gVisor.
type gvisorLive struct {
	lv *gvisor.Live
	x  *executor.Executor
}

func (l gvisorLive) Wait() error                     { return l.lv.Wait() }
func (l gvisorLive) Kill()                           { l.lv.Kill() }
func (l gvisorLive) Detach() error                   { return l.lv.Detach() }
func (l gvisorLive) Pause(ctx context.Context) error { return l.lv.Pause(ctx) }
func (l gvisorLive) Resume() error                   { return l.lv.Resume() }
func (l gvisorLive) LoadFiles(dir string) error      { return l.lv.LoadFiles(dir) }
func (l gvisorLive) Stats() (live.Stats, error)      { return stats(l.lv.Stats()) }

// DialTCP: its ports are reached through its agent (gVisor's network
// stack is its own).
func (l gvisorLive) DialTCP(context.Context, int) (net.Conn, error) {
	return nil, live.ErrAgentDial
}
func (l gvisorLive) SaveFiles(ctx context.Context, dir string, max int64) (int64, error) {
	return saved(l.lv.SaveFiles(ctx, dir, max))
}

// Record is what the next process needs to take it over.
func (l gvisorLive) Record() json.RawMessage {
	r := l.lv.Record()
	b, _ := json.Marshal(liveRecord{GVisor: &r})
	return b
}

// Checkpoint writes its memory, processes and files into dir
// (live.Checkpointer).
func (l gvisorLive) Checkpoint(ctx context.Context, dir string, max int64) (int64, error) {
	return saved(l.lv.Checkpoint(ctx, dir, max))
}

// Restore makes a sandbox under gVisor, started as o says, go on from what
// a Checkpoint wrote in dir (live.Restorer).
func (s liveStarter) Restore(ctx context.Context, o live.StartOptions, dir string) (live.Running, error) {
	g, err := gvisorRunner(s.x)
	if err != nil {
		return nil, err
	}
	spec, err := gvisorSpec(s.x, o)
	if err != nil {
		return nil, err
	}
	lv, err := g.RestoreLive(ctx, spec, dir)
	if err != nil {
		return nil, err
	}
	return gvisorLive{lv: lv, x: s.x}, nil
}
