package api

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"unicode"
)

// TestOpenAPIForGenerators: the document is one that client generators
// (oapi-codegen, openapi-typescript; scripts/openapi-clients.sh runs both)
// take as it is: a unique operationId on every operation, callbacks'
// included; no Go identifier that oapi-codegen derives from an operation
// equal to another operation's or a schema's; a format on every integer
// and number; a relative server URL; and the execute endpoint's 200 with
// exactly one JSON media type (the typed JSON200 of generated clients)
// beside its text/event-stream variant.
func TestOpenAPIForGenerators(t *testing.T) {
	t.Parallel()
	var doc map[string]any
	if err := json.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}

	// servers: one relative URL, so that a client generated from the
	// document fetched from any server talks to that server.
	servers, _ := doc["servers"].([]any)
	if len(servers) != 1 {
		t.Errorf("servers %v, want one", servers)
	}
	for _, s := range servers {
		if u, _ := obj(s)["url"].(string); !strings.HasPrefix(u, "/") || strings.HasPrefix(u, "//") {
			t.Errorf("server url %q is not relative (want \"/\")", u)
		}
	}

	// Every operation, the callbacks' too.
	type op struct {
		where string
		op    map[string]any
	}
	var ops []op
	var collect func(prefix string, paths map[string]any)
	collect = func(prefix string, paths map[string]any) {
		for path, item := range paths {
			for method, o := range obj(item) {
				switch method {
				case "get", "put", "post", "delete", "options", "head", "patch", "trace":
				default:
					continue
				}
				where := prefix + strings.ToUpper(method) + " " + path
				ops = append(ops, op{where, obj(o)})
				for name, cb := range obj(obj(o)["callbacks"]) {
					collect(where+" callback "+name+": ", obj(cb))
				}
			}
		}
	}
	collect("", obj(doc["paths"]))
	if len(ops) < 20 {
		t.Fatalf("only %d operations found", len(ops))
	}

	// The Go identifiers oapi-codegen (types, client) declares: a type per
	// schema and per components/responses entry; per operation the
	// operation's name with these suffixes.
	suffixes := []string{"", "Params", "JSONBody", "JSONRequestBody", "Response", "CallbackRequest"}
	declared := map[string]string{} // identifier → what declares it
	declare := func(name, by string) {
		if prev, ok := declared[name]; ok && prev != by {
			t.Errorf("generated Go identifier %s from both %s and %s", name, prev, by)
			return
		}
		declared[name] = by
	}
	for _, kind := range []string{"schemas", "responses"} {
		for name := range obj(obj(doc["components"])[kind]) {
			declare(oapiGoName(name), "components/"+kind+"/"+name)
		}
	}
	ids := map[string]string{}
	for _, o := range ops {
		id, _ := o.op["operationId"].(string)
		if id == "" {
			t.Errorf("%s: no operationId", o.where)
			continue
		}
		if prev, ok := ids[id]; ok {
			t.Errorf("operationId %s of both %s and %s", id, prev, o.where)
		}
		ids[id] = o.where
		for _, s := range suffixes {
			declare(oapiGoName(id)+s, "operation "+id)
		}
	}

	// Formats: int32/int64 on integers, double/float on numbers.
	var formats func(where string, v any)
	formats = func(where string, v any) {
		switch v := v.(type) {
		case map[string]any:
			f, _ := v["format"].(string)
			switch v["type"] {
			case "integer":
				if f != "int64" && f != "int32" {
					t.Errorf("%s: integer with format %q, want int64 or int32", where, f)
				}
			case "number":
				if f != "double" && f != "float" {
					t.Errorf("%s: number with format %q, want double", where, f)
				}
			}
			ks := keys(v)
			sort.Strings(ks)
			for _, k := range ks {
				formats(where+"/"+k, v[k])
			}
		case []any:
			for i, x := range v {
				formats(fmt.Sprintf("%s/%d", where, i), x)
			}
		}
	}
	formats("#", doc)

	// POST /api/sandbox/execute 200: the result as application/json (what
	// a generated client types as JSON200), the stream as text/event-stream.
	content := obj(obj(obj(obj(obj(obj(doc["paths"])["/api/sandbox/execute"])["post"])["responses"])["200"])["content"])
	var jsonTypes []string
	for mt := range content {
		if mt == "application/json" || strings.HasSuffix(mt, "+json") {
			jsonTypes = append(jsonTypes, mt)
		}
	}
	if len(jsonTypes) != 1 || jsonTypes[0] != "application/json" {
		t.Errorf("execute 200: JSON media types %v, want application/json alone", jsonTypes)
	}
	if ref := obj(obj(content["application/json"])["schema"])["$ref"]; ref != "#/components/schemas/ExecuteResponse" {
		t.Errorf("execute 200 application/json schema $ref %v, want ExecuteResponse", ref)
	}
	sse := obj(obj(content["text/event-stream"])["schema"])
	desc, _ := sse["description"].(string)
	if sse["type"] != "string" {
		t.Errorf("execute 200 text/event-stream schema %v, want a string", sse)
	}
	for _, word := range []string{"Accept: text/event-stream", "StreamEvent", "`result`", "ExecuteResponse", "`error`"} {
		if !strings.Contains(desc, word) {
			t.Errorf("execute 200 text/event-stream description lacks %q: %s", word, desc)
		}
	}
}

// oapiGoName approximates oapi-codegen's identifier for a name: its
// alphanumeric runs, each with an upper-case first letter, joined.
func oapiGoName(s string) string {
	var b strings.Builder
	up := true
	for _, r := range s {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			up = true
			continue
		}
		if up {
			r = unicode.ToUpper(r)
			up = false
		}
		b.WriteRune(r)
	}
	return b.String()
}
