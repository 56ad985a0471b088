package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeRestartKeepsLiveSandboxes: `sandbox-run serve` stopped by
// SIGTERM leaves its live sandboxes running, with their processes; a new
// `serve` on the same data dir takes them over (what issue 32 asks, and
// E2B's users lose at every restart of its orchestrator).
func TestServeRestartKeepsLiveSandboxes(t *testing.T) {
	data := t.TempDir()
	home, _ := os.UserHomeDir()
	cache := filepath.Join(home, ".cache", "sandbox-run-test", "cache")
	os.MkdirAll(cache, 0o755)
	if err := os.Symlink(cache, filepath.Join(data, "cache")); err != nil {
		t.Fatal(err)
	}
	first := startServe(t, nil, "--data-dir", data)
	var sb struct{ SandboxID, EnvdAccessToken string }
	var body string
	if st := liveCall(t, "POST", first.url+"/v2/sandboxes", "", nil, `{"timeout": 600}`, &body); st != 201 {
		t.Fatalf("create: %d %s\n%s", st, body, first.stderr)
	}
	json.Unmarshal([]byte(body), &sb)
	envd := map[string]string{"E2b-Sandbox-Id": sb.SandboxID, "X-Access-Token": sb.EnvdAccessToken}
	// A counter in the background (the stream ends when the shell has
	// started it), and a file.
	start := func(url, cmd string) string {
		msg, _ := json.Marshal(map[string]any{"process": map[string]any{"cmd": "/bin/bash", "args": []string{"-l", "-c", cmd}}, "stdin": false})
		env := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg)))
		h := map[string]string{"Content-Type": "application/connect+json"}
		for k, v := range envd {
			h[k] = v
		}
		var out string
		liveCall(t, "POST", url+"/process.Process/Start", "", h, string(append(env, msg...)), &out)
		return out
	}
	start(first.url, `nohup bash -c 'i=0; while true; do i=$((i+1)); echo $i > /tmp/n.new; mv /tmp/n.new /tmp/n; sleep 0.05; done' >/dev/null 2>&1 &`)
	start(first.url, `echo kept > /home/user/kept.txt`)
	read := func(url, path string) string {
		var out string
		if st := liveCall(t, "GET", url+"/files?path="+path, "", envd, "", &out); st != 200 {
			t.Fatalf("GET %s: %d %q", path, st, out)
		}
		return out
	}
	deadline := time.Now().Add(time.Minute)
	for !strings.HasSuffix(read(first.url, "/home/user/kept.txt"), "\n") || liveCall(t, "GET", first.url+"/files?path=/tmp/n", "", envd, "", new(string)) != 200 {
		if time.Now().After(deadline) {
			t.Fatal("the counter never wrote")
		}
		time.Sleep(50 * time.Millisecond)
	}
	first.stop(t)
	if first.err != nil {
		t.Fatalf("serve ended with %v:\n%s", first.err, first.stderr)
	}

	second := startServe(t, nil, "--data-dir", data)
	if !strings.Contains(second.stderr.String(), `"live sandboxes taken over","count":1`) {
		t.Fatalf("the new server took nothing over:\n%s", second.stderr)
	}
	if got := read(second.url, "/home/user/kept.txt"); got != "kept\n" {
		t.Fatalf("the file after the restart: %q", got)
	}
	n := read(second.url, "/tmp/n")
	deadline = time.Now().Add(time.Minute)
	for read(second.url, "/tmp/n") == n {
		if time.Now().After(deadline) {
			t.Fatalf("the counter stopped at %q across the restart", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st := liveCall(t, "DELETE", second.url+"/sandboxes/"+sb.SandboxID, "", nil, "", nil); st != 204 {
		t.Fatalf("kill: %d", st)
	}
}

// liveCall sends an HTTP request; it decodes a JSON answer into out (a
// *string takes the body as it is) and returns the status.
func liveCall(t *testing.T, method, url, key string, headers map[string]string, body string, out any) int {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if body != "" && headers["Content-Type"] == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if key != "" {
		req.Header.Set("X-API-KEY", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	switch o := out.(type) {
	case nil:
	case *string:
		*o = string(b)
	default:
		if err := json.NewDecoder(bytes.NewReader(b)).Decode(out); err != nil {
			t.Fatalf("%s %s: %d %q", method, url, resp.StatusCode, b)
		}
	}
	return resp.StatusCode
}

// TestDocsLiveE2B runs docs/LIVE.md's example with the real npm e2b
// package (installed once into the test cache) against `serve`.
func TestDocsLiveE2B(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the e2b package's npm install takes a while")
	}
	node, err := exec.LookPath("node")
	npm, err2 := exec.LookPath("npm")
	if err != nil || err2 != nil {
		t.Skip("node and npm are needed to run E2B's SDK")
	}
	home, _ := os.UserHomeDir()
	dir := filepath.Join(home, ".cache", "sandbox-run-test", "e2b-npm")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "e2b", "package.json")); err != nil {
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"name": "docs-e2b", "private": true}`), 0o644)
		cmd := exec.Command(npm, "install", "--no-audit", "--no-fund", "e2b@2.51.0")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm install e2b: %v\n%s", err, out)
		}
	}
	srv := startServe(t, nil)
	script := filepath.Join(dir, "live-doc.mjs")
	if err := os.WriteFile(script, []byte(docBlock(t, "docs/LIVE.md", "## With E2B's SDKs", "js")), 0o644); err != nil {
		t.Fatal(err)
	}
	port := strings.TrimPrefix(srv.url, "http://127.0.0.1:")
	cmd := exec.Command(node, script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "E2B_API_URL="+srv.url, "E2B_SANDBOX_URL="+srv.url, "E2B_API_KEY=docs", "E2B_DOMAIN=sandbox.localhost:"+port)
	out, err := cmd.CombinedOutput()
	if want := docBlock(t, "docs/LIVE.md", "prints", "text"); err != nil || string(out) != want {
		t.Fatalf("node: %v\n%s\nthe docs show\n%s", err, out, want)
	}
}
