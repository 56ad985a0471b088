package judge0

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/testkit/apitest"
	"github.com/sandbox-run/sandbox-run/pkg/api"
	"github.com/sandbox-run/sandbox-run/pkg/config"
)

// TestNetworkByConfig: with judge0.network and judge0.secrets, a
// submission with enable_network reaches what the network allows, its
// program seeing a placeholder the egress replaces with the caller's
// secret; one without it has neither network nor secrets; a key without
// the secret is refused 422. config_info says a submission may enable
// the network.
func TestNetworkByConfig(t *testing.T) {
	d := apitest.ServeSecretDoor(t, "judge0", func(cfg *config.Config, n config.DoorNetwork) { cfg.Judge0 = n }, api.Mount(Prefix, New))
	base, up, token := d.Base, d.Up, d.Token

	req, _ := http.NewRequest(http.MethodGet, base+"/judge0/config_info", nil)
	req.Header.Set("X-Auth-Token", d.KeyA)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var info map[string]any
	json.NewDecoder(resp.Body).Decode(&info)
	resp.Body.Close()
	if info["allow_enable_network"] != true || info["enable_network"] != false {
		t.Errorf("config_info: allow_enable_network %v, enable_network %v", info["allow_enable_network"], info["enable_network"])
	}

	submit := func(key, tag string, network bool) (int, map[string]any) {
		body, _ := json.Marshal(map[string]any{"source_code": d.Probe(tag),
			"language_id": 71, "enable_network": network})
		st, out := send(t, base+"/judge0/submissions?wait=true&fields=stdout,stderr,status,enable_network", body,
			map[string]string{"Content-Type": "application/json", "X-Auth-Token": key})
		var v map[string]any
		json.Unmarshal([]byte(out), &v)
		return st, v
	}
	if st, v := submit(d.KeyA, "with", true); st != 201 || statusID(v) != 3 || v["stdout"] != "True\nok\n" || v["enable_network"] != true {
		t.Errorf("enable_network: %d %v", st, v)
	}
	if auth, _ := up.Got("/with"); auth != "Bearer "+token {
		t.Errorf("the upstream got Authorization %q, want the secret's value", auth)
	}
	if st, v := submit(d.KeyA, "without", false); st != 201 || statusID(v) != 3 || v["stdout"] != "False\nno network\n" || v["enable_network"] != false {
		t.Errorf("no enable_network: %d %v", st, v)
	}
	if st, v := submit(d.KeyB, "other", true); st != 422 || !strings.Contains(fmt.Sprint(v["enable_network"]), `"TOKEN"`) {
		t.Errorf("a key without the secret: %d %v, want 422 on enable_network", st, v)
	}
	if _, ok := up.Got("/without"); ok || up.Seen() != 1 {
		t.Errorf("the upstream got %d paths, want /with only", up.Seen())
	}
}
