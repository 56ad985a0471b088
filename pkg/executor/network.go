package executor

import (
	"context"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/sandbox-run/sandbox-run/pkg/egress"
	"github.com/sandbox-run/sandbox-run/pkg/intercept/carry"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// NetworkConfig bounds what a run with network access may do
// (Request.Network); zero values take pkg/egress's defaults. Resolver and
// Dial are for tests (nil: the host's).
type NetworkConfig struct {
	MaxConns                int
	MaxBytesOut, MaxBytesIn int64
	// ExtraCAFile is a PEM file of certificates the egress trusts, beside
	// the system's, when it verifies the HTTPS servers a run with secrets
	// reaches (its TLS is the egress's to carry: pkg/intercept).
	ExtraCAFile string
	Resolver    func(ctx context.Context, host string) ([]netip.Addr, error)
	Dial        func(ctx context.Context, network, addr string) (net.Conn, error)
}

// resolvConf is the sandbox's /etc/resolv.conf when it has a network: the
// egress's DNS server, no search domains, a quick answer or none.
const resolvConf = "nameserver " + egress.GatewayAddr + "\noptions ndots:0 timeout:2 attempts:2\n"

// networkRun is a run's network access: the spec's device and the egress
// that serves it, whose report the result gets.
type networkRun struct {
	mu  sync.Mutex
	cfg egress.Config // what its egress starts with (SetAllow changes it)
	e   *egress.Egress
	// proxy carries the run's connections (a run with secrets): its
	// requests go in the report.
	proxy carry.Carrier
}

// network gives spec a network device served by an egress with allow
// (already checked against the server's maximum) and its byte budgets,
// its connections carried by proxy when not nil (a run with secrets), and
// the sandbox a
// resolv.conf naming its DNS server. report, once the run is over, is what
// the egress saw.
func (x *Executor) network(ctx context.Context, spec *sandbox.Spec, allow []string, budgets map[string]int64, proxy carry.Carrier) (report func() *wire.NetworkReport, err error) {
	n, nr, err := x.networkRun(ctx, allow, proxy)
	if err != nil {
		return nil, err
	}
	nr.cfg.Budgets = budgets // before the egress starts: the run has not
	report = nr.report
	conf, err := x.resolvConf()
	if err != nil {
		return nil, err
	}
	spec.Network = n
	spec.Mounts = append(spec.Mounts, sandbox.Mount{Source: conf, Target: "/etc/resolv.conf"})
	return report, nil
}

// Network is a network device for a sandbox (Spec.Network, or
// sandbox.Adopted.AttachNetwork) served by an egress that lets it reach
// what allow lists (already checked against the server's maximum), within
// the executor's bounds. report is what the egress saw so far (nil until
// it is attached). Its sandbox needs resolv.conf mounted for names: runs
// get it with their network; live sandboxes always have it.
func (x *Executor) Network(ctx context.Context, allow []string) (n *sandbox.Network, report func() *wire.NetworkReport, err error) {
	return x.networkVia(ctx, allow, nil)
}

// checkBudgets checks byte budgets by entry of allow: each for an entry
// as written, of a positive number of bytes.
func checkBudgets(allow []string, budgets map[string]int64) error {
	for entry, b := range budgets {
		if !slices.Contains(allow, entry) || b <= 0 {
			return invalid("network.budgets: %q: give a positive number of bytes for one of network.allow's entries, as written", entry)
		}
	}
	return nil
}

// NetworkHandle is a sandbox's network as its holder sees it: what its
// egress did, and its allow-list and secrets' values, which may change
// while it runs.
type NetworkHandle struct {
	nr *networkRun
	ss *SecretSession // nil: it uses no secrets
}

// SetSecrets replaces the values of the secrets the sandbox uses (those
// of its session's names; one left out is no longer put in place), for
// its requests from then on. A sandbox without secrets has nothing to
// change.
func (h *NetworkHandle) SetSecrets(secrets []Secret) {
	if h.ss == nil || h.nr.proxy == nil {
		return
	}
	h.nr.proxy.SetSecrets(h.ss.carried(secrets))
}

// Report is what the sandbox's egress did so far (nil before it started).
func (h *NetworkHandle) Report() *wire.NetworkReport { return h.nr.report() }

// SetAllow changes what the sandbox may reach (already checked against
// the server's maximum) and its byte budgets by entry of allow: at once
// for new connections, and its open ones that allow leaves out are reset.
// An entry that keeps a budget keeps what it has moved.
func (h *NetworkHandle) SetAllow(allow []string, budgets map[string]int64) error {
	policy, err := egress.ParsePolicy(allow)
	if err != nil {
		return invalid("network.allow: %v", err)
	}
	if err := checkBudgets(allow, budgets); err != nil {
		return err
	}
	nr := h.nr
	nr.mu.Lock()
	nr.cfg.Policy, nr.cfg.Budgets = policy, budgets // for an egress attached later
	e := nr.e
	nr.mu.Unlock()
	if e != nil {
		e.SetBudgets(budgets)
		e.SetPolicy(policy)
	}
	return nil
}

// LiveNetwork is Network for a live sandbox, with its handle; its
// connections carried for its secrets (their values) when it has a
// session ss.
func (x *Executor) LiveNetwork(ctx context.Context, allow []string, budgets map[string]int64, ss *SecretSession, secrets []Secret) (*sandbox.Network, *NetworkHandle, error) {
	var proxy carry.Carrier
	if ss != nil {
		var err error
		if proxy, err = x.SecretProxy(ss, secrets); err != nil {
			return nil, nil, err
		}
	}
	if err := checkBudgets(allow, budgets); err != nil {
		return nil, nil, err
	}
	n, nr, err := x.networkRun(ctx, allow, proxy)
	if err != nil {
		return nil, nil, err
	}
	nr.cfg.Budgets = budgets
	return n, &NetworkHandle{nr: nr, ss: ss}, nil
}

// networkVia is Network, its connections carried by proxy when not nil.
func (x *Executor) networkVia(ctx context.Context, allow []string, proxy carry.Carrier) (n *sandbox.Network, report func() *wire.NetworkReport, err error) {
	n, nr, err := x.networkRun(ctx, allow, proxy)
	if err != nil {
		return nil, nil, err
	}
	return n, nr.report, nil
}

// networkRun is networkVia's device and what serves it.
func (x *Executor) networkRun(ctx context.Context, allow []string, proxy carry.Carrier) (*sandbox.Network, *networkRun, error) {
	policy, err := egress.ParsePolicy(allow)
	if err != nil {
		return nil, nil, invalid("network.allow: %v", err)
	}
	cfg := egress.Config{Policy: policy, Resolver: x.net.Resolver, MaxConns: x.net.MaxConns,
		MaxBytesOut: x.net.MaxBytesOut, MaxBytesIn: x.net.MaxBytesIn, Dial: x.net.Dial, MTU: egress.DefaultMTU}
	if proxy != nil {
		cfg.Intercept = func(ctx context.Context, sandbox, host net.Conn, to egress.Target) {
			proxy.Serve(ctx, sandbox, host, carry.Dest{Names: to.Names, Port: to.Port})
		}
	}
	nr := &networkRun{proxy: proxy, cfg: cfg}
	n := &sandbox.Network{
		Address:  netip.PrefixFrom(netip.MustParseAddr(egress.SandboxAddr), egress.PrefixLen),
		Gateway:  netip.MustParseAddr(egress.GatewayAddr),
		Address6: netip.PrefixFrom(netip.MustParseAddr(egress.SandboxAddr6), egress.PrefixLen6),
		Gateway6: netip.MustParseAddr(egress.GatewayAddr6),
		MTU:      egress.DefaultMTU,
		Attach: func(tun *os.File) (func(), error) {
			nr.mu.Lock()
			cfg := nr.cfg
			nr.mu.Unlock()
			e, err := egress.Start(context.WithoutCancel(ctx), tun, cfg)
			// The egress serves a duplicate of it: the device goes when
			// the egress closes that (a live sandbox detached gets a new
			// one by the same name).
			tun.Close()
			if err != nil {
				return nil, err
			}
			nr.mu.Lock()
			nr.e = e
			nr.mu.Unlock()
			return func() { e.Close() }, nil
		},
	}
	return n, nr, nil
}

// report is what the run's egress saw; nil if it never started.
func (nr *networkRun) report() *wire.NetworkReport {
	nr.mu.Lock()
	e := nr.e
	nr.mu.Unlock()
	if e == nil {
		return nil
	}
	st := e.Stats()
	if nr.proxy != nil {
		st.Requests, st.RequestsDropped = nr.proxy.Requests()
	}
	return &st
}

// resolvConf writes the sandboxes' resolv.conf under the data dir once and
// returns its path.
func (x *Executor) resolvConf() (string, error) {
	x.resolvOnce.Do(func() {
		dir := filepath.Join(x.dataDir, "network")
		path := filepath.Join(dir, "resolv.conf")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			x.resolvErr = err
			return
		}
		if b, err := os.ReadFile(path); err == nil && string(b) == resolvConf {
			x.resolvPath = path
			return
		}
		tmp := path + ".new"
		if err := os.WriteFile(tmp, []byte(resolvConf), 0o644); err != nil {
			x.resolvErr = err
			return
		}
		if err := os.Rename(tmp, path); err != nil {
			x.resolvErr = err
			return
		}
		x.resolvPath = path
	})
	return x.resolvPath, x.resolvErr
}
