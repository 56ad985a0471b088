package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

// ErrNoFreezer is a host whose cgroups cannot freeze a sandbox: cgroup v1
// without the freezer hierarchy mounted.
var ErrNoFreezer = errors.New("sandbox: pausing needs the cgroup freezer (cgroup v2, or v1's freezer hierarchy mounted)")

// freezer freezes and thaws every process of a sandbox, its PID 1 too: on
// v2 through the sandbox's cgroup.freeze, on v1 through its cgroup in the
// freezer hierarchy. A frozen process stays where it was (its memory,
// its files, its sockets) and is given no CPU until it is thawed; it
// cannot tell, but by the clock.
type freezer struct {
	v2  bool
	dir string // "": none here (ErrNoFreezer)
	// frozen says the sandbox was frozen and not thawed since: a kill
	// thaws it too (v1 leaves a frozen process frozen, SIGKILL or not).
	frozen *atomic.Bool
}

// set freezes (or thaws) the sandbox and waits until each of its
// processes is, or ctx ends (then it thaws it again and fails).
func (f freezer) set(ctx context.Context, frozen bool) error {
	if f.dir == "" {
		return ErrNoFreezer
	}
	file, value, done := "freezer.state", "THAWED", "THAWED"
	if f.v2 {
		file, value, done = "cgroup.freeze", "0", "frozen 0"
	}
	if frozen {
		value, done = "FROZEN", "FROZEN"
		if f.v2 {
			value, done = "1", "frozen 1"
		}
		f.frozen.Store(true)
	}
	// A cgroup that is gone is a sandbox that ended (its engine removed
	// it): nothing is left frozen, and nothing can be frozen.
	gone := func(file string, err error) error {
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("sandbox: %s: %w", file, err)
		}
		if frozen {
			return ErrRunEnded
		}
		f.frozen.Store(false)
		return nil
	}
	if err := os.WriteFile(filepath.Join(f.dir, file), []byte(value), 0); err != nil {
		return gone(file, err)
	}
	// The kernel freezes each task as it next leaves the kernel (v1 says
	// FREEZING meanwhile; v2's cgroup.events says frozen once all are):
	// at once for what sleeps, within a tick for what runs.
	state := "freezer.state"
	if f.v2 {
		state = "cgroup.events"
	}
	wait := 100 * time.Microsecond
	for {
		b, err := os.ReadFile(filepath.Join(f.dir, state))
		if err != nil {
			return gone(state, err)
		}
		if f.v2 && strings.Contains(string(b), done+"\n") || !f.v2 && strings.TrimSpace(string(b)) == done {
			break
		}
		select {
		case <-ctx.Done():
			if frozen {
				f.set(context.WithoutCancel(ctx), false)
			}
			return fmt.Errorf("sandbox: freezing: %w", ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 10*time.Millisecond)
	}
	if !frozen {
		f.frozen.Store(false)
	}
	return nil
}

// thawKilled thaws a sandbox that was frozen, once its processes were
// sent SIGKILL: on v1 they die only when thawed. With always, it thaws
// one whose freezer it cannot know (adopted: an earlier process may have
// frozen it).
func (f freezer) thawKilled(always ...bool) {
	if f.dir != "" && (f.frozen.Load() || len(always) > 0) {
		f.set(context.Background(), false)
	}
}

// freezer is the sandbox's freezer.
func (p *Process) freezer() freezer {
	f := freezer{v2: p.cg.v2, frozen: &p.frozen}
	if p.cg.v2 {
		f.dir = filepath.Join(p.c.cg.c.parent, p.c.cg.name)
	} else if p.c.cg.v1 != nil {
		f.dir = p.c.cg.v1.dirs["freezer"]
	}
	return f
}

// Freeze pauses the run of a Detachable spec: every process of its
// sandbox is frozen where it is, memory kept, given no CPU, until Thaw.
// Its wall time goes on. Kill ends a frozen run as any other; Detach
// thaws it first (its next holder freezes it again).
func (p *Process) Freeze(ctx context.Context) error {
	if !p.spec.Detachable {
		return errors.New("sandbox: only a run of a Detachable spec can be frozen")
	}
	if err := p.detachable(); err != nil {
		return err
	}
	return p.freezer().set(ctx, true)
}

// Thaw lets a frozen run go on.
func (p *Process) Thaw() error {
	if err := p.detachable(); err != nil {
		return err
	}
	return p.freezer().set(context.Background(), false)
}

// freezer is the adopted sandbox's freezer.
func (a *Adopted) freezer() freezer {
	f := freezer{v2: a.d.CgroupV2, frozen: &a.frozen}
	if a.d.CgroupV2 {
		f.dir = a.d.Sandbox["unified"]
	} else {
		f.dir = a.d.Sandbox["freezer"]
	}
	return f
}

// Freeze pauses the adopted run, as Process.Freeze does.
func (a *Adopted) Freeze(ctx context.Context) error {
	if err := a.usable(); err != nil {
		return err
	}
	return a.freezer().set(ctx, true)
}

// Thaw lets a frozen adopted run go on.
func (a *Adopted) Thaw() error {
	if err := a.usable(); err != nil {
		return err
	}
	return a.freezer().set(context.Background(), false)
}
