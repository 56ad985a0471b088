package mcp

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/api"
)

// serviceConfig is a server with one worker and an admin key, to watch
// what /mcp and REST share.
func serviceConfig(t *testing.T) api.Config {
	cfg := api.DefaultConfig()
	cfg.Addr = "127.0.0.1:0"
	cfg.Workers, cfg.Queue = 1, 8
	cfg.Keys = []api.APIKey{{ID: "one", Key: "key-one"}, {ID: "ops", Key: "key-ops", Scopes: []string{api.ScopeAdmin}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func post(ctx context.Context, url, path, key, body string, header map[string]string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", url+path, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// mcpCall posts one tools/call of execute_code to /mcp, stateless.
func mcpCall(ctx context.Context, url, code, version string) (int, string, error) {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"execute_code","arguments":{"language":"bash","code":%q,"limits":{"timeout_seconds":60}}}}`, code)
	return post(ctx, url, "/mcp", "key-one", body, map[string]string{
		"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": version})
}

func executions(t *testing.T, url string) float64 {
	t.Helper()
	req, _ := http.NewRequest("GET", url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer key-ops")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	total := 0.0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "sandbox_run_executions_total{") {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			total += v
		}
	}
	return total
}

// TestMCPSharesTheRunService: /mcp runs through the server's run service:
// with one worker a REST run and an MCP run of 1.5 s each take two rounds,
// and the MCP run is counted in /metrics like the REST one.
func TestMCPSharesTheRunService(t *testing.T) {
	url := serveAPI(t, serviceConfig(t))
	before := executions(t, url)
	var wg sync.WaitGroup
	var restStatus, mcpStatus int
	var restBody, mcpBody string
	start := time.Now()
	wg.Add(2)
	go func() {
		defer wg.Done()
		restStatus, restBody, _ = post(context.Background(), url, "/api/sandbox/execute", "key-one",
			`{"language":"bash","code":"sleep 1.5; echo rest","timeout_seconds":60}`, nil)
	}()
	go func() {
		defer wg.Done()
		mcpStatus, mcpBody, _ = mcpCall(context.Background(), url, "sleep 1.5; echo mcp", "2025-06-18")
	}()
	wg.Wait()
	took := time.Since(start)
	if restStatus != 200 || !strings.Contains(restBody, `"rest\n"`) {
		t.Fatalf("REST: %d %s", restStatus, restBody)
	}
	if mcpStatus != 200 || !strings.Contains(mcpBody, `mcp\\n`) {
		t.Fatalf("MCP: %d %s", mcpStatus, mcpBody)
	}
	if took < 3*time.Second {
		t.Errorf("a REST and an MCP run of 1.5 s took %v with one worker: they ran at once, beside the pool", took)
	}
	if grew := executions(t, url) - before; grew != 2 {
		t.Errorf("sandbox_run_executions_total grew by %v, want 2 (the MCP run counted too)", grew)
	}
}

// TestMCPClientGoneKillsRun: a /mcp client that goes away stops its run,
// whatever protocol version it negotiated.
func TestMCPClientGoneKillsRun(t *testing.T) {
	url := serveAPI(t, serviceConfig(t))
	for _, version := range []string{"2025-11-25", "2025-06-18", "2025-03-26"} {
		marker := fmt.Sprintf("mcp-gone-%d-%s", os.Getpid(), version)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			mcpCall(ctx, url, "exec -a "+marker+" sleep 60", version)
		}()
		if !waitFor(60*time.Second, func() bool { return processes(marker) > 0 }) {
			cancel()
			t.Fatalf("%s: the run never started", version)
		}
		cancel()
		<-done
		if !waitFor(10*time.Second, func() bool { return processes(marker) == 0 }) {
			t.Errorf("protocol %s: the run goes on 10 s after its client went away", version)
		}
	}
}

func waitFor(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// processes counts the host's processes whose command line starts with
// marker.
func processes(marker string) int {
	entries, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && bytes.HasPrefix(b, []byte(marker)) {
			n++
		}
	}
	return n
}
