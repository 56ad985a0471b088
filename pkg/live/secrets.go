package live

import (
	"fmt"
	"maps"

	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// Secrets a live sandbox uses without seeing them: its create names them
// (CreateOptions.Secrets); the Manager takes their values from its
// SecretSource each time the sandbox is started, restored or taken over
// (StartOptions.Secrets, AdoptOptions.Secrets), and whenever its owner's
// secrets change (RefreshSecrets) while it runs. The starter gives the sandbox a
// placeholder for each (kept for its life, its forks' too) and its
// network's egress the values (pkg/executor's SecretSession).

// Secret is a secret with its value: what the egress puts in place of its
// placeholder in requests to Hosts (and the header it is also sent in).
type Secret struct {
	Name, Value              string
	Hosts                    []string
	HeaderName, HeaderFormat string
}

// SecretSource gives the values of owner's secrets names (an error naming
// one it has not).
type SecretSource func(owner string, names []string) ([]Secret, error)

// AdoptOptions are what a sandbox taken over gets besides its record: the
// values of the secrets it uses.
type AdoptOptions struct {
	Secrets []Secret
}

// secretsOf are the values of the secrets names of owner's, from the
// Manager's source.
func (m *Manager) secretsOf(owner string, names []string) ([]Secret, error) {
	if len(names) == 0 {
		return nil, nil
	}
	if m.cfg.Secrets == nil {
		return nil, fmt.Errorf("%w: this server keeps no secrets", ErrInvalid)
	}
	return m.cfg.Secrets(owner, names)
}

// SecretsSetter is a Running whose secrets' values can change while it
// runs: its requests from then on see secrets (one of its names left out
// is no longer put in place).
type SecretsSetter interface {
	SetSecrets(secrets []Secret)
}

// RefreshSecrets gives owner's sandboxes that use secrets their values as
// the source has them now: after one was changed or deleted, their
// requests from then on see it so (a deleted secret's placeholder goes as
// it is). A sandbox evicted to disk gets them when it comes back.
func (m *Manager) RefreshSecrets(owner string) {
	m.RefreshSecretsOf(func(o string) bool { return o == owner })
}

// RefreshSecretsOf is RefreshSecrets for the owners that match says (a
// cluster's store names its owners by their hashes).
func (m *Manager) RefreshSecretsOf(match func(owner string) bool) {
	if m.cfg.Secrets == nil {
		return
	}
	m.mu.Lock()
	var boxes []*Sandbox
	for _, s := range m.boxes {
		if len(s.Secrets) > 0 && match(s.Owner) {
			boxes = append(boxes, s)
		}
	}
	m.mu.Unlock()
	for _, s := range boxes {
		ss, ok := s.box().(SecretsSetter)
		if !ok || s.Evicted() {
			continue
		}
		var now []Secret
		for _, name := range s.Secrets {
			if got, err := m.cfg.Secrets(s.Owner, []string{name}); err == nil {
				now = append(now, got...)
			}
		}
		ss.SetSecrets(now)
	}
}

// NetworkSetter is a Running whose network's allow-list can change while
// it runs (E2B's network update): new connections are decided by the new
// list at once, and open ones it leaves out are reset.
type NetworkSetter interface {
	SetNetwork(allow []string, budgets map[string]int64) error
}

// SetNetwork changes what owner's sandbox id may reach to allow (checked
// against the server's maximum by the caller), and the bytes it may move
// by entry of allow to budgets (an entry that had one keeps what it has
// moved): its network's egress at once, its record for a later take-over. A sandbox made without a
// network cannot be given one (Invalid); one evicted to disk gets it when
// it comes back.
func (m *Manager) SetNetwork(owner, id string, allow []string, budgets map[string]int64) error {
	s, err := m.Get(owner, id)
	if err != nil {
		return err
	}
	s.pauseMu.Lock() // no eviction or coming back meanwhile
	defer s.pauseMu.Unlock()
	s.mu.Lock()
	none := s.Network == nil
	s.mu.Unlock()
	if none {
		return fmt.Errorf("%w: the sandbox was made without a network: it cannot be given one", ErrInvalid)
	}
	if !s.Evicted() {
		ns, ok := s.box().(NetworkSetter)
		if !ok {
			return fmt.Errorf("%w: this server cannot change a sandbox's network while it runs", ErrInvalid)
		}
		if err := ns.SetNetwork(allow, budgets); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.Network = append([]string{}, allow...) // empty: it reaches nothing, and has a network
	s.NetworkBudgets = maps.Clone(budgets)
	s.mu.Unlock()
	return m.save(s)
}

// KeptBudgets are s's network budgets for the entries of allow it has
// budgets for: what a change of its network that names none keeps.
func (s *Sandbox) KeptBudgets(allow []string) map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var kept map[string]int64
	for _, entry := range allow {
		if b, ok := s.NetworkBudgets[entry]; ok {
			if kept == nil {
				kept = map[string]int64{}
			}
			kept[entry] = b
		}
	}
	return kept
}

// NetworkReporter is a Running whose network's egress says what it did:
// destinations, bytes, and with secrets the HTTP and HTTPS requests (since
// this process took the sandbox over).
type NetworkReporter interface {
	NetworkReport() *wire.NetworkReport
}

// NetworkReport is what owner's sandbox id's network did (nil: it has no
// network, or none served now: evicted to disk).
func (m *Manager) NetworkReport(owner, id string) (*wire.NetworkReport, error) {
	s, err := m.Get(owner, id)
	if err != nil {
		return nil, err
	}
	if nr, ok := s.box().(NetworkReporter); ok {
		return nr.NetworkReport(), nil
	}
	return nil, nil
}
