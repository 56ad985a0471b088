package piston

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/testkit/apitest"
	"github.com/sandbox-run/sandbox-run/pkg/api"
	"github.com/sandbox-run/sandbox-run/pkg/config"
)

// TestNetworkByConfig: with piston.network and piston.secrets every run
// reaches what the network allows, its program seeing a placeholder the
// egress replaces with the caller's secret; a key without the secret is
// refused 400 in Piston's shape; without the configuration a run has
// neither network nor secrets.
func TestNetworkByConfig(t *testing.T) {
	up := apitest.NewUpstream(t)
	cfg := apitest.Config(t)
	cfg.Network.Allow = []string{up.Allow}
	cfg.Piston = config.DoorNetwork{Network: cfg.Network.Allow, Secrets: []string{"TOKEN"}}
	cfg.Keys = []config.APIKey{
		{ID: "a", Key: "piston-net-key-a-0123", Scopes: []string{config.ScopeExecute}},
		{ID: "b", Key: "piston-net-key-b-0123", Scopes: []string{config.ScopeExecute}},
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	root := apitest.Serve(t, cfg, api.Mount(Prefix, New))
	token := fmt.Sprintf("piston-secret-%d", time.Now().UnixNano())
	apitest.PutSecret(t, root, "piston-net-key-a-0123", "TOKEN", token, "host.sandbox.internal")

	run := func(base, tag string) (int, map[string]any) {
		code := `
import os, urllib.request
tok = os.environ.get("TOKEN", "")
print(tok.startswith("SANDBOX_RUN_SECRET_TOKEN_"))
try:
    req = urllib.request.Request("http://host.sandbox.internal:` + up.Port + `/` + tag + `", headers={"Authorization": "Bearer " + tok})
    print(urllib.request.urlopen(req, timeout=20).read().decode())
except Exception:
    print("no network")
`
		return post(t, base+"/piston/api/v2/execute", map[string]any{"language": "python", "version": "*", "files": []map[string]string{{"content": code}}})
	}
	if st, v := run(root+"/k/piston-net-key-a-0123", "with"); st != 200 || stageOf(v, "run")["stdout"] != "True\nok\n" {
		t.Errorf("a run: %d %v", st, v)
	}
	if st, v := run(root+"/k/piston-net-key-b-0123", "other"); st != 400 || !strings.Contains(fmt.Sprint(v["message"]), `"TOKEN"`) {
		t.Errorf("a key without the secret: %d %v, want 400 {\"message\": ...}", st, v)
	}
	plain := apitest.Serve(t, apitest.Config(t), api.Mount(Prefix, New))
	if st, v := run(plain, "without"); st != 200 || stageOf(v, "run")["stdout"] != "False\nno network\n" {
		t.Errorf("a run on a server without piston.network: %d %v", st, v)
	}
	if auth, _ := up.Got("/with"); auth != "Bearer "+token || up.Seen() != 1 {
		t.Errorf("the upstream got %q (and %d paths), want /with with the secret's value only", auth, up.Seen())
	}
}
