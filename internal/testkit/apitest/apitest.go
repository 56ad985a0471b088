// Package apitest serves the real API (a real executor running real
// sandboxes) on 127.0.0.1 for the tests of packages that add routes to it
// (pkg/judge0, pkg/piston), with the options (api.Mount) they give. A test binary that uses it must call
// sandbox.Init first thing in its TestMain.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/api"
	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/local"
)

// Config is the default configuration with a data directory of the
// test's own (the toolchain caches shared with the other tests').
func Config(t testing.TB) config.Config {
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	home, _ := os.UserHomeDir()
	cache := filepath.Join(home, ".cache", "sandbox-run-test", "cache")
	os.MkdirAll(cache, 0o755)
	os.Symlink(cache, filepath.Join(cfg.DataDir, "cache"))
	cfg.PoolSize, cfg.Prewarm = -1, 0
	// A test's server takes its live sandboxes with it (no other server
	// comes for them): a test of the restart says otherwise.
	cfg.Live.EndOnShutdown = true
	return cfg
}

// Serve serves the API that cfg describes until the test ends and
// returns its base URL.
func Serve(t testing.TB, cfg config.Config, opts ...api.Option) string {
	t.Helper()
	url, stop := Start(t, cfg, opts...)
	t.Cleanup(stop)
	return url
}

// Start serves the API that cfg describes and returns its base URL and
// what stops it (gracefully, as at a server's shutdown; once): a test that
// restarts a server on the same data dir stops the first itself.
func Start(t testing.TB, cfg config.Config, opts ...api.Option) (url string, stop func()) {
	t.Helper()
	x, err := local.NewExecutor(cfg)
	if err != nil {
		t.Skipf("cannot sandbox here: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- api.New(cfg, local.New(x), slog.New(slog.DiscardHandler), opts...).Serve(ctx, ln) }()
	var once sync.Once
	return "http://" + ln.Addr().String(), func() {
		once.Do(func() {
			cancel()
			<-done
			if e := x.Engine(); e != nil {
				e.Close()
			}
		})
	}
}

// Upstream is an HTTP server on 127.0.0.1 that records the Authorization
// header of each request by its path: where a run's secret arrives.
type Upstream struct {
	// Port is its port; Allow the network entry that reaches it from a
	// sandbox (host.sandbox.internal:PORT).
	Port, Allow string

	mu  sync.Mutex
	got map[string]string
}

// NewUpstream starts an Upstream, closed when the test ends.
func NewUpstream(t testing.TB) *Upstream {
	u := &Upstream{got: map[string]string{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.got[r.URL.Path] = r.Header.Get("Authorization")
		u.mu.Unlock()
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	u.Port = srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	u.Allow = "host.sandbox.internal:" + u.Port
	return u
}

// Got is the Authorization header of the request for path, and whether
// one came.
func (u *Upstream) Got(path string) (string, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	v, ok := u.got[path]
	return v, ok
}

// Seen is how many paths requests came for.
func (u *Upstream) Seen() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.got)
}

// PutSecret stores the secret name with value, for hosts, as key's on the
// server at base (PUT /api/sandbox/secrets/NAME).
func PutSecret(t testing.TB, base, key, name, value string, hosts ...string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"value": value, "hosts": hosts})
	req, _ := http.NewRequest(http.MethodPut, base+"/api/sandbox/secrets/"+name, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("PUT the secret %s: %v", name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		t.Fatalf("PUT the secret %s: %d %s", name, resp.StatusCode, data)
	}
}

// SecretDoor is a server whose compatibility door has, by configuration,
// the network of Up and the secret TOKEN: KeyA's secret TOKEN is Token,
// KeyB has none.
type SecretDoor struct {
	Up         *Upstream
	Base       string
	KeyA, KeyB string
	Token      string
}

// ServeSecretDoor starts it: door gives the door (cfg.Judge0, cfg.Piston)
// its network and secrets; name prefixes the keys and the value.
func ServeSecretDoor(t testing.TB, name string, door func(*config.Config, config.DoorNetwork), opts ...api.Option) *SecretDoor {
	t.Helper()
	d := &SecretDoor{Up: NewUpstream(t), KeyA: name + "-net-key-a-0123", KeyB: name + "-net-key-b-0123",
		Token: fmt.Sprintf("%s-secret-%d", name, time.Now().UnixNano())}
	cfg := Config(t)
	cfg.Network.Allow = []string{d.Up.Allow}
	door(&cfg, config.DoorNetwork{Network: cfg.Network.Allow, Secrets: []string{"TOKEN"}})
	cfg.Keys = []config.APIKey{
		{ID: "a", Key: d.KeyA, Scopes: []string{config.ScopeExecute}},
		{ID: "b", Key: d.KeyB, Scopes: []string{config.ScopeExecute}},
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	d.Base = Serve(t, cfg, opts...)
	PutSecret(t, d.Base, d.KeyA, "TOKEN", d.Token, "host.sandbox.internal")
	return d
}

// Probe is a Python program that says whether its TOKEN is a placeholder,
// then sends it to the upstream's path /tag and prints the answer ("no
// network" when it cannot).
func (d *SecretDoor) Probe(tag string) string {
	return `
import os, urllib.request
tok = os.environ.get("TOKEN", "")
print(tok.startswith("SANDBOX_RUN_SECRET_TOKEN_"))
try:
    req = urllib.request.Request("http://host.sandbox.internal:` + d.Up.Port + `/` + tag + `", headers={"Authorization": "Bearer " + tok})
    print(urllib.request.urlopen(req, timeout=20).read().decode())
except Exception:
    print("no network")
`
}
