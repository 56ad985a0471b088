package judge0

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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
	var mu sync.Mutex
	got := map[string]string{} // path: Authorization
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got[r.URL.Path] = r.Header.Get("Authorization")
		mu.Unlock()
		io.WriteString(w, "ok")
	}))
	defer upstream.Close()
	port := upstream.URL[strings.LastIndex(upstream.URL, ":")+1:]

	cfg := apitest.Config(t)
	cfg.Network.Allow = []string{"host.sandbox.internal:" + port}
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
	put, _ := http.NewRequest(http.MethodPut, base+"/api/sandbox/secrets/TOKEN",
		strings.NewReader(`{"value": "`+token+`", "hosts": ["host.sandbox.internal"]}`))
	put.Header.Set("Content-Type", "application/json")
	put.Header.Set("Authorization", "Bearer judge0-net-key-a-0123")
	if resp, err := http.DefaultClient.Do(put); err != nil || resp.StatusCode != 200 {
		t.Fatalf("PUT the secret: %v %v", resp, err)
	}

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
    req = urllib.request.Request("http://host.sandbox.internal:` + port + `/" + os.environ["TAG"], headers={"Authorization": "Bearer " + tok})
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
	mu.Lock()
	if auth := got["/with"]; auth != "Bearer "+token {
		t.Errorf("the upstream got Authorization %q, want the secret's value", auth)
	}
	mu.Unlock()
	if st, v := submit("judge0-net-key-a-0123", "without", false); st != 201 || statusID(v) != 3 || v["stdout"] != "False\nno network\n" || v["enable_network"] != false {
		t.Errorf("no enable_network: %d %v", st, v)
	}
	if st, v := submit("judge0-net-key-b-0123", "other", true); st != 422 || !strings.Contains(fmt.Sprint(v["enable_network"]), `"TOKEN"`) {
		t.Errorf("a key without the secret: %d %v, want 422 on enable_network", st, v)
	}
	mu.Lock()
	defer mu.Unlock()
	if _, ok := got["/without"]; ok || len(got) != 1 {
		t.Errorf("the upstream got %v, want /with only", got)
	}
}
