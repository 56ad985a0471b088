package judge0

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

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
	up := apitest.NewUpstream(t)
	cfg := apitest.Config(t)
	cfg.Network.Allow = []string{up.Allow}
	cfg.Judge0 = config.DoorNetwork{Network: cfg.Network.Allow, Secrets: []string{"TOKEN"}}
	cfg.Keys = []config.APIKey{
		{ID: "a", Key: "judge0-net-key-a-0123", Scopes: []string{config.ScopeExecute}},
		{ID: "b", Key: "judge0-net-key-b-0123", Scopes: []string{config.ScopeExecute}},
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	base := apitest.Serve(t, cfg, api.Mount(Prefix, New))
	token := fmt.Sprintf("judge0-secret-%d", time.Now().UnixNano())
	apitest.PutSecret(t, base, "judge0-net-key-a-0123", "TOKEN", token, "host.sandbox.internal")

	req, _ := http.NewRequest(http.MethodGet, base+"/judge0/config_info", nil)
	req.Header.Set("X-Auth-Token", "judge0-net-key-a-0123")
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

	code := `
import os, urllib.request
tok = os.environ.get("TOKEN", "")
print(tok.startswith("SANDBOX_RUN_SECRET_TOKEN_"))
try:
    req = urllib.request.Request("http://host.sandbox.internal:` + up.Port + `/" + os.environ["TAG"], headers={"Authorization": "Bearer " + tok})
    print(urllib.request.urlopen(req, timeout=20).read().decode())
except Exception:
    print("no network")
`
	submit := func(key, tag string, network bool) (int, map[string]any) {
		body, _ := json.Marshal(map[string]any{"source_code": strings.Replace(code, `os.environ["TAG"]`, `"`+tag+`"`, 1),
			"language_id": 71, "enable_network": network})
		st, out := send(t, base+"/judge0/submissions?wait=true&fields=stdout,stderr,status,enable_network", body,
			map[string]string{"Content-Type": "application/json", "X-Auth-Token": key})
		var v map[string]any
		json.Unmarshal([]byte(out), &v)
		return st, v
	}
	if st, v := submit("judge0-net-key-a-0123", "with", true); st != 201 || statusID(v) != 3 || v["stdout"] != "True\nok\n" || v["enable_network"] != true {
		t.Errorf("enable_network: %d %v", st, v)
	}
	if auth, _ := up.Got("/with"); auth != "Bearer "+token {
		t.Errorf("the upstream got Authorization %q, want the secret's value", auth)
	}
	if st, v := submit("judge0-net-key-a-0123", "without", false); st != 201 || statusID(v) != 3 || v["stdout"] != "False\nno network\n" || v["enable_network"] != false {
		t.Errorf("no enable_network: %d %v", st, v)
	}
	if st, v := submit("judge0-net-key-b-0123", "other", true); st != 422 || !strings.Contains(fmt.Sprint(v["enable_network"]), `"TOKEN"`) {
		t.Errorf("a key without the secret: %d %v, want 422 on enable_network", st, v)
	}
	if _, ok := up.Got("/without"); ok || up.Seen() != 1 {
		t.Errorf("the upstream got %d paths, want /with only", up.Seen())
	}
}
