package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/gvisor"
	"github.com/sandbox-run/sandbox-run/pkg/live"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
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
	return executor.LiveSpec{Image: o.Image, Languages: o.Languages, Env: o.Env, Tenant: o.Owner,
		Limits: sandbox.Limits{Memory: o.MemoryBytes, WallTime: o.Lifetime, CPUTime: o.Lifetime, Processes: liveProcesses,
			WorkSize: o.DiskBytes, TmpSize: o.DiskBytes},
		SocketDir: o.SocketDir, Secret: o.Secret, FilesFrom: o.Files}
}

// StartsFromFiles: its sandboxes start from StartOptions.Files,
// copy-on-write, under either isolation (live.FilesStarter).
func (liveStarter) StartsFromFiles() {}

// PrewarmLive keeps n sandboxes ready for live sandboxes started with o.
func (s liveStarter) PrewarmLive(o live.StartOptions, n int) error {
	return s.x.PrewarmLive(liveSpec(o), n)
}

func (s liveStarter) StartLive(ctx context.Context, o live.StartOptions, req io.Reader, events io.Writer) (live.Running, error) {
	switch o.Isolation {
	case "", executor.IsolationNative:
	case executor.IsolationGVisor:
		if o.SocketDir == "" {
			return nil, fmt.Errorf("%w: isolation gvisor: a live sandbox under gVisor needs a server with a data dir", live.ErrInvalid)
		}
		return s.startGVisor(ctx, o)
	default:
		return nil, fmt.Errorf("%w: isolation %q: use %q or %q", live.ErrInvalid, o.Isolation, executor.IsolationNative, executor.IsolationGVisor)
	}
	spec := liveSpec(o)
	spec.Requests, spec.Events = req, events
	ss, err := withSecrets(o, &spec, nil)
	if err != nil {
		return nil, err
	}
	if o.Network != nil && o.SocketDir == "" {
		// (A sandbox on a socket gets it once adopted: adopt.)
		n, _, err := s.network(context.WithoutCancel(ctx), o.Network, o.NetworkBudgets, ss, o.Secrets)
		if err != nil {
			return nil, err
		}
		spec.Network = n
	}
	p, err := s.x.StartLive(ctx, spec)
	var image *executor.ImageError
	switch {
	case errors.As(err, &image):
		// An image the source does not have: the caller's to fix.
		return nil, fmt.Errorf("%w: %w", live.ErrInvalid, err)
	case errors.Is(err, sandbox.ErrNoCopyOnWrite):
		return nil, fmt.Errorf("%w: %w", live.ErrNoCopyOnWrite, err)
	}
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
		p.Release()
		return nil, err
	}
	return s.adopt(&liveRecord{Detached: *d, Network: o.Network, Budgets: o.NetworkBudgets, Image: o.Image, ImageDigest: p.ImageDigest, Secrets: ss}, o.Secrets, p.Release)
}

// liveRecord is what the next process needs to take a sandbox over: the
// engine's record, what its network may reach (nil: it has none), and the
// image its root is (its reference and digest; "": the host's).
type liveRecord struct {
	sandbox.Detached
	Network            []string         // null: it has none; []: it reaches nothing
	Budgets            map[string]int64 `json:",omitempty"` // by entry of Network
	Image, ImageDigest string           `json:",omitempty"`
	// Secrets is its secrets' session (placeholders, the CA with its key),
	// when it uses some.
	Secrets *executor.SecretSession `json:",omitempty"`
	// GVisor is a sandbox under gVisor's (the rest is then empty but its
	// network and its image's digest).
	GVisor *gvisor.LiveRecord `json:",omitempty"`
}

// Adopt takes over a sandbox by the record an earlier process kept.
func (s liveStarter) Adopt(rec json.RawMessage, o live.AdoptOptions) (live.Running, error) {
	var r liveRecord
	if err := json.Unmarshal(rec, &r); err != nil {
		return nil, err
	}
	if r.GVisor != nil {
		return s.adoptGVisor(&r, o.Secrets)
	}
	// Its image is held again while it runs, if the store still has it.
	return s.adopt(&r, o.Secrets, s.x.HoldImage(r.ImageDigest))
}

// adopt takes over the sandbox of r, and gives it its network anew: its
// device went with the process that detached it. release ends the hold on
// its image once it has ended here (or been let go).
func (s liveStarter) adopt(r *liveRecord, secrets []live.Secret, release func()) (_ live.Running, err error) {
	defer func() {
		if err != nil {
			release()
		}
	}()
	a, err := s.x.Engine().Adopt(&r.Detached)
	if err != nil {
		return nil, err
	}
	var ln *liveNet
	if r.Network != nil {
		var n *sandbox.Network
		n, ln, err = s.network(context.Background(), r.Network, r.Budgets, r.Secrets, secrets)
		if err == nil {
			err = a.AttachNetwork(n)
		}
		if err != nil {
			a.Kill()
			a.Wait()
			return nil, fmt.Errorf("the sandbox's network: %w", err)
		}
	}
	return adopted{a, r, release, ln}, nil
}

