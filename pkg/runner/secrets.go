package runner

import (
	"errors"
	"fmt"
	"slices"

	"github.com/sandbox-run/sandbox-run/pkg/live"
	"github.com/sandbox-run/sandbox-run/pkg/secrets"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// Secrets behind the door: each key's own (pkg/secrets), kept, listed
// (never their values) and deleted by it alone; a run names some
// (ExecuteRequest.Secrets), checked when it is admitted (Prepare), and gets
// their values only as it starts (Run.Secrets, from the store then): no
// value is ever part of a request, a job or a log.

// errNoSecrets is a service without a secret store.
var errNoSecrets = &Error{Kind: Unavailable, Msg: "this server keeps no secrets (it runs without a data dir)"}

// store is the secret store, or why there is none.
func (s *Service) store() (*secrets.Store, error) {
	switch {
	case s.cfg.SecretsErr != nil:
		return nil, &Error{Kind: Unavailable, Msg: "the secret store cannot open: " + s.cfg.SecretsErr.Error(), Err: s.cfg.SecretsErr}
	case s.cfg.Secrets == nil:
		return nil, errNoSecrets
	}
	return s.cfg.Secrets, nil
}

// PutSecret stores c's secret name as p says, replacing one by that name.
func (s *Service) PutSecret(c Caller, name string, p wire.SecretPut) (wire.Secret, error) {
	st, err := s.store()
	if err != nil {
		return wire.Secret{}, err
	}
	sec := secrets.Secret{Name: name, Value: p.Value, Hosts: p.Hosts}
	if h := p.Header; h != nil {
		sec.Header = &secrets.Header{Name: h.Name, Format: h.Format}
	}
	got, err := st.Put(c.Tenant(), sec)
	if err != nil {
		return wire.Secret{}, secretError(err)
	}
	s.refreshLive(c.Tenant())
	return listed(got), nil
}

// ListSecrets lists c's secrets, without their values.
func (s *Service) ListSecrets(c Caller) (wire.SecretList, error) {
	st, err := s.store()
	if err != nil {
		return wire.SecretList{}, err
	}
	all, err := st.List(c.Tenant())
	if err != nil {
		return wire.SecretList{}, secretError(err)
	}
	out := wire.SecretList{Secrets: make([]wire.Secret, 0, len(all))}
	for _, sec := range all {
		out.Secrets = append(out.Secrets, listed(sec))
	}
	return out, nil
}

// DeleteSecret deletes c's secret name (NotFound when it has none).
func (s *Service) DeleteSecret(c Caller, name string) error {
	st, err := s.store()
	if err != nil {
		return err
	}
	if err := st.Delete(c.Tenant(), name); err != nil {
		return secretError(err)
	}
	s.refreshLive(c.Tenant())
	return nil
}

// refreshLive gives owner's live sandboxes here their secrets' values as
// the store has them now.
func (s *Service) refreshLive(owner string) {
	if s.live != nil {
		s.live.RefreshSecrets(owner)
	}
}

// listed is sec as the API lists it.
func listed(sec secrets.Secret) wire.Secret {
	w := wire.Secret{Name: sec.Name, Hosts: sec.Hosts, Created: sec.Created, Updated: sec.Updated}
	if h := sec.Header; h != nil {
		w.Header = &wire.SecretHeader{Name: h.Name, Format: h.Format}
	}
	return w
}

// secretError is the store's error as the service's.
func secretError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, secrets.ErrInvalid):
		return &Error{Kind: Invalid, Msg: err.Error(), Err: err}
	case errors.Is(err, secrets.ErrNotFound):
		return &Error{Kind: NotFound, Msg: err.Error(), Err: err}
	}
	return &Error{Kind: Internal, Msg: "the secret store: " + err.Error(), Err: err}
}

// ErrSecretsRefused is wrapped by the Error of a request whose secrets
// cannot be used as it names them (not the caller's, named twice, without
// a network): a transport that takes them from its configuration says so
// in its own terms.
var ErrSecretsRefused = errors.New("secrets refused")

// refuseSecrets is an Invalid Error wrapping ErrSecretsRefused (and cause,
// when not nil).
func refuseSecrets(cause error, format string, a ...any) error {
	err := ErrSecretsRefused
	if cause != nil {
		err = fmt.Errorf("%w: %w", ErrSecretsRefused, cause)
	}
	return &Error{Kind: Invalid, Msg: "secrets: " + fmt.Sprintf(format, a...), Err: err}
}

// checkSecrets admits the secrets req names for owner: its own, each once,
// with the network they are used through (Invalid otherwise).
func (s *Service) checkSecrets(req *wire.ExecuteRequest, owner string) error {
	if len(req.Secrets) == 0 {
		return nil
	}
	st, err := s.store()
	if err != nil {
		return err
	}
	switch {
	case req.Network == nil || len(req.Network.Allow) == 0:
		return refuseSecrets(nil, "a run uses its secrets through its network: give network.allow with their hosts")
	case len(req.TestCases) > 0:
		return refuseSecrets(nil, "not available with test_cases")
	}
	for i, name := range req.Secrets {
		if slices.Contains(req.Secrets[:i], name) {
			return refuseSecrets(nil, "%q is named twice", name)
		}
		if _, ok := req.Env[name]; ok {
			return refuseSecrets(nil, "env %s is a secret's name: its placeholder goes there", name)
		}
	}
	if _, err := st.Get(owner, req.Secrets); err != nil {
		if errors.Is(err, secrets.ErrNotFound) {
			return refuseSecrets(err, "%v", err)
		}
		return secretError(err)
	}
	return nil
}

// openSecrets gives r the values of the secrets its request names, from
// the store as r starts (one deleted since it was admitted fails it).
func (s *Service) openSecrets(r *Run) error {
	if len(r.Request.Secrets) == 0 {
		return nil
	}
	st, err := s.store()
	if err != nil {
		return err
	}
	r.Secrets, err = st.Get(r.Tenant, r.Request.Secrets)
	if err != nil {
		if errors.Is(err, secrets.ErrNotFound) {
			return &Error{Kind: Invalid, Msg: fmt.Sprintf("secrets: %v", err), Err: err}
		}
		return secretError(err)
	}
	return nil
}

// checkLiveSecrets admits the secrets a live sandbox's create names for
// owner, as checkSecrets does a run's.
func (s *Service) checkLiveSecrets(o live.CreateOptions, owner string) error {
	if len(o.Secrets) == 0 {
		return nil
	}
	req := &wire.ExecuteRequest{Secrets: o.Secrets, Env: o.Env}
	if o.Network != nil {
		req.Network = &wire.NetworkRequest{Allow: o.Network}
	}
	return s.checkSecrets(req, owner)
}

// liveSecrets gives the live sandboxes' Manager the values of owner's
// secrets (live.SecretSource).
func (s *Service) liveSecrets(owner string, names []string) ([]live.Secret, error) {
	st, err := s.store()
	if err != nil {
		return nil, err
	}
	got, err := st.Get(owner, names)
	if err != nil {
		return nil, secretError(err)
	}
	out := make([]live.Secret, len(got))
	for i, sec := range got {
		out[i] = live.Secret{Name: sec.Name, Value: sec.Value, Hosts: sec.Hosts}
		if h := sec.Header; h != nil {
			out[i].HeaderName, out[i].HeaderFormat = h.Name, h.Format
		}
	}
	return out, nil
}
