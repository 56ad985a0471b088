package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandbox-run/sandbox-run/pkg/local"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// upstream is a stand-in for the API a secret is for, on the host's
// loopback: it keeps each request's Authorization header and target, and
// answers "upstream ok". allow is how a run reaches it
// (host.sandbox.internal:PORT).
type upstream struct {
	allow string
	mu    sync.Mutex
	got   []string
}

func startUpstream(t *testing.T) *upstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{allow: fmt.Sprintf("host.sandbox.internal:%d", ln.Addr().(*net.TCPAddr).Port)}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.got = append(u.got, r.Header.Get("Authorization")+" "+r.URL.RequestURI())
		u.mu.Unlock()
		io.WriteString(w, "upstream ok")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return u
}

func (u *upstream) requests() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.got)
}

// secretCall sends a REST call about the key's secrets, as their owner
// does (no tool stores one).
func secretCall(t *testing.T, method, url, key, name string, body any) int {
	t.Helper()
	var in io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		in = strings.NewReader(string(b))
	}
	req, _ := http.NewRequest(method, url+"/api/sandbox/secrets/"+name, in)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

const secretValue = "sk-mcp-test-0123456789abcdef0123456789abcdef"

// TestSecrets: over /mcp, list_secrets lists the key's secrets (names,
// hosts, header; never a value, nor another key's); execute_code and
// run_in_session pass the secrets they name to the run, whose program sees
// a placeholder while the upstream gets the value (network.requests says
// which secrets went where); the run service's refusals (a name the key
// has no secret by, no network, another key's secret, an interpreter
// session, a deleted secret) are tool errors. No tool takes a value: the
// only tool about secrets is list_secrets, and it takes nothing.
func TestSecrets(t *testing.T) {
	up := startUpstream(t)
	cfg := testConfig(t)
	cfg.DataDir = t.TempDir()
	cfg.Network.Allow = []string{up.allow}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	url := serveAPI(t, cfg)
	if code := secretCall(t, http.MethodPut, url, "key-one", "TOKEN", wire.SecretPut{Value: secretValue,
		Hosts: []string{"host.sandbox.internal"}, Header: &wire.SecretHeader{Name: "Authorization", Format: "Bearer {value}"}}); code != http.StatusOK {
		t.Fatalf("PUT TOKEN: %d", code)
	}
	cs := connectHTTP(t, url, "key-one")

	// The tools: list_secrets takes nothing, the run tools take secrets
	// (an array of names, one type), and no other tool is about secrets.
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*sdk.Tool{}
	for _, tool := range tools.Tools {
		byName[tool.Name] = tool
		if strings.Contains(tool.Name, "secret") && tool.Name != "list_secrets" {
			t.Errorf("tool %s: the only tool about secrets is list_secrets (no tool may take a value)", tool.Name)
		}
	}
	list := byName["list_secrets"]
	if list == nil {
		t.Fatal("no list_secrets tool")
	}
	if props, _ := list.InputSchema.(map[string]any)["properties"].(map[string]any); len(props) != 0 {
		t.Errorf("list_secrets takes %v", props)
	}
	if a := list.Annotations; a == nil || !a.ReadOnlyHint {
		t.Errorf("list_secrets is not read-only: %+v", a)
	}
	for _, name := range []string{"execute_code", "run_in_session", "sandbox_create"} {
		props, _ := byName[name].InputSchema.(map[string]any)["properties"].(map[string]any)
		p, _ := props["secrets"].(map[string]any)
		items, _ := p["items"].(map[string]any)
		if p["type"] != "array" || items["type"] != "string" || !strings.Contains(fmt.Sprint(p["description"]), "list_secrets") {
			t.Errorf("%s: secrets %v", name, p)
		}
		if req, _ := byName[name].InputSchema.(map[string]any)["required"].([]any); slices.Contains(req, any("secrets")) {
			t.Errorf("%s: secrets is required", name)
		}
	}

	// list_secrets: the key's own, never a value.
	res := call(t, cs, "list_secrets", map[string]any{})
	var listed SecretsOutput
	ok(t, res, &listed)
	if len(listed.Secrets) != 1 {
		t.Fatalf("list_secrets: %+v", listed)
	}
	s := listed.Secrets[0]
	if s.Name != "TOKEN" || !slices.Equal(s.Hosts, []string{"host.sandbox.internal"}) || s.Header == nil ||
		*s.Header != (SecretHeader{Name: "Authorization", Format: "Bearer {value}"}) {
		t.Errorf("list_secrets: %+v", s)
	}
	if _, err := time.Parse(time.RFC3339, s.Created); err != nil {
		t.Errorf("created %q: %v", s.Created, err)
	}
	if strings.Contains(text(res), secretValue) {
		t.Errorf("list_secrets shows the value: %s", text(res))
	}
	other := connectHTTP(t, url, "key-two")
	var none SecretsOutput
	ok(t, call(t, other, "list_secrets", nil), &none)
	if none.Secrets == nil || len(none.Secrets) != 0 {
		t.Errorf("key-two's list_secrets: %+v", none)
	}

	// A run naming the secret: a placeholder in its environment, the value
	// at the upstream, in the header and in place of the placeholder in
	// the URL.
	code := `import os, urllib.request
token = os.environ["TOKEN"]
print(token)
print(urllib.request.urlopen("http://` + up.allow + `/v1?k=" + token, timeout=30).read().decode())`
	args := map[string]any{"language": "python", "code": code, "secrets": []string{"TOKEN"}, "network": map[string]any{"allow": []string{up.allow}}}
	res = call(t, cs, "execute_code", args)
	var run RunResult
	ok(t, res, &run)
	lines := strings.Split(run.Stdout, "\n")
	if run.Status != "completed" || len(lines) != 3 || !strings.HasPrefix(lines[0], "SANDBOX_RUN_SECRET_TOKEN_") || lines[1] != "upstream ok" {
		t.Fatalf("execute_code with secrets: %+v", run)
	}
	if strings.Contains(text(res), secretValue) {
		t.Errorf("the result holds the value: %s", text(res))
	}
	if got := up.requests(); !slices.Equal(got, []string{"Bearer " + secretValue + " /v1?k=" + secretValue}) {
		t.Errorf("the upstream got %q", got)
	}
	if n := run.Network; n == nil || len(n.Requests) != 1 || n.Requests[0].Path != "/v1?k="+lines[0] ||
		n.Requests[0].Status != 200 || !slices.Equal(n.Requests[0].Secrets, []string{"TOKEN"}) {
		t.Errorf("network.requests: %+v", run.Network)
	}

	// The run service's refusals, as tool errors.
	toolError(t, call(t, cs, "execute_code", map[string]any{"language": "python", "code": "1", "secrets": []string{"NOPE"},
		"network": map[string]any{"allow": []string{up.allow}}}), "NOPE")
	toolError(t, call(t, cs, "execute_code", map[string]any{"language": "python", "code": "1", "secrets": []string{"TOKEN"}}), "network")
	toolError(t, call(t, other, "execute_code", args), "TOKEN")
	toolError(t, call(t, cs, "execute_code", map[string]any{"language": "python", "code": "1", "secrets": []string{"TOKEN", "TOKEN"},
		"network": map[string]any{"allow": []string{up.allow}}}), "twice")

	// run_in_session: a session with network access to the secret's host.
	var sess SessionOutput
	ok(t, call(t, cs, "create_session", map[string]any{"language": "python", "network": map[string]any{"allow": []string{up.allow}}}), &sess)
	ok(t, call(t, cs, "run_in_session", map[string]any{"session_id": sess.SessionID, "code": code, "secrets": []string{"TOKEN"}}), &run)
	if lines := strings.Split(run.Stdout, "\n"); run.Status != "completed" || !strings.HasPrefix(lines[0], "SANDBOX_RUN_SECRET_TOKEN_") ||
		run.Network == nil || len(run.Network.Requests) != 1 || !slices.Equal(run.Network.Requests[0].Secrets, []string{"TOKEN"}) {
		t.Errorf("run_in_session with secrets: %+v", run)
	}
	if got := up.requests(); len(got) != 2 || got[1] != got[0] {
		t.Errorf("the upstream got %q", got)
	}
	ok(t, call(t, cs, "close_session", map[string]any{"session_id": sess.SessionID}), &CloseOutput{})
	ok(t, call(t, cs, "create_session", map[string]any{"language": "python", "interpreter": true,
		"network": map[string]any{"allow": []string{up.allow}}}), &sess)
	toolError(t, call(t, cs, "run_in_session", map[string]any{"session_id": sess.SessionID, "code": "1", "secrets": []string{"TOKEN"}}), "created with")
	ok(t, call(t, cs, "close_session", map[string]any{"session_id": sess.SessionID}), &CloseOutput{})
	// An interpreter session made with the secret: its cells use it.
	toolError(t, call(t, cs, "create_session", map[string]any{"language": "python", "interpreter": true, "secrets": []string{"TOKEN"}}), "network")
	ok(t, call(t, cs, "create_session", map[string]any{"language": "python", "interpreter": true, "secrets": []string{"TOKEN"},
		"network": map[string]any{"allow": []string{up.allow}}}), &sess)
	ok(t, call(t, cs, "run_in_session", map[string]any{"session_id": sess.SessionID, "code": code}), &run)
	if lines := strings.Split(run.Stdout, "\n"); run.Status != "completed" || !strings.HasPrefix(lines[0], "SANDBOX_RUN_SECRET_TOKEN_") || lines[1] != "upstream ok" {
		t.Errorf("an interpreter session's cell with its secret: %+v", run)
	}
	if got := up.requests(); len(got) != 3 || got[2] != got[0] {
		t.Errorf("the upstream got %q", got)
	}
	ok(t, call(t, cs, "close_session", map[string]any{"session_id": sess.SessionID}), &CloseOutput{})

	// Deleted by its owner: gone from the list, refused in a run.
	if code := secretCall(t, http.MethodDelete, url, "key-one", "TOKEN", nil); code != http.StatusNoContent {
		t.Fatalf("DELETE TOKEN: %d", code)
	}
	ok(t, call(t, cs, "list_secrets", map[string]any{}), &listed)
	if len(listed.Secrets) != 0 {
		t.Errorf("list_secrets after DELETE: %+v", listed)
	}
	toolError(t, call(t, cs, "execute_code", args), "TOKEN")
	if n := len(up.requests()); n != 3 {
		t.Errorf("the upstream got %d requests, want 3", n)
	}
}

