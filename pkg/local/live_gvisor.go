package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"

	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/gvisor"
	"github.com/sandbox-run/sandbox-run/pkg/live"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// Live sandboxes under gVisor (StartOptions.Isolation "gvisor"): the agent
// in a sandbox of pkg/gvisor's, on its socket, outliving this process as the
// engine's do; they pause, copy their files, and are written out whole
// and made again from that (live.Checkpointer, live.Restorer): forks and
// snapshots with their memory. Their root is the host's system or an
// image's (held while they run, as the engine's are); their network, when
// they have one, is the engine's egress on a device that outlives this
// process (a later one serves it anew); their ports are reached through
// their agents (gVisor's network stack is its own: live.ErrAgentDial).

// gvisorRunner is x's gVisor backend, or why there is none.
func gvisorRunner(x *executor.Executor) (*gvisor.Runner, error) {
	if g, ok := x.GVisor().(*gvisor.Runner); ok && g != nil {
		return g, nil
	}
	return nil, errors.New("isolation gvisor: this server cannot run gVisor (runsc is not installed: scripts/install-gvisor.sh builds it)")
}

// gvisorSpec is the sandbox spec of a live sandbox started with o under
// gVisor, with its image held, and its network if o has one, with its
// secrets' session ss (nil: a new one, when o has secrets; returned).
func (s liveStarter) gvisorSpec(ctx context.Context, o live.StartOptions, ss *executor.SecretSession) (*sandbox.Spec, gvisorLive, error) {
	ls := liveSpec(o)
	ss, err := withSecrets(o, &ls, ss)
	if err != nil {
		return nil, gvisorLive{}, err
	}
	spec, held, err := s.x.LiveSandboxSpec(ctx, ls)
	if err != nil {
		return nil, gvisorLive{}, fmt.Errorf("%w: %w", live.ErrInvalid, err) // a language, an image: the caller's to fix
	}
	l := gvisorLive{image: held, network: o.Network, budgets: o.NetworkBudgets, secrets: ss}
	if o.Network != nil {
		if spec.Network, l.net, err = s.network(context.WithoutCancel(ctx), o.Network, o.NetworkBudgets, ss, o.Secrets); err != nil {
			held.Release()
			return nil, gvisorLive{}, err
		}
	}
	return spec, l, nil
}

// startGVisor starts a live sandbox as o says under gVisor.
func (s liveStarter) startGVisor(ctx context.Context, o live.StartOptions) (live.Running, error) {
	g, err := gvisorRunner(s.x)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", live.ErrInvalid, err)
	}
	spec, l, err := s.gvisorSpec(ctx, o, nil)
	if err != nil {
		return nil, err
	}
	if l.lv, err = g.StartLive(ctx, spec); err != nil {
		l.image.Release()
		return nil, err
	}
	return l.made(), nil
}

// adoptGVisor takes over the sandbox of r (r.GVisor) under gVisor, its
// image held again while it runs, if the store still has it, and its
// network served anew: its device's server went with the process that let
// it go.
func (s liveStarter) adoptGVisor(r *liveRecord, secrets []live.Secret) (live.Running, error) {
	g, err := gvisorRunner(s.x)
	if err != nil {
		return nil, err
	}
	lv, err := g.AdoptLive(*r.GVisor)
	if err != nil {
		return nil, err
	}
	l := gvisorLive{lv: lv, image: executor.HeldImage{Digest: r.ImageDigest, Release: s.x.HoldImage(r.ImageDigest)}, network: r.Network, budgets: r.Budgets, secrets: r.Secrets}
	if r.Network != nil {
		var n *sandbox.Network
		n, l.net, err = s.network(context.Background(), r.Network, r.Budgets, r.Secrets, secrets)
		if err == nil {
			err = lv.AttachNetwork(n)
		}
		if err != nil {
			lv.Kill()
			l.image.Release()
			return nil, fmt.Errorf("the sandbox's network: %w", err)
		}
	}
	return l.made(), nil
}

// gvisorLive is a live sandbox under gVisor, the image its root is, and
// what its network may reach (nil: it has none).
type gvisorLive struct {
	lv      *gvisor.Live
	image   executor.HeldImage
	network []string         // what it was made to reach (nil: no network)
	budgets map[string]int64 // and the bytes it may move by entry
	net     *liveNet         // what it may reach now, and the handle to change it
	secrets *executor.SecretSession
}

// made is l ready to be handed out: its image (held) let go once it has
// ended here (or been let go), once.
func (l gvisorLive) made() gvisorLive {
	l.image.Release = sync.OnceFunc(l.image.Release)
	return l
}

// SetSecrets gives its egress its secrets' values (live.SecretsSetter).
func (l gvisorLive) SetSecrets(secrets []live.Secret) { l.net.setSecrets(secrets) }

// SetNetwork changes what the sandbox may reach (live.NetworkSetter).
func (l gvisorLive) SetNetwork(allow []string, budgets map[string]int64) error {
	return l.net.set(allow, budgets)
}

// NetworkReport is what its network did (live.NetworkReporter).
func (l gvisorLive) NetworkReport() *wire.NetworkReport { return l.net.report() }

// Wait waits for the sandbox to end (or to be let go), and lets its image
// go.
func (l gvisorLive) Wait() error {
	err := l.lv.Wait()
	l.image.Release()
	return err
}
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
	allow, budgets := l.net.list(l.network, l.budgets)
	b, _ := json.Marshal(liveRecord{GVisor: &r, ImageDigest: l.image.Digest, Network: allow, Budgets: budgets, Secrets: l.secrets})
	return b
}

// Checkpoint writes its memory, processes and files into dir
// (live.Checkpointer).
// Its secrets' session goes with it (its processes hold its placeholders
// and trust its CA): what is made from it gets the same.
func (l gvisorLive) Checkpoint(ctx context.Context, dir string, max int64) (int64, error) {
	n, err := saved(l.lv.Checkpoint(ctx, dir, max))
	if err == nil && l.secrets != nil {
		b, _ := json.Marshal(l.secrets)
		err = os.WriteFile(filepath.Join(dir, secretsFile), b, 0o600)
	}
	return n, err
}

// Restore makes a sandbox under gVisor, started as o says, go on from what
// a Checkpoint wrote in dir (live.Restorer).
func (s liveStarter) Restore(ctx context.Context, o live.StartOptions, dir string) (live.Running, error) {
	g, err := gvisorRunner(s.x)
	if err != nil {
		return nil, err
	}
	var ss *executor.SecretSession
	if b, err := os.ReadFile(filepath.Join(dir, secretsFile)); err == nil {
		ss = new(executor.SecretSession)
		if err := json.Unmarshal(b, ss); err != nil {
			return nil, fmt.Errorf("the checkpoint's secrets: %w", err)
		}
	}
	spec, l, err := s.gvisorSpec(ctx, o, ss)
	if err != nil {
		return nil, err
	}
	if l.lv, err = g.RestoreLive(ctx, spec, dir); err != nil {
		l.image.Release()
		return nil, err
	}
	return l.made(), nil
}
