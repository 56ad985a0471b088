package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/live"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// Live sandboxes (pkg/live) beside the runs: the service keeps them when
// its backend can start them on this host, and lets callers in through the
// same door as runs (origin, drain, the key's rate) with the same maxima.
// Every transport that offers live sandboxes (the native API, the E2B door)
// calls these, and gets *Error for every refusal.

// LiveStarter is a backend that starts live sandboxes on this host.
type LiveStarter interface {
	// LiveStarter is nil when it cannot (a fake executor).
	LiveStarter() live.Starter
}

// Live is the service's live sandboxes, or nil when it has none (its
// backend cannot start them, or its runs go to a cluster).
func (s *Service) Live() *live.Manager { return s.live }

// liveConfig is the Manager's configuration from the application's.
func (s *Service) liveConfig() live.Config {
	l := s.cfg.App.Live
	return live.Config{MaxPerOwner: l.MaxPerKey, MaxTotal: l.MaxTotal, MaxMemoryBytes: l.MaxMemoryMB << 20,
		DefaultMemoryBytes: l.MemoryMB << 20, DiskBytes: l.DiskMB << 20, DefaultTimeout: seconds(l.DefaultTimeoutSeconds), MaxTimeout: seconds(l.MaxTimeoutSeconds),
		StateDir: s.cfg.LiveDir, Prewarm: livePrewarm(s.cfg.App.Prewarm, l.Ready), Log: s.log, MaxSnapshotBytes: l.MaxSnapshotMB << 20,
		Registry: s.cfg.LiveRegistry, EvictAfter: seconds(l.EvictAfterSeconds), Snapshots: s.cfg.LiveSnapshots,
		Secrets: s.liveSecrets}
}

// livePrewarm is how many sandboxes are kept ready for live sandboxes:
// live.ready, else two when the server prepares sandboxes ahead at all.
func livePrewarm(prewarm, ready int) int {
	switch {
	case ready != 0:
		return max(ready, 0)
	case prewarm > 0:
		return 2
	}
	return 0
}

// CreateLive creates a live sandbox for c, once the door lets c in (a
// create takes one of the key's rate tokens, as a run does).
func (s *Service) CreateLive(ctx context.Context, c Caller, o live.CreateOptions) (*live.Sandbox, error) {
	if s.live == nil {
		return nil, &Error{Kind: Invalid, Msg: "this server runs no live sandboxes (its runs go to a cluster, or it has no sandbox engine)"}
	}
	leave, err := s.Admit(c, 1, false)
	if err != nil {
		return nil, err
	}
	leave()
	for _, name := range o.Languages {
		if _, ok := s.x.Lookup(name); !ok {
			return nil, &Error{Kind: Invalid, Msg: fmt.Sprintf("unknown language %q for a live sandbox", name)}
		}
	}
	if o.Network != nil {
		if err := checkAllow(o.Network, &s.cfg.App); err != nil {
			return nil, err
		}
	}
	if err := checkBudgets(&wire.NetworkRequest{Allow: o.Network, Budgets: o.NetworkBudgets}); err != nil {
		return nil, err
	}
	if o.Image != "" {
		if err := checkImage(o.Image, &s.cfg.App); err != nil {
			return nil, err
		}
	}
	if err := s.checkLiveSecrets(o, c.Tenant()); err != nil {
		return nil, err
	}
	if mx := s.cfg.App.Maximums.MemoryMB; mx > 0 && o.MemoryBytes > mx<<20 {
		return nil, &Error{Kind: Invalid, Msg: fmt.Sprintf("memory of %d MiB is over the server's maximum of %d MiB", o.MemoryBytes>>20, mx)}
	}
	if o.Isolation, err = s.liveIsolation(c, o); err != nil {
		return nil, err
	}
	if o.IdlePause == 0 {
		idle := s.cfg.App.Live.IdlePauseSeconds
		if c.Key != nil && c.Key.LiveIdlePauseSeconds > 0 {
			idle = c.Key.LiveIdlePauseSeconds
		}
		o.IdlePause = time.Duration(idle * float64(time.Second))
	}
	sb, err := s.live.Create(ctx, c.Tenant(), o)
	if err != nil {
		return nil, liveError(err)
	}
	s.log.Info("live sandbox created", "id", sb.ID, "key", c.Tenant(), "template", sb.Template)
	return sb, nil
}

// NetworkMaximum is what the server lets a run or a live sandbox reach
// at most (its network.allow; empty: no network at all): what E2B's
// allow_internet_access asks for.
func (s *Service) NetworkMaximum() []string { return slices.Clone(s.cfg.App.Network.Allow) }

