package clusternode

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sandbox-run/sandbox-run/internal/app"
	"github.com/sandbox-run/sandbox-run/pkg/api"
	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/local"
)

// TestLiveInCluster: live sandboxes on a worker, called through an API
// node (which keeps none) by every door: the native API's create, list,
// processes, files and ports, E2B's create and envd by the sandbox's
// token; another key's sandbox is 404 there; a worker that stops takes
// its sandboxes out of reach with an error that says so, and the next
// worker on its data dir takes them over, reachable again; a snapshot is
// kept in the cluster: listed and deleted through the API node, it starts
// a sandbox on a worker of another data dir, and is its key's only.
func TestLiveInCluster(t *testing.T) {
	ctx, connect, cfg, urls := clusterSetup(t, 3*time.Minute)
	wx, err := local.NewExecutor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// startWorkerOn runs a worker on x and wcfg's data dir until the
	// returned stop; startWorker on wx and cfg's.
	startWorkerOn := func(name string, wcfg config.Config, x *executor.Executor) (stop func()) {
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- Worker(wctx, connect(name), wcfg, x, nil, quiet()) }()
		var once sync.Once
		return func() {
			once.Do(func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("worker %s: %v", name, err)
				}
			})
		}
	}
	startWorker := func(name string) (stop func()) { return startWorkerOn(name, cfg, wx) }
	stop := startWorker("worker-a")

	const alice, bob = "alice-key-0123456789", "bob-key-0123456789ab"
	acfg := cfg
	acfg.DataDir = t.TempDir()
	acfg.NATS = config.NATS{URLs: urls, Role: config.RoleAPI}
	acfg.Keys = []config.APIKey{{ID: "alice", Key: alice, Scopes: []string{config.ScopeExecute}},
		{ID: "bob", Key: bob, Scopes: []string{config.ScopeExecute}}}
	if err := acfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ax, err := local.NewExecutor(acfg)
	if err != nil {
		t.Fatal(err)
	}
	ac := connect("api")
	opt, err := APIOption(ctx, ac, acfg, quiet())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.New(acfg, local.New(ax), quiet(), append(app.Transports(), opt)...).Handler())
	defer srv.Close()
	waitWorkers(ctx, t, ac, 1, nil)

	call := func(method, path string, headers map[string]string, body any) (int, []byte) {
		t.Helper()
		var rd io.Reader
		switch b := body.(type) {
		case nil:
		case []byte:
			rd = bytes.NewReader(b)
		default:
			j, _ := json.Marshal(b)
			rd = bytes.NewReader(j)
		}
		req, _ := http.NewRequestWithContext(ctx, method, srv.URL+path, rd)
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		if body != nil && req.Header.Get("Content-Type") == "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, out
	}
	as := func(key string) map[string]string { return map[string]string{"Authorization": "Bearer " + key} }
	want := func(status int, method, path string, headers map[string]string, body any, out any) []byte {
		t.Helper()
		got, data := call(method, path, headers, body)
		if got != status {
			t.Fatalf("%s %s: %d, want %d: %s", method, path, got, status, data)
		}
		if out != nil {
			if err := json.Unmarshal(data, out); err != nil {
				t.Fatalf("%s %s: %v: %s", method, path, err, data)
			}
		}
		return data
	}

	// The native API.
	var sb struct {
		ID          string `json:"id"`
		AccessToken string `json:"access_token"`
	}
	want(201, "POST", "/api/sandbox/sandboxes", as(alice), map[string]any{"metadata": map[string]string{"who": "alice"}}, &sb)
	base := "/api/sandbox/sandboxes/" + sb.ID
	var res struct {
		Stdout   string `json:"stdout"`
		ExitCode *int   `json:"exit_code"`
	}
	want(200, "POST", base+"/processes", as(alice), map[string]any{"command": "echo hi from $(hostname)"}, &res)
	if res.Stdout != "hi from sandbox\n" {
		t.Errorf("a process: %+v", res)
	}
	want(201, "PUT", base+"/files?path=site/hello.txt", as(alice), []byte("hello through the cluster"), nil)
	if got := string(want(200, "GET", base+"/files?path=site/hello.txt", as(alice), nil, nil)); got != "hello through the cluster" {
		t.Errorf("a file read back: %q", got)
	}
	if st, body := call("GET", base, as(bob), nil); st != 404 {
		t.Errorf("bob's view of alice's sandbox: %d %s", st, body)
	}
	var list struct {
		Sandboxes []struct {
			ID string `json:"id"`
		} `json:"sandboxes"`
	}
	want(200, "GET", "/api/sandbox/sandboxes", as(alice), nil, &list)
	if len(list.Sandboxes) != 1 || list.Sandboxes[0].ID != sb.ID {
		t.Errorf("alice's list: %+v", list)
	}
	want(200, "GET", "/api/sandbox/sandboxes", as(bob), nil, &list)
	if len(list.Sandboxes) != 0 {
		t.Errorf("bob's list: %+v", list)
	}
	// A port, by path.
	want(201, "POST", base+"/processes", as(alice), map[string]any{"command": "python3 -m http.server 8000 --bind 127.0.0.1", "cwd": "site", "background": true}, nil)
	var page []byte
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		st, body := call("GET", base+"/ports/8000/hello.txt", as(alice), nil)
		if st == 200 {
			page = body
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sandbox's port: %d %s", st, body)
		}
	}
	if string(page) != "hello through the cluster" {
		t.Errorf("through the port: %q", page)
	}

	// The same port by Host (E2B's getHost), and a terminal over a
	// WebSocket: both through the tunnel.
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/hello.txt", nil)
	req.Host = "8000-" + sb.ID + ".sandbox.localhost"
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Error(err)
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "hello through the cluster" {
			t.Errorf("the port by Host: %d %q", resp.StatusCode, body)
		}
	}
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+base+"/pty?cols=80&rows=24",
		&websocket.DialOptions{Subprotocols: []string{api.WSSubprotocol, api.WSBearerPrefix + alice}})
	if err != nil {
		t.Fatalf("the terminal: %v", err)
	}
	if err := ws.Write(ctx, websocket.MessageBinary, []byte("echo term-$((6*7))\n")); err != nil {
		t.Fatal(err)
	}
	var screen strings.Builder
	for !strings.Contains(screen.String(), "term-42") {
		_, data, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("the terminal: %v (so far %q)", err, screen.String())
		}
		screen.Write(data)
	}
	ws.Close(websocket.StatusNormalClosure, "")
	if _, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+base+"/pty",
		&websocket.DialOptions{Subprotocols: []string{api.WSSubprotocol, api.WSBearerPrefix + bob}}); err == nil {
		t.Error("bob opened a terminal on alice's sandbox")
	}

	// E2B's door: create by key, envd by the sandbox's token.
	var eb struct {
		SandboxID       string `json:"sandboxID"`
		EnvdAccessToken string `json:"envdAccessToken"`
	}
	want(201, "POST", "/v2/sandboxes", map[string]string{"X-API-KEY": alice}, map[string]any{"templateID": "base"}, &eb)
	envd := map[string]string{"E2b-Sandbox-Id": sb.ID, "X-Access-Token": sb.AccessToken}
	if got := string(want(200, "GET", "/files?path=/home/user/site/hello.txt", envd, nil, nil)); got != "hello through the cluster" {
		t.Errorf("envd's read of the native sandbox's file: %q", got)
	}
	if st, body := call("GET", "/files?path=/home/user/site/hello.txt", map[string]string{"E2b-Sandbox-Id": sb.ID, "X-Access-Token": eb.EnvdAccessToken}, nil); st != 401 {
		t.Errorf("another sandbox's token: %d %s", st, body)
	}
	var elist []map[string]any
	want(200, "GET", "/v2/sandboxes", map[string]string{"X-API-KEY": alice}, nil, &elist)
	if len(elist) != 2 {
		t.Errorf("E2B's list of alice's: %d sandboxes", len(elist))
	}

	// A snapshot, kept in the cluster.
	var snap struct {
		ID string `json:"id"`
	}
	want(201, "POST", base+"/snapshots", as(alice), map[string]any{"name": "in-cluster"}, &snap)

	// The worker stops: its sandboxes are out of reach, and say why.
	stop()
	waitWorkers(ctx, t, ac, 0, nil)
	st, body := call("GET", base, as(alice), nil)
	if st != 404 || !strings.Contains(string(body), "worker") {
		t.Errorf("a sandbox of a worker gone: %d %s", st, body)
	}
	if st, body := call("GET", "/health", envd, nil); st != 502 || !strings.Contains(string(body), "worker") {
		t.Errorf("envd of a sandbox of a worker gone: %d %s", st, body)
	}

	// The next worker on its data dir takes them over.
	stop = startWorker("worker-b")
	defer stop()
	waitWorkers(ctx, t, ac, 1, nil)
	want(200, "POST", base+"/processes", as(alice), map[string]any{"command": "cat site/hello.txt"}, &res)
	if res.Stdout != "hello through the cluster" {
		t.Errorf("after the take-over: %+v", res)
	}
	want(204, "DELETE", base, as(alice), nil, nil)
	want(204, "DELETE", "/sandboxes/"+eb.SandboxID, map[string]string{"X-API-KEY": alice}, nil, nil)
	if st, body := call("GET", base, as(alice), nil); st != 404 {
		t.Errorf("a sandbox killed: %d %s", st, body)
	}

	// The snapshot starts a sandbox on a worker of another host (its own
	// data dir, which never had it): taken from the cluster's store.
	ccfg := cfg
	ccfg.DataDir = t.TempDir()
	cx, err := local.NewExecutor(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	stopC := startWorkerOn("worker-c", ccfg, cx)
	defer stopC()
	stop()
	waitWorkers(ctx, t, ac, 1, nil)
	var snaps struct {
		Snapshots []struct {
			ID    string   `json:"id"`
			Names []string `json:"names"`
		} `json:"snapshots"`
	}
	want(200, "GET", "/api/sandbox/snapshots", as(alice), nil, &snaps)
	if len(snaps.Snapshots) != 1 || snaps.Snapshots[0].ID != snap.ID {
		t.Errorf("alice's snapshots through the API node: %+v", snaps)
	}
	want(200, "GET", "/api/sandbox/snapshots", as(bob), nil, &snaps)
	if len(snaps.Snapshots) != 0 {
		t.Errorf("bob's snapshots: %+v", snaps)
	}
	if st, body := call("POST", "/api/sandbox/sandboxes", as(bob), map[string]any{"snapshot": snap.ID}); st != 404 {
		t.Errorf("bob's create from alice's snapshot: %d %s", st, body)
	}
	want(201, "POST", "/api/sandbox/sandboxes", as(alice), map[string]any{"snapshot": snap.ID}, &sb)
	want(200, "POST", "/api/sandbox/sandboxes/"+sb.ID+"/processes", as(alice), map[string]any{"command": "cat site/hello.txt"}, &res)
	if res.Stdout != "hello through the cluster" {
		t.Errorf("a sandbox from the snapshot on another worker: %+v", res)
	}
	if st, body := call("DELETE", "/api/sandbox/snapshots/"+snap.ID, as(bob), nil); st != 404 {
		t.Errorf("bob's delete of alice's snapshot: %d %s", st, body)
	}
	want(204, "DELETE", "/api/sandbox/snapshots/"+snap.ID, as(alice), nil, nil)
	if st, body := call("POST", "/api/sandbox/sandboxes", as(alice), map[string]any{"snapshot": snap.ID}); st != 404 {
		t.Errorf("a create from a deleted snapshot: %d %s", st, body)
	}
}
