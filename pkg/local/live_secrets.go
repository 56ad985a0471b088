package local

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/live"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// Live sandboxes with secrets (live.StartOptions.Secrets): a session of
// their own (executor.SecretSession: placeholders, and the CA their
// egress carries TLS with), its CA's files in their socket directory
// (which lives as long as they do) mounted at /etc/ssl/certs, kept in
// their record so that the next process serves them alike; forks with
// memory get their parent's (their processes hold its placeholders and
// trust its CA: the checkpoint carries it).

// secretsFile is where a checkpoint keeps its sandbox's session.
const secretsFile = "secrets.json"

// withSecrets readies spec, a live sandbox's started as o says, for o's
// secrets: ss is its session (nil: a new one), returned.
func withSecrets(o live.StartOptions, spec *executor.LiveSpec, ss *executor.SecretSession) (*executor.SecretSession, error) {
	if len(o.Secrets) == 0 && ss == nil {
		return nil, nil
	}
	switch {
	case o.Network == nil:
		return nil, fmt.Errorf("%w: a sandbox uses its secrets through its network: give it one with their hosts", live.ErrInvalid)
	case o.SocketDir == "":
		return nil, fmt.Errorf("%w: a sandbox with secrets needs a server with a data dir", live.ErrInvalid)
	}
	if ss == nil {
		names := make([]string, len(o.Secrets))
		for i, s := range o.Secrets {
			names[i] = s.Name
		}
		var err error
		if ss, err = executor.NewSecretSession(names, o.Lifetime); err != nil {
			return nil, err
		}
	}
	mounts, err := ss.CAMounts(o.SocketDir)
	if err != nil {
		return nil, err
	}
	spec.Mounts = append(spec.Mounts, mounts...)
	spec.Env = maps.Clone(spec.Env)
	if spec.Env == nil {
		spec.Env = map[string]string{}
	}
	for _, kv := range ss.Env() {
		k, v, _ := strings.Cut(kv, "=")
		spec.Env[k] = v
	}
	return ss, nil
}

// network is the network device of a live sandbox that may reach allow,
// within budgets by entry of it, its connections carried for its secrets
// (their values) when it has a session, and the handle that changes what
// it may reach.
func (s liveStarter) network(ctx context.Context, allow []string, budgets map[string]int64, ss *executor.SecretSession, secrets []live.Secret) (*sandbox.Network, *liveNet, error) {
	n, h, err := s.x.LiveNetwork(ctx, allow, budgets, ss, executorSecrets(secrets))
	if err != nil {
		return nil, nil, err
	}
	return n, &liveNet{allow: allow, budgets: budgets, h: h}, nil
}

// executorSecrets are live's secrets in the executor's terms.
func executorSecrets(secrets []live.Secret) []executor.Secret {
	xs := make([]executor.Secret, len(secrets))
	for i, sec := range secrets {
		xs[i] = executor.Secret{Name: sec.Name, Value: sec.Value, Hosts: sec.Hosts, HeaderName: sec.HeaderName, HeaderFormat: sec.HeaderFormat}
	}
	return xs
}

// liveNet is a live sandbox's network as it is now: what it may reach and
// its budgets (its record keeps them), and the handle that changes them.
type liveNet struct {
	mu      sync.Mutex
	allow   []string
	budgets map[string]int64
	h       *executor.NetworkHandle
}

// set changes what the sandbox may reach (live.NetworkSetter); a nil
// liveNet is a sandbox without a network.
func (n *liveNet) set(allow []string, budgets map[string]int64) error {
	if n == nil {
		return fmt.Errorf("%w: the sandbox was made without a network: it cannot be given one", live.ErrInvalid)
	}
	if err := n.h.SetAllow(allow, budgets); err != nil {
		return fmt.Errorf("%w: %w", live.ErrInvalid, err)
	}
	n.mu.Lock()
	n.allow = append([]string{}, allow...) // empty: it reaches nothing
	n.budgets = maps.Clone(budgets)
	n.mu.Unlock()
	return nil
}

// setSecrets gives the sandbox's egress its secrets' values as they are
// now (live.SecretsSetter); a nil liveNet is a sandbox without a network.
func (n *liveNet) setSecrets(secrets []live.Secret) {
	if n == nil {
		return
	}
	n.h.SetSecrets(executorSecrets(secrets))
}

// report is what the sandbox's egress did (nil: it has no network).
func (n *liveNet) report() *wire.NetworkReport {
	if n == nil {
		return nil
	}
	return n.h.Report()
}

// list is what the sandbox may reach now and its budgets (nil: it has no
// network; with none, what it was made with).
func (n *liveNet) list(made []string, budgets map[string]int64) ([]string, map[string]int64) {
	if n == nil {
		return made, budgets
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.allow), maps.Clone(n.budgets)
}
