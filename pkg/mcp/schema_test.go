package mcp

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandbox-run/sandbox-run/pkg/local"
)

// TestResultSchemaTexts: the result schema the tools publish says what
// results hold: a signal gives exit_code -1 with signal naming it (not
// 128+N, which is only the CLI's exit code), and a failed compile step's own
// status is error_compile (timeout for its time limit, error_setup), never
// error_runtime.
func TestResultSchemaTexts(t *testing.T) {
	cs := inMemoryClient(t)
	ctx := context.Background()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	type prop struct {
		Description string          `json:"description"`
		Properties  map[string]prop `json:"properties"`
	}
	n := 0
	for _, tool := range tools.Tools {
		if tool.Name != "execute_code" && tool.Name != "run_in_session" {
			continue
		}
		n++
		b, _ := json.Marshal(tool.OutputSchema)
		var schema prop
		if err := json.Unmarshal(b, &schema); err != nil {
			t.Fatal(err)
		}
		run, compile := schema.Properties, schema.Properties["compile"].Properties
		for what, text := range map[string]string{"exit_code": run["exit_code"].Description, "signal": run["signal"].Description} {
			if !strings.Contains(text, "-1") || strings.Contains(text, "128") {
				t.Errorf("%s: %s says %q; want -1 (with signal), not 128+N", tool.Name, what, text)
			}
		}
		if text := compile["status"].Description; strings.Contains(text, "error_runtime") ||
			!strings.Contains(text, "error_compile") || !strings.Contains(text, "timeout") || !strings.Contains(text, "error_setup") {
			t.Errorf("%s: compile.status says %q", tool.Name, text)
		}
		if text := compile["exit_code"].Description; !strings.Contains(text, "-1") {
			t.Errorf("%s: compile.exit_code says %q", tool.Name, text)
		}
	}
	if n != 2 {
		t.Errorf("found %d of the two run tools", n)
	}
}

// TestInputSchemasSingleTypes: every tool's input schema names one type
// per property (hosts and the MCP Inspector that read "type" as a string
// cannot fill ["null", "array"]), and a null sent for an optional field is
// taken as absent.
func TestInputSchemasSingleTypes(t *testing.T) {
	cs := inMemoryClient(t)
	ctx := context.Background()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var walk func(where string, node any)
	arrays := 0
	walk = func(where string, node any) {
		switch node := node.(type) {
		case map[string]any:
			if types, ok := node["type"].([]any); ok {
				arrays++
				t.Errorf("%s: type %v", where, types)
			}
			for k, v := range node {
				walk(where+"."+k, v)
			}
		case []any:
			for _, v := range node {
				walk(where, v)
			}
		}
	}
	props := 0
	for _, tool := range tools.Tools {
		b, _ := json.Marshal(tool.InputSchema)
		var schema map[string]any
		json.Unmarshal(b, &schema)
		p, _ := schema["properties"].(map[string]any)
		props += len(p)
		walk(tool.Name, schema)
	}
	if props < 10 {
		t.Fatalf("the tools' input schemas have %d properties in all: not inferred?", props)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "execute_code", Arguments: map[string]any{
		"language": "bash", "code": `echo "args:$#"`, "args": nil, "limits": nil, "network": nil, "files": nil}})
	if err != nil || res.IsError || !strings.Contains(text(res), `args:0\n`) {
		t.Errorf("execute_code with null optional fields: %v %+v", err, res)
	}
}

// inMemoryClient is an SDK client connected in memory to a stdio-style
// server (New) of the test executor, for the test's life.
func inMemoryClient(t *testing.T) *sdk.ClientSession {
	t.Helper()
	s := New(testConfig(t), local.New(testExec), quiet)
	st, ct := sdk.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	go s.Run(ctx, st)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		cancel()
		s.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		cancel()
		s.Close()
	})
	return cs
}
