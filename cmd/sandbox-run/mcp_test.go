package main

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func mcpCall(t *testing.T, cs *sdk.ClientSession, tool string, args map[string]any) (map[string]any, string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	out, _ := res.StructuredContent.(map[string]any)
	return out, text.String(), res.IsError
}

// mcpSession checks what a client of `sandbox-run mcp` or of /mcp sees:
// the tools, a run, an error and a session round trip.
func mcpSession(t *testing.T, cs *sdk.ClientSession) {
	t.Helper()
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		if s, _ := tool.InputSchema.(map[string]any); s["type"] != "object" {
			t.Errorf("%s: input schema %v", tool.Name, tool.InputSchema)
		}
	}
	for _, want := range []string{"execute_code", "list_languages", "create_session", "run_in_session", "list_session_files", "read_session_file", "close_session"} {
		if !slices.Contains(names, want) {
			t.Errorf("tool %s missing: %v", want, names)
		}
	}
	out, text, isErr := mcpCall(t, cs, "execute_code", map[string]any{"language": "python", "code": "print(6*7)"})
	if isErr || out["stdout"] != "42\n" || out["status"] != "completed" || !strings.Contains(text, "42") {
		t.Errorf("print(6*7): %v %q", out, text)
	}
	if _, text, isErr := mcpCall(t, cs, "execute_code", map[string]any{"language": "cobol-2099", "code": "x"}); !isErr || !strings.Contains(text, "Unsupported language") {
		t.Errorf("cobol-2099: isError %v %q", isErr, text)
	}
	sess, text, isErr := mcpCall(t, cs, "create_session", map[string]any{"language": "python"})
	id, _ := sess["session_id"].(string)
	if isErr || id == "" {
		t.Fatalf("create_session: %q", text)
	}
	if out, text, _ := mcpCall(t, cs, "run_in_session", map[string]any{"session_id": id, "code": "open('result.txt','w').write('from the first run')"}); out["status"] != "completed" {
		t.Fatalf("run_in_session: %q", text)
	}
	if out, text, _ := mcpCall(t, cs, "run_in_session", map[string]any{"session_id": id, "code": "print(open('result.txt').read())"}); out["stdout"] != "from the first run\n" {
		t.Errorf("second run_in_session: %q", text)
	}
	if _, text, _ := mcpCall(t, cs, "list_session_files", map[string]any{"session_id": id}); !strings.Contains(text, `"path":"result.txt"`) {
		t.Errorf("list_session_files: %q", text)
	}
	if out, text, _ := mcpCall(t, cs, "read_session_file", map[string]any{"session_id": id, "path": "result.txt"}); out["content"] != "from the first run" {
		t.Errorf("read_session_file: %q", text)
	}
	if out, text, _ := mcpCall(t, cs, "close_session", map[string]any{"session_id": id}); out["closed"] != true {
		t.Errorf("close_session: %q", text)
	}
	if _, text, isErr := mcpCall(t, cs, "list_session_files", map[string]any{"session_id": id}); !isErr || !strings.Contains(text, "unknown session") {
		t.Errorf("closed session: %v %q", isErr, text)
	}
}

// TestMCPStdio runs `sandbox-run mcp` under the SDK's client: a real MCP
// host's view. Closing the client (its stdin) ends the process cleanly.
func TestMCPStdio(t *testing.T) {
	cmd := cliCommand(t, nil, "mcp")
	var stderr syncBuffer
	cmd.Stderr = &stderr
	client := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "0"}, nil)
	cs, err := client.Connect(context.Background(), &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr.String())
	}
	if info := cs.InitializeResult(); info == nil || info.ServerInfo.Name != "sandbox-run" {
		t.Errorf("server info: %+v", info)
	}
	mcpSession(t, cs)
	if err := cs.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 0 {
		t.Errorf("sandbox-run mcp ended with %v:\n%s", cmd.ProcessState, stderr.String())
	}
	// Logs go to stderr (stdout is the protocol: the client would have
	// failed on anything else there).
	if !strings.Contains(stderr.String(), `"msg":"execution"`) || !strings.Contains(stderr.String(), `"via":"mcp"`) {
		t.Errorf("no execution logged on stderr:\n%s", stderr.String())
	}
}

// TestMCPStdioPiped writes every message and closes stdin at once, as
// `printf ... | sandbox-run mcp` does: every call is answered first.
func TestMCPStdioPiped(t *testing.T) {
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"execute_code","arguments":{"language":"python","code":"print(6*7)"}}}`,
	}, "\n") + "\n"
	r := runCLI(t, in, "mcp")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3 answers:\n%s", len(lines), r.stdout)
	}
	var last struct {
		ID     int `json:"id"`
		Result struct {
			StructuredContent map[string]any `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(lines[2]), &last); err != nil || last.ID != 3 || last.Result.StructuredContent["stdout"] != "42\n" {
		t.Errorf("tools/call answer: %v %s", err, lines[2])
	}
	if !strings.Contains(lines[1], `"name":"execute_code"`) {
		t.Errorf("tools/list answer: %s", lines[1])
	}
	if r := runCLI(t, "", "mcp", "--no-such-flag"); r.code != exitUsage {
		t.Errorf("bad flag: exit %d", r.code)
	}
}

// bearerTransport adds an API key to every request.
type bearerTransport struct{ key string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// TestServeMCP: `sandbox-run serve` answers MCP at /mcp, behind its keys.
func TestServeMCP(t *testing.T) {
	srv := startServe(t, []string{"SANDBOX_RUN_API_KEYS=agent=s3cret"})
	resp, err := http.Post(srv.url+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/mcp without a key: %d", resp.StatusCode)
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "0"}, nil)
	cs, err := client.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: srv.url + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{"s3cret"}}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, srv.stderr)
	}
	defer cs.Close()
	mcpSession(t, cs)
}
