package piston

import (
	"fmt"
	"strings"
	"testing"

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
	d := apitest.ServeSecretDoor(t, "piston", func(cfg *config.Config, n config.DoorNetwork) { cfg.Piston = n }, api.Mount(Prefix, New))
	root, up, token := d.Base, d.Up, d.Token
	run := func(base, tag string) (int, map[string]any) {
		return post(t, base+"/piston/api/v2/execute", map[string]any{"language": "python", "version": "*", "files": []map[string]string{{"content": d.Probe(tag)}}})
	}
	if st, v := run(root+"/k/"+d.KeyA, "with"); st != 200 || stageOf(v, "run")["stdout"] != "True\nok\n" {
		t.Errorf("a run: %d %v", st, v)
	}
	if st, v := run(root+"/k/"+d.KeyB, "other"); st != 400 || !strings.Contains(fmt.Sprint(v["message"]), `"TOKEN"`) {
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
