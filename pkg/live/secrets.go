package live

import "fmt"

// Secrets a live sandbox uses without seeing them: its create names them
// (CreateOptions.Secrets); the Manager takes their values from its
// SecretSource each time the sandbox is started, restored or taken over
// (StartOptions.Secrets, AdoptOptions.Secrets), so a value changed or a
// secret deleted meanwhile is seen then. The starter gives the sandbox a
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
