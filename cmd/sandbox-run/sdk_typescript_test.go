package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestTypeScriptSDK builds the TypeScript SDK (clients/typescript) in a
// copy of its own and runs its tests (node --test) against a real serve
// with an API key: every method, from Node, over HTTP, SSE and the
// WebSocket, and secrets against a stand-in API the tests start on a port
// of this machine the server allows as host.sandbox.internal:PORT
// (sdkTestPort). It needs node (20 or later) and npm, which reach the npm
// registry for the SDK's one dev dependency (typescript).
func TestTypeScriptSDK(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the SDK's npm install, build and tests take a while")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the TypeScript SDK's tests need Node 20 or later")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm is not installed: the TypeScript SDK's tests need it")
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		t.Skipf("node --version: %v", err)
	}
	version := strings.TrimSpace(string(out))
	major, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(version, "v"), ".", 2)[0])
	if major < 20 {
		t.Skipf("node %s: the TypeScript SDK needs Node 20 or later", version)
	}

	src, err := filepath.Abs(filepath.Join("..", "..", "clients", "typescript"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "typescript")
	if err := copyTypeScriptSDK(src, dir); err != nil {
		t.Fatalf("copy %s: %v", src, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	run := func(env []string, name string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "npm_config_update_notifier=false", "npm_config_fund=false", "npm_config_audit=false")
		cmd.Env = append(cmd.Env, env...)
		cmd.WaitDelay = 10 * time.Second
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, b)
		}
		return string(b)
	}

	// The committed lock file pins the dev dependencies.
	install := []string{"ci"}
	if _, err := os.Stat(filepath.Join(dir, "package-lock.json")); err != nil {
		install = []string{"install"}
	}
	run(nil, npm, append(install, "--no-audit", "--no-fund")...)
	run(nil, npm, "exec", "--", "tsc", "-p", ".")
	for _, f := range []string{"index.js", "index.d.ts", "client.js", "client.d.ts"} {
		if _, err := os.Stat(filepath.Join(dir, "dist", f)); err != nil {
			t.Fatalf("tsc built no dist/%s: %v", f, err)
		}
	}

	// Node 20 has a WebSocket behind a flag (22 has one by default).
	var nodeArgs []string
	const hasWS = "process.exit(typeof WebSocket === 'function' ? 0 : 1)"
	wsAvailable := exec.Command(node, "-e", hasWS).Run() == nil
	if !wsAvailable && exec.Command(node, "--experimental-websocket", "-e", hasWS).Run() == nil {
		nodeArgs = append(nodeArgs, "--experimental-websocket")
		wsAvailable = true
	}

	b := make([]byte, 16)
	rand.Read(b)
	key := hex.EncodeToString(b)
	port := sdkTestPort(t)
	srv := startServe(t, []string{"SANDBOX_RUN_API_KEYS=sdk=" + key, "SANDBOX_RUN_NETWORK_ALLOW=host.sandbox.internal:" + port})
	checkNotOnPort(t, srv, port)
	nodeArgs = append(nodeArgs, "--test", "--test-timeout=300000", "test/")
	output := run([]string{"SANDBOX_RUN_URL=" + srv.url, "SANDBOX_RUN_API_KEY=" + key, "SANDBOX_RUN_TEST_PORT=" + port}, node, nodeArgs...)
	t.Logf("node %s:\n%s", strings.Join(nodeArgs, " "), output)
	if wsAvailable && strings.Contains(output, "no global WebSocket") {
		t.Errorf("node has a WebSocket, but the interactive tests were skipped")
	}
	if !strings.Contains(output, "README examples, verbatim") {
		t.Errorf("the README examples did not run")
	}
	if !strings.Contains(output, "secrets: put, list, used by runs without being seen, delete") {
		t.Errorf("the secrets' test did not run")
	}
	if !strings.Contains(output, "live sandbox: secrets, its network changed while it runs") {
		t.Errorf("the live sandbox secrets' test did not run")
	}
	if !strings.Contains(output, "secrets: an interpreter session's cells see the placeholder") {
		t.Errorf("the interpreter session secrets' test did not run")
	}
	checkNoSecretValues(t, srv)
	// Leaving a stream early closed its connection: the server killed the run.
	killed := false
	for _, line := range strings.Split(srv.stderr.String(), "\n") {
		if strings.Contains(line, `"via":"sse"`) && strings.Contains(line, `"limit":"canceled"`) {
			killed = true
		}
	}
	if !killed {
		t.Errorf("no streamed run was canceled: a stream left early must kill its run\n%s", srv.stderr)
	}
}

// copyTypeScriptSDK copies the SDK's sources (not its node_modules or dist) to dst.
func copyTypeScriptSDK(src, dst string) error {
	return copyTree(src, dst, func(rel string, d fs.DirEntry) bool {
		return rel == "node_modules" || rel == "dist" || strings.HasPrefix(d.Name(), ".readme-")
	})
}