// TestSecretsStdio: the server of `sandbox-run mcp` lists the secrets of
// its data dir's store (the keyless tenant's, as the CLI's runs use), and
// a store that cannot open makes list_secrets a tool error saying so.
func TestSecretsStdio(t *testing.T) {
	connect := func(t *testing.T, s *Server) *sdk.ClientSession {
		st, ct := sdk.NewInMemoryTransports()
		ctx, cancel := context.WithCancel(context.Background())
		go s.Run(ctx, st)
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "0"}, nil).Connect(ctx, ct, nil)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cs.Close()
			cancel()
			s.Close()
		})
		return cs
	}

	cfg := testConfig(t)
	cfg.DataDir = t.TempDir()
	s := New(cfg, local.New(testExec), quiet)
	if _, err := s.svc.PutSecret(runner.Caller{}, "GH_TOKEN", wire.SecretPut{Value: secretValue, Hosts: []string{"api.github.com"}}); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, s)
	res := call(t, cs, "list_secrets", map[string]any{})
	var listed SecretsOutput
	ok(t, res, &listed)
	if len(listed.Secrets) != 1 || listed.Secrets[0].Name != "GH_TOKEN" || !slices.Equal(listed.Secrets[0].Hosts, []string{"api.github.com"}) ||
		listed.Secrets[0].Header != nil || strings.Contains(text(res), secretValue) {
		t.Errorf("list_secrets: %+v %s", listed, text(res))
	}

	broken := testConfig(t)
	broken.DataDir = t.TempDir()
	broken.Secrets.Key = "not-a-key"
	toolError(t, call(t, connect(t, New(broken, local.New(testExec), quiet)), "list_secrets", map[string]any{}), "secret store")
}