// LiveSandbox is c's live sandbox id (NotFound when it is another key's).
func (s *Service) LiveSandbox(c Caller, id string) (*live.Sandbox, error) {
	if s.live == nil {
		return nil, liveError(live.ErrNotFound)
	}
	sb, err := s.live.Get(c.Tenant(), id)
	return sb, liveError(err)
}

// KillLive ends c's live sandbox id.
func (s *Service) KillLive(c Caller, id string) error {
	if s.live == nil {
		return liveError(live.ErrNotFound)
	}
	return liveError(s.live.Kill(c.Tenant(), id))
}

// SetLiveTimeout makes c's live sandbox id end d from now.
func (s *Service) SetLiveTimeout(c Caller, id string, d time.Duration) error {
	if s.live == nil {
		return liveError(live.ErrNotFound)
	}
	return liveError(s.live.SetTimeout(c.Tenant(), id, d))
}

// PauseLive pauses c's sandbox id: its processes frozen, its timeout
// stopped until it is resumed (live.Manager.Pause).
func (s *Service) PauseLive(ctx context.Context, c Caller, id string) error {
	if s.live == nil {
		return liveError(live.ErrNotFound)
	}
	return liveError(s.live.Pause(ctx, c.Tenant(), id))
}

// SetLiveNetwork changes what c's sandbox id may reach to n.Allow (within
// the server's network.allow; empty: nothing) and its byte budgets to
// n.Budgets: at once, open connections it leaves out reset
// (live.Manager.SetNetwork).
func (s *Service) SetLiveNetwork(c Caller, id string, n wire.NetworkRequest) error {
	if s.live == nil {
		return liveError(live.ErrNotFound)
	}
	if len(n.Allow) > 0 { // none: it reaches nothing, its device kept
		if err := checkAllow(n.Allow, &s.cfg.App); err != nil {
			return err
		}
	}
	if err := checkBudgets(&n); err != nil {
		return err
	}
	return liveError(s.live.SetNetwork(c.Tenant(), id, n.Allow, n.Budgets))
}

// LiveNetworkReport is what c's sandbox id's network did (nil: it has
// none, or none is served now).
func (s *Service) LiveNetworkReport(c Caller, id string) (*wire.NetworkReport, error) {
	if s.live == nil {
		return nil, liveError(live.ErrNotFound)
	}
	r, err := s.live.NetworkReport(c.Tenant(), id)
	return r, liveError(err)
}

// EvictLive writes c's sandbox id to disk and gives its memory back
// (live.Manager.Evict), pausing it first when it runs.
func (s *Service) EvictLive(ctx context.Context, c Caller, id string) error {
	if s.live == nil {
		return liveError(live.ErrNotFound)
	}
	if err := s.live.Pause(ctx, c.Tenant(), id); err != nil && !errors.Is(err, live.ErrPaused) {
		return liveError(err)
	}
	return liveError(s.live.Evict(ctx, c.Tenant(), id))
}

// ResumeLive resumes c's sandbox id if it is paused, and says whether it
// was; its timeout is d from now (0: what was left of it when paused).
func (s *Service) ResumeLive(c Caller, id string, d time.Duration) (bool, error) {
	if s.live == nil {
		return false, liveError(live.ErrNotFound)
	}
	resumed, err := s.live.Resume(c.Tenant(), id, d)
	return resumed, liveError(err)
}

// SnapshotLive takes a snapshot of c's sandbox id (its files), named name
// ("" for none but its id).
func (s *Service) SnapshotLive(ctx context.Context, c Caller, id, name string) (*live.Snapshot, error) {
	if s.live == nil {
		return nil, liveError(live.ErrNotFound)
	}
	sn, err := s.live.SnapshotSandbox(ctx, c.Tenant(), id, name)
	return sn, liveError(err)
}

// LiveSnapshots are c's snapshots (of sandbox id only, when not "").
func (s *Service) LiveSnapshots(c Caller, id string) []*live.Snapshot {
	if s.live == nil {
		return live.StoreSnapshots(s.cfg.LiveSnapshots, c.Tenant(), id, nil)
	}
	return s.live.Snapshots(c.Tenant(), id)
}

// DeleteLiveSnapshot deletes c's snapshot id.
func (s *Service) DeleteLiveSnapshot(c Caller, id string) error {
	if s.live == nil {
		if st := s.cfg.LiveSnapshots; st != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			return liveError(st.Delete(ctx, c.Tenant(), id))
		}
		return liveError(live.ErrNoSuchSnapshot)
	}
	return liveError(s.live.DeleteSnapshot(c.Tenant(), id))
}