// saved is what the engine's SaveFiles returned, its bound in live's
// terms (live.Filer).
func saved(n int64, err error) (int64, error) {
	if errors.Is(err, sandbox.ErrTooLarge) {
		err = fmt.Errorf("%w: %w", live.ErrTooLarge, err)
	}
	return n, err
}

func stats(s sandbox.Stats, err error) (live.Stats, error) {
	return live.Stats{CPU: time.Duration(s.CPU), Memory: s.Memory, MemoryPeak: s.MemoryPeak, Disk: s.Disk, DiskTotal: s.DiskTotal}, err
}

// liveProcess is a sandbox that ends with this process.
type liveProcess struct{ p *executor.LiveProcess }

// Wait waits for the sandbox to end, and lets its image go.
func (l liveProcess) Wait() error {
	_, err := l.p.Wait()
	l.p.Release()
	return err
}

func (l liveProcess) Kill()                           { l.p.Kill() }
func (l liveProcess) Pause(ctx context.Context) error { return l.p.Freeze(ctx) }
func (l liveProcess) Resume() error                   { return l.p.Thaw() }
func (l liveProcess) LoadFiles(dir string) error      { return l.p.LoadFiles(dir) }
func (l liveProcess) SaveFiles(ctx context.Context, dir string, max int64) (int64, error) {
	return saved(l.p.SaveFiles(ctx, dir, max))
}
func (l liveProcess) Stats() (live.Stats, error) { return stats(l.p.Stats()) }
func (l liveProcess) DialTCP(ctx context.Context, port int) (net.Conn, error) {
	return l.p.DialTCP(ctx, port)
}

// adopted is a sandbox that can outlive this process, its record, and the
// end of its image's hold.
type adopted struct {
	a       *sandbox.Adopted
	r       *liveRecord
	release func()
	net     *liveNet // nil: it has no network
}

// Wait waits for the sandbox to end (or to be let go: Detach), and lets
// its image go.
func (l adopted) Wait() error {
	err := l.a.Wait()
	l.release()
	return err
}

func (l adopted) Detach() error                   { _, err := l.a.Detach(); return err }
func (l adopted) Kill()                           { l.a.Kill() }
func (l adopted) Pause(ctx context.Context) error { return l.a.Freeze(ctx) }
func (l adopted) Resume() error                   { return l.a.Thaw() }
func (l adopted) LoadFiles(dir string) error      { return l.a.LoadFiles(dir) }
func (l adopted) SaveFiles(ctx context.Context, dir string, max int64) (int64, error) {
	return saved(l.a.SaveFiles(ctx, dir, max))
}
func (l adopted) Stats() (live.Stats, error) { return stats(l.a.Stats()) }
func (l adopted) DialTCP(ctx context.Context, port int) (net.Conn, error) {
	return l.a.DialTCP(ctx, port)
}

// Record is what the next process needs to take the sandbox over.
func (l adopted) Record() json.RawMessage {
	r := *l.r
	r.Network, r.Budgets = l.net.list(r.Network, r.Budgets)
	b, _ := json.Marshal(r)
	return b
}

// SetSecrets gives its egress its secrets' values (live.SecretsSetter).
func (l adopted) SetSecrets(secrets []live.Secret) { l.net.setSecrets(secrets) }

// SetNetwork changes what the sandbox may reach (live.NetworkSetter).
func (l adopted) SetNetwork(allow []string, budgets map[string]int64) error {
	return l.net.set(allow, budgets)
}

// NetworkReport is what its network did (live.NetworkReporter).
func (l adopted) NetworkReport() *wire.NetworkReport { return l.net.report() }

// LiveIsolations are the isolations beside the native one that b's live
// sandboxes can have: gvisor where runsc is installed.
func (b Backend) LiveIsolations() []string {
	if x, ok := b.x.(*executor.Executor); ok && x.GVisor() != nil {
		return []string{executor.IsolationGVisor}
	}
	return nil
}

// LiveStarter starts live sandboxes on b's executor when it is this host's
// engine (nil otherwise: a fake executor in tests).
func (b Backend) LiveStarter() live.Starter {
	if x, ok := b.x.(*executor.Executor); ok {
		return liveStarter{x}
	}
	return nil
}
