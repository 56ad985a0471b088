package mcp

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// addTool adds a tool whose input schema every MCP host can fill: the
// schema inferred from In with each type a single name. The inference
// makes a slice, map or pointer field ["null", "array"] (Go's nil
// marshals as null); hosts and inspectors that read "type" as one string
// cannot offer such a field. An optional field is simply not required
// (omitempty), and a null the client sends for one is taken as absent
// (dropNulls).
func addTool[In, Out any](s *sdk.Server, t *sdk.Tool, h sdk.ToolHandlerFor[In, Out]) {
	schema, err := jsonschema.For[In](nil)
	if err != nil {
		panic("mcp: the input schema of " + t.Name + ": " + err.Error()) // a programming error, caught by every test
	}
	singleTypes(schema)
	t.InputSchema = schema
	sdk.AddTool(s, t, h)
}

// singleTypes replaces every type list of s (and of the schemas in it)
// with its one type other than null.
func singleTypes(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if types := slices.DeleteFunc(slices.Clone(s.Types), func(t string) bool { return t == "null" }); len(types) == 1 {
		s.Type, s.Types = types[0], nil
	}
	singleTypes(s.Items)
	singleTypes(s.AdditionalProperties)
	for _, p := range s.Properties {
		singleTypes(p)
	}
}

// dropNulls is middleware that removes the null members of a tools/call's
// arguments (at any depth) before the SDK checks them against the input
// schema: a client that sends null for an optional field means it absent.
func dropNulls(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		if r, ok := req.(*sdk.CallToolRequest); ok && r.Params != nil && len(r.Params.Arguments) > 0 {
			var v any
			if json.Unmarshal(r.Params.Arguments, &v) == nil {
				if data, err := json.Marshal(withoutNulls(v)); err == nil {
					r.Params.Arguments = data
				}
			}
		}
		return next(ctx, method, req)
	}
}

func withoutNulls(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if x == nil {
				delete(v, k)
			} else {
				v[k] = withoutNulls(x)
			}
		}
	case []any:
		for i, x := range v {
			v[i] = withoutNulls(x)
		}
	}
	return v
}
