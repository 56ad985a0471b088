package clusternode

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/testkit/apitest"
	"github.com/sandbox-run/sandbox-run/pkg/cluster"
	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/local"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
	"github.com/sandbox-run/sandbox-run/pkg/secrets"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// TestClusterSecrets: a cluster's secrets are the cluster's. An API node
// keeps them in SR_SECRETS, sealed under the cluster's key; a run with a
// secret goes to a worker as names only, and the worker reads the value
// from the cluster's store as the run starts and its egress puts it in
// the run's request. A worker cannot write the store; a node with another
// key, or none, serves no secrets and says why.
func TestClusterSecrets(t *testing.T) {
	ctx, _, cfg, urls := clusterSetup(t, 3*time.Minute)
	up := apitest.NewUpstream(t)
	allow := up.Allow
	cfg.Network.Allow = []string{allow}

	key := make([]byte, secrets.KeySize)
	rand.Read(key)
	connect := func(name string, key []byte) *cluster.Conn {
		c, err := cluster.Connect(ctx, cluster.Options{URLs: urls, Name: name, Insecure: true, SecretsKey: key})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}

	// The worker, started before any API node recorded the key.
	wc := connect("worker", key)
	wx, err := local.NewExecutor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	wrc := runner.ConfigFrom(cfg)
	if wrc.Secrets, wrc.SecretsErr = secretStore(ctx, wc, cfg, true); wrc.SecretsErr != nil {
		t.Fatal(wrc.SecretsErr)
	}
	if _, err := wrc.Secrets.Put("", secrets.Secret{Name: "X", Value: "v", Hosts: []string{"example.com"}}); err == nil || !strings.Contains(err.Error(), "a worker keeps no secrets") {
		t.Fatalf("a worker stored a secret: %v", err)
	}
	wsvc := runner.New(wrc, local.New(wx), quiet(), nil)
	wctx, stopWorker := context.WithCancel(ctx)
	worked := make(chan error, 1)
	go func() {
		worked <- wc.WorkWith(wctx, cluster.WorkOptions{Slots: 2, Run: runJob(wsvc, &cfg), Sessions: wx, Log: quiet()})
	}()
	defer func() { stopWorker(); <-worked }()

	// The API node.
	acfg := cfg
	acfg.DataDir = t.TempDir()
	acfg.NATS = config.NATS{URLs: urls, Role: config.RoleAPI}
	ax, err := local.NewExecutor(acfg)
	if err != nil {
		t.Fatal(err)
	}
	ac := connect("api", key)
	arc := runner.ConfigFrom(acfg)
	if arc.Secrets, arc.SecretsErr = secretStore(ctx, ac, acfg, false); arc.SecretsErr != nil {
		t.Fatal(arc.SecretsErr)
	}
	api := runner.New(arc, local.New(ax), quiet(), nil)
	api.UseRemote(Remote(ac, 0, nil, acfg, quiet()), nil, nil)
	waitWorkers(ctx, t, ac, 1, worked) // else the run finds no slot

	// A node with another key, and one with none.
	other := make([]byte, secrets.KeySize)
	rand.Read(other)
	if _, err := secretStore(ctx, connect("stranger", other), cfg, true); !errors.Is(err, cluster.ErrSecretsKey) {
		t.Fatalf("a worker with another key: %v", err)
	}
	if _, err := secretStore(ctx, connect("stranger-api", other), acfg, false); !errors.Is(err, cluster.ErrSecretsKey) {
		t.Fatalf("an API node with another key: %v", err)
	}
	if _, err := secretStore(ctx, connect("keyless", nil), cfg, true); !errors.Is(err, errNoClusterKey) {
		t.Fatalf("a node without a key: %v", err)
	}
	// A configured key wins over the credentials' one.
	withKey := acfg
	withKey.Secrets.Key = strings.Repeat("ab", secrets.KeySize)
	if _, err := secretStore(ctx, connect("configured", key), withKey, false); !errors.Is(err, cluster.ErrSecretsKey) {
		t.Fatalf("a node configured with another key: %v", err)
	}

	owner := runner.Caller{Key: &runner.Key{APIKey: config.APIKey{ID: "team-a"}}}
	token := "tok-" + strings.Repeat("7", 20)
	if _, err := api.PutSecret(owner, "TOKEN", wire.SecretPut{Value: token, Hosts: []string{"host.sandbox.internal"}}); err != nil {
		t.Fatal(err)
	}
	if l, err := api.ListSecrets(owner); err != nil || len(l.Secrets) != 1 || l.Secrets[0].Name != "TOKEN" {
		t.Fatalf("list: %+v %v", l, err)
	}
	code := `import os, urllib.request
tok = os.environ["TOKEN"]
print(tok.startswith("SANDBOX_RUN_SECRET_TOKEN_"))
req = urllib.request.Request("http://` + allow + `/", headers={"Authorization": "Bearer " + tok})
print(urllib.request.urlopen(req, timeout=30).read().decode())`
	req := &wire.ExecuteRequest{Language: "python", Code: code, Secrets: []string{"TOKEN"}, Network: &wire.NetworkRequest{Allow: []string{allow}}}
	if err := api.Prepare(ctx, req, owner.Tenant()); err != nil {
		t.Fatal(err)
	}
	res, err := api.Run(ctx, runner.Run{Request: req, Tenant: owner.Tenant(), Via: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != wire.StatusCompleted || res.Stdout != "True\nok\n" || strings.Contains(res.Stdout+res.Stderr, token) {
		t.Fatalf("run: %s %q %q", res.Status, res.Stdout, res.Stderr)
	}
	if got, _ := up.Got("/"); got != "Bearer "+token || up.Seen() != 1 {
		t.Fatalf("the upstream got %q, want the secret's value", got)
	}
	// Another key has no such secret: refused as the API node admits it.
	stranger := runner.Caller{Key: &runner.Key{APIKey: config.APIKey{ID: "team-b"}}}
	if err := api.Prepare(ctx, req, stranger.Tenant()); runner.KindOf(err) != runner.Invalid {
		t.Fatalf("another key's run naming TOKEN: %v", err)
	}
	if err := api.DeleteSecret(owner, "TOKEN"); err != nil {
		t.Fatal(err)
	}
}
