package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/http"
	"os"
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
