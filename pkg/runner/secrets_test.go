package runner_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/live"
	"github.com/sandbox-run/sandbox-run/pkg/local"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
	"github.com/sandbox-run/sandbox-run/pkg/secrets"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// recorder is an executor with the real language table that records the
// last run it was given and completes it.
type recorder struct {
	reg  *executor.Registry
	mu   sync.Mutex
	last *executor.Request
}

func (r *recorder) Execute(ctx context.Context, req *executor.Request) (*executor.Result, error) {
	r.mu.Lock()
	r.last = req
	r.mu.Unlock()
	return &executor.Result{Outcome: executor.Outcome{Status: executor.StatusCompleted}, Language: req.Language}, nil
}
func (r *recorder) Registry() *executor.Registry { return r.reg }

// TestSecretsThroughTheDoor: a key's secrets are its own (put, listed
// without values, deleted; another key's 404); a run naming them is
// admitted only with a network, its key's names, each once, none in its
// env; the backend gets the values as the run starts (a secret deleted
// since is refused then); a service without a store, or whose store could
// not open, refuses; a live sandbox's create is checked alike, and its
// network change and report reach the Manager.
func TestSecretsThroughTheDoor(t *testing.T) {
	reg, err := executor.NewRegistry("")
	if err != nil {
		t.Fatal(err)
	}
	key := make([]byte, secrets.KeySize)
	st, err := secrets.New(secrets.Dir(t.TempDir()), key)
	if err != nil {
		t.Fatal(err)
	}
	app := config.Default()
	app.Network.Allow = []string{"api.example.com:443"}
	rec := &recorder{reg: reg}
	s := runner.New(runner.Config{Workers: 1, App: app, Secrets: st}, local.New(rec), quiet(), nil)
	defer s.Stop()
	a := runner.Caller{Key: &runner.Key{APIKey: config.APIKey{ID: "a"}}}
	b := runner.Caller{Key: &runner.Key{APIKey: config.APIKey{ID: "b"}}}
	got, err := s.PutSecret(a, "TOKEN", wire.SecretPut{Value: "v-123", Hosts: []string{"api.example.com"}, Header: &wire.SecretHeader{Name: "Authorization", Format: "Bearer {value}"}})
	if err != nil || got.Name != "TOKEN" || got.Header == nil || got.Header.Format != "Bearer {value}" {
		t.Fatalf("put: %+v %v", got, err)
	}
	if _, err := s.PutSecret(a, "1BAD", wire.SecretPut{Value: "v", Hosts: []string{"x.com"}}); runner.KindOf(err) != runner.Invalid {
		t.Errorf("a bad name: %v", err)
	}
	if la, _ := s.ListSecrets(a); len(la.Secrets) != 1 || la.Secrets[0].Name != "TOKEN" {
		t.Errorf("a's list: %+v", la)
	}
	if lb, _ := s.ListSecrets(b); len(lb.Secrets) != 0 {
		t.Errorf("b's list: %+v", lb)
	}
	if err := s.DeleteSecret(b, "TOKEN"); runner.KindOf(err) != runner.NotFound {
		t.Errorf("b's delete of a's secret: %v", err)
	}

	netOK := &wire.NetworkRequest{Allow: []string{"api.example.com:443"}}
	for want, req := range map[string]*wire.ExecuteRequest{
		"network":     {Language: "bash", Code: "true", Secrets: []string{"TOKEN"}},
		"named twice": {Language: "bash", Code: "true", Secrets: []string{"TOKEN", "TOKEN"}, Network: netOK},
		"env TOKEN":   {Language: "bash", Code: "true", Secrets: []string{"TOKEN"}, Network: netOK, Env: map[string]string{"TOKEN": "x"}},
		"OTHER":       {Language: "bash", Code: "true", Secrets: []string{"OTHER"}, Network: netOK},
		"test_cases":  {Language: "bash", Code: "true", Secrets: []string{"TOKEN"}, Network: netOK, TestCases: []wire.TestCase{{}}},
	} {
		if err := s.Prepare(context.Background(), req, "a"); runner.KindOf(err) != runner.Invalid || !strings.Contains(err.Error(), want) ||
			want != "test_cases" && !errors.Is(err, runner.ErrSecretsRefused) { // test_cases: refused for its network first
			t.Errorf("%s: %v", want, err)
		}
	}
	if err := s.Prepare(context.Background(), &wire.ExecuteRequest{Language: "bash", Code: "true", Secrets: []string{"TOKEN"}, Network: netOK}, "b"); runner.KindOf(err) != runner.Invalid ||
		!errors.Is(err, runner.ErrSecretsRefused) || !errors.Is(err, secrets.ErrNotFound) {
		t.Errorf("b naming a's secret: %v", err)
	}
	req := &wire.ExecuteRequest{Language: "bash", Code: "true", Secrets: []string{"TOKEN"}, Network: netOK}
	if err := s.Prepare(context.Background(), req, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(context.Background(), runner.Run{Request: req, Tenant: "a"}); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	if l := rec.last; len(l.Secrets) != 1 || l.Secrets[0].Value != "v-123" || l.Secrets[0].HeaderName != "Authorization" {
		t.Errorf("the backend got %+v", l.Secrets)
	}
	rec.mu.Unlock()
	if err := s.DeleteSecret(a, "TOKEN"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(context.Background(), runner.Run{Request: req, Tenant: "a"}); runner.KindOf(err) != runner.Invalid {
		t.Errorf("a run naming a secret deleted since it was admitted: %v", err)
	}

	// Without a store, or with one that could not open.
	for name, cfg := range map[string]runner.Config{"none": {Workers: 1, App: app}, "broken": {Workers: 1, App: app, SecretsErr: errors.New("the key file is 0644")}} {
		sv := runner.New(cfg, local.New(rec), quiet(), nil)
		if _, err := sv.ListSecrets(a); runner.KindOf(err) != runner.Unavailable {
			t.Errorf("%s: list: %v", name, err)
		}
		if err := sv.Prepare(context.Background(), &wire.ExecuteRequest{Language: "bash", Code: "true", Secrets: []string{"TOKEN"}, Network: netOK}, "a"); runner.KindOf(err) != runner.Unavailable {
			t.Errorf("%s: a run with secrets: %v", name, err)
		}
		sv.Stop()
	}

	// A live sandbox's create, network change and report.
	ls := runner.New(runner.Config{Workers: 1, App: app, Secrets: st}, liveBackend{local.New(newGate())}, quiet(), nil)
	defer ls.Stop()
	ctx := context.Background()
	if _, err := ls.PutSecret(a, "TOKEN", wire.SecretPut{Value: "v-123", Hosts: []string{"api.example.com"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ls.CreateLive(ctx, a, live.CreateOptions{Secrets: []string{"TOKEN"}}); runner.KindOf(err) != runner.Invalid {
		t.Errorf("a live sandbox's secrets without a network: %v", err)
	}
	if _, err := ls.CreateLive(ctx, b, live.CreateOptions{Secrets: []string{"TOKEN"}, Network: netOK.Allow}); runner.KindOf(err) != runner.Invalid {
		t.Errorf("b's live sandbox naming a's secret: %v", err)
	}
	sb, err := ls.CreateLive(ctx, a, live.CreateOptions{Secrets: []string{"TOKEN"}, Network: netOK.Allow})
	if err != nil {
		t.Fatal(err)
	}
	if len(sb.Secrets) != 1 || sb.Secrets[0] != "TOKEN" {
		t.Errorf("the sandbox's secrets: %v", sb.Secrets)
	}
	if err := ls.SetLiveNetwork(a, sb.ID, wire.NetworkRequest{Allow: []string{"example.com"}}); runner.KindOf(err) != runner.Invalid {
		t.Errorf("a network beyond the server's: %v", err)
	}
	// The in-process starter's sandboxes cannot change theirs.
	if err := ls.SetLiveNetwork(a, sb.ID, wire.NetworkRequest{}); runner.KindOf(err) != runner.Invalid {
		t.Errorf("a network change on a starter that cannot: %v", err)
	}
	if err := ls.SetLiveNetwork(b, sb.ID, wire.NetworkRequest{}); runner.KindOf(err) != runner.NotFound {
		t.Errorf("b's change of a's sandbox: %v", err)
	}
	if r, err := ls.LiveNetworkReport(a, sb.ID); r != nil || err != nil {
		t.Errorf("the report of a sandbox whose starter has none: %v %v", r, err)
	}
	if _, err := ls.LiveNetworkReport(b, sb.ID); runner.KindOf(err) != runner.NotFound {
		t.Errorf("b's report of a's sandbox: %v", err)
	}
}