// liveIsolation is the isolation of a live sandbox created with o by c:
// o's own, else the key's isolation_min, else gVisor for the code
// interpreter's templates (their forks carry memory) and on a server
// whose isolation.default is gvisor, where the host has it; else native
// ("").
// Below the key's minimum it is Forbidden; gVisor on a host without it is
// Invalid.
func (s *Service) liveIsolation(c Caller, o live.CreateOptions) (string, error) {
	min := ""
	if c.Key != nil {
		min = c.Key.IsolationMin
	}
	can := false
	if li, ok := s.x.(LiveIsolations); ok {
		can = slices.Contains(li.LiveIsolations(), config.IsolationGVisor)
	}
	iso := cmp.Or(o.Isolation, min)
	if iso == "" && can &&
		(slices.Contains(interpreterTemplates, o.Template) || s.cfg.App.Isolation.Default == config.IsolationGVisor) {
		iso = config.IsolationGVisor
	}
	iso = cmp.Or(iso, config.IsolationNative)
	switch rank := config.IsolationRank(iso); {
	case rank < 0:
		return "", invalid("isolation %q: use %q or %q", iso, config.IsolationNative, config.IsolationGVisor)
	case rank < config.IsolationRank(min):
		return "", &Error{Kind: Forbidden, Msg: fmt.Sprintf("isolation %q is below this key's isolation_min %q: ask for %q (or name none)", iso, min, min)}
	case iso == config.IsolationGVisor && !can:
		return "", invalid("isolation gvisor: this server cannot run gVisor (runsc is not installed: scripts/install-gvisor.sh builds it)")
	case iso == config.IsolationNative:
		return "", nil
	}
	return iso, nil
}

// ForkLive makes n sandboxes with the files of c's sandbox id (live.Manager.Fork):
// the children in order, each nil with its error in errs when it could not
// be made.
func (s *Service) ForkLive(ctx context.Context, c Caller, id string, n int, timeout time.Duration) ([]*live.Sandbox, []error, error) {
	if s.live == nil {
		return nil, nil, liveError(live.ErrNotFound)
	}
	leave, err := s.Admit(c, 1, false)
	if err != nil {
		return nil, nil, err
	}
	leave()
	kids, errs, err := s.live.Fork(ctx, c.Tenant(), id, n, timeout)
	for i := range errs {
		errs[i] = liveError(errs[i])
	}
	return kids, errs, liveError(err)
}

// liveError is err from pkg/live as an *Error.
func liveError(err error) error {
	var lim *live.LimitError
	var le *live.Error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, live.ErrNotFound):
		return &Error{Kind: NotFound, Msg: "no such sandbox (it ended, or it is not yours)", Err: err}
	case errors.Is(err, live.ErrGone):
		return &Error{Kind: NotFound, Msg: "the sandbox has ended", Err: err}
	case errors.Is(err, live.ErrClosed):
		return &Error{Kind: Draining, Msg: "the server is shutting down", Err: err, RetryAfter: 5 * time.Second}
	case errors.As(err, &lim) && lim.Full:
		return &Error{Kind: Full, Msg: lim.Msg, Err: err}
	case errors.As(err, &lim):
		return &Error{Kind: RateLimited, Msg: lim.Msg, Err: err, RetryAfter: 5 * time.Second}
	case errors.As(err, &le):
		return err
	case errors.Is(err, live.ErrInvalid):
		return &Error{Kind: Invalid, Msg: err.Error(), Err: err}
	case errors.Is(err, live.ErrPaused):
		return &Error{Kind: Exists, Msg: "the sandbox is paused already", Err: err}
	case errors.Is(err, live.ErrNoSuchSnapshot):
		return &Error{Kind: NotFound, Msg: "no such snapshot (it was deleted, or it is not yours)", Err: err}
	case errors.Is(err, live.ErrNoSnapshots):
		return &Error{Kind: Unavailable, Msg: err.Error(), Err: err}
	case errors.Is(err, live.ErrNoEvict):
		return &Error{Kind: Unavailable, Msg: "this sandbox cannot be evicted to disk here: the server keeps no state directory, or its files cannot be copied", Err: err}
	case errors.Is(err, live.ErrNotPaused):
		return &Error{Kind: Invalid, Msg: err.Error(), Err: err}
	case errors.Is(err, live.ErrNoPause):
		return &Error{Kind: Unavailable, Msg: "this sandbox cannot be paused here: " + err.Error(), Err: err}
	}
	return &Error{Kind: Internal, Msg: "live sandbox: " + err.Error(), Err: err}
}