// TestLiveSecretsAndNetwork: over /mcp, sandbox_create's secrets go to the
// live sandbox, whose processes see a placeholder while the upstream gets
// the value; sandbox_set_network changes what it reaches while it runs
// ([]: nothing, and back); its refusals (a sandbox made without a
// network, a list beyond the server's, another key's sandbox, secrets
// without a network, a secret the key does not have) are tool errors.
func TestLiveSecretsAndNetwork(t *testing.T) {
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skipf("no TUN devices: %v", err)
	}
	up := startUpstream(t)
	cfg := testConfig(t)
	cfg.DataDir = t.TempDir()
	cfg.Network.Allow = []string{up.allow}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	url := serveAPI(t, cfg)
	if code := secretCall(t, http.MethodPut, url, "key-one", "TOKEN", wire.SecretPut{Value: secretValue,
		Hosts: []string{"host.sandbox.internal"}, Header: &wire.SecretHeader{Name: "Authorization", Format: "Bearer {value}"}}); code != http.StatusOK {
		t.Fatalf("PUT TOKEN: %d", code)
	}
	cs := connectHTTP(t, url, "key-one")

	var sb LiveSandbox
	ok(t, call(t, cs, "sandbox_create", map[string]any{"languages": []string{"python", "bash"}, "timeout_seconds": 120,
		"network_allow": []string{up.allow}, "secrets": []string{"TOKEN"}}), &sb)
	t.Cleanup(func() { call(t, cs, "sandbox_kill", map[string]any{"sandbox_id": sb.ID}) })
	if !slices.Equal(sb.Secrets, []string{"TOKEN"}) || !slices.Equal(sb.Network, []string{up.allow}) {
		t.Fatalf("sandbox_create: %+v", sb)
	}
	fetch := map[string]any{"sandbox_id": sb.ID, "command": `python3 -c 'import os, urllib.request
token = os.environ["TOKEN"]
print(token)
try:
    print(urllib.request.urlopen("http://` + up.allow + `/v1?k=" + token, timeout=10).read().decode())
except Exception as e:
    print("failed", type(e).__name__)'`}
	var out LiveExecOutput
	res := call(t, cs, "sandbox_exec", fetch)
	ok(t, res, &out)
	lines := strings.Split(out.Stdout, "\n")
	if out.ExitCode != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "SANDBOX_RUN_SECRET_TOKEN_") || lines[1] != "upstream ok" {
		t.Fatalf("sandbox_exec with the secret: %+v", out)
	}
	if strings.Contains(text(res), secretValue) {
		t.Errorf("the result holds the value: %s", text(res))
	}
	if got := up.requests(); !slices.Equal(got, []string{"Bearer " + secretValue + " /v1?k=" + secretValue}) {
		t.Errorf("the upstream got %q", got)
	}

	// Nothing: cut off while it runs.
	var now LiveSandbox
	ok(t, call(t, cs, "sandbox_set_network", map[string]any{"sandbox_id": sb.ID, "allow": []string{}}), &now)
	if now.ID != sb.ID || len(now.Network) != 0 || !slices.Equal(now.Secrets, []string{"TOKEN"}) {
		t.Errorf("sandbox_set_network to nothing: %+v", now)
	}
	var list LiveListOutput
	ok(t, call(t, cs, "sandbox_list", map[string]any{}), &list)
	if len(list.Sandboxes) != 1 || len(list.Sandboxes[0].Network) != 0 {
		t.Errorf("sandbox_list after the change: %+v", list)
	}
	ok(t, call(t, cs, "sandbox_exec", fetch), &out)
	if lines := strings.Split(out.Stdout, "\n"); len(lines) != 3 || !strings.HasPrefix(lines[1], "failed ") {
		t.Errorf("sandbox_exec with no network: %+v", out)
	}
	if n := len(up.requests()); n != 1 {
		t.Errorf("the upstream got %d requests, want 1", n)
	}
	// Back again.
	ok(t, call(t, cs, "sandbox_set_network", map[string]any{"sandbox_id": sb.ID, "allow": []string{up.allow}}), &now)
	if !slices.Equal(now.Network, []string{up.allow}) {
		t.Errorf("sandbox_set_network back: %+v", now)
	}
	ok(t, call(t, cs, "sandbox_exec", fetch), &out)
	if lines := strings.Split(out.Stdout, "\n"); len(lines) != 3 || lines[1] != "upstream ok" {
		t.Errorf("sandbox_exec with its network back: %+v", out)
	}

	// Refusals.
	toolError(t, call(t, cs, "sandbox_set_network", map[string]any{"sandbox_id": sb.ID, "allow": []string{"10.0.0.0/8"}}), "network.allow")
	toolError(t, call(t, cs, "sandbox_set_network", map[string]any{"sandbox_id": sb.ID}), "allow")
	toolError(t, call(t, connectHTTP(t, url, "key-two"), "sandbox_set_network", map[string]any{"sandbox_id": sb.ID, "allow": []string{}}), "no such sandbox")
	toolError(t, call(t, cs, "sandbox_set_network", map[string]any{"sandbox_id": "sbx_nope", "allow": []string{}}), "no such sandbox")
	var plain LiveSandbox
	ok(t, call(t, cs, "sandbox_create", map[string]any{"languages": []string{"bash"}, "timeout_seconds": 60}), &plain)
	t.Cleanup(func() { call(t, cs, "sandbox_kill", map[string]any{"sandbox_id": plain.ID}) })
	toolError(t, call(t, cs, "sandbox_set_network", map[string]any{"sandbox_id": plain.ID, "allow": []string{up.allow}}), "without a network")
	toolError(t, call(t, cs, "sandbox_create", map[string]any{"languages": []string{"bash"}, "secrets": []string{"TOKEN"}}), "network")
	toolError(t, call(t, cs, "sandbox_create", map[string]any{"languages": []string{"bash"}, "secrets": []string{"NOPE"},
		"network_allow": []string{up.allow}}), "NOPE")
	if n := len(up.requests()); n != 2 {
		t.Errorf("the upstream got %d requests, want 2", n)
	}
}
