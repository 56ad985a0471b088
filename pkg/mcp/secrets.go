package mcp

// Secrets as MCP tools: list_secrets, and the secrets input of the tools
// that run code (execute_code, run_in_session).
//
// There is deliberately no tool that stores (or shows) a secret's value.
// A secret exists so that a program can use a credential without the
// credential passing through it; an agent driving these tools is in the
// same position as that program: whatever reaches it (a tool's arguments,
// a result) lands in its model's context, the host's transcript and logs,
// and can be repeated, summarized or sent on by a prompt injected into any
// text it reads. A value given to a tool would be exposed that way before
// it was ever sealed, and a tool that stored values would invite agents to
// ask their users for credentials in a chat. So secrets are put by their
// owner through the HTTP API (PUT /api/sandbox/secrets/{name}, the SDKs,
// the Go client); an agent only learns which secrets its API key has
// (names, hosts, headers) and names them in a run, whose program sees
// placeholders and whose egress alone handles the values.

import (
	"context"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandbox-run/sandbox-run/pkg/runner"
)

// SecretsInput is the (empty) input of list_secrets.
type SecretsInput struct{}

// SecretHeader is a header a secret is sent in.
type SecretHeader struct {
	Name   string `json:"name" jsonschema:"the header's name, e.g. Authorization"`
	Format string `json:"format,omitempty" jsonschema:"the header's value with {value} where the secret goes, e.g. Bearer {value} (absent: the secret alone)"`
}

// SecretInfo is a secret as list_secrets gives it: never its value.
type SecretInfo struct {
	Name    string        `json:"name" jsonschema:"the secret's name: give it in execute_code's secrets; the run's program finds a placeholder in the environment variable of this name"`
	Hosts   []string      `json:"hosts" jsonschema:"the hosts the value is sent to (api.example.com, *.example.com for subdomains, optionally with :PORT): the run's network.allow must let it reach them"`
	Header  *SecretHeader `json:"header,omitempty" jsonschema:"a header the server also sets to the secret on the requests to those hosts"`
	Created string        `json:"created" jsonschema:"when it was first stored (RFC 3339, UTC)"`
	Updated string        `json:"updated" jsonschema:"when it was last stored (RFC 3339, UTC)"`
}

// SecretsOutput is the output of list_secrets.
type SecretsOutput struct {
	Secrets []SecretInfo `json:"secrets" jsonschema:"the API key's secrets, by name; their values are never shown"`
}

func (s *Server) addSecretTools() {
	no := false
	addTool(s.mcp, &sdk.Tool{Name: "list_secrets", Title: "List secrets",
		Description: "The secrets of your API key that runs can use without seeing them: their names, the hosts each is sent to " +
			"and the header it goes in, never their values. Name them in execute_code's (or run_in_session's) secrets, with " +
			"network.allow covering their hosts: the program finds a placeholder in the environment variable of each name " +
			"(use it where the credential goes: a header, the URL, a request body), and the server puts the value in its place " +
			"in the program's HTTP and HTTPS requests to the secret's hosts. Secrets are stored by their owner through the " +
			"HTTP API (PUT /api/sandbox/secrets/{name}), never through these tools.",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &no}}, s.listSecrets)
}

func (s *Server) listSecrets(ctx context.Context, req *sdk.CallToolRequest, _ SecretsInput) (*sdk.CallToolResult, SecretsOutput, error) {
	ctx, stop := s.bind(ctx, req)
	defer stop()
	list, err := s.svc.ListSecrets(runner.CallerOf(ctx))
	if err != nil {
		return nil, SecretsOutput{}, err
	}
	out := SecretsOutput{Secrets: []SecretInfo{}}
	for _, sec := range list.Secrets {
		info := SecretInfo{Name: sec.Name, Hosts: sec.Hosts, Created: sec.Created.UTC().Format(time.RFC3339),
			Updated: sec.Updated.UTC().Format(time.RFC3339)}
		if h := sec.Header; h != nil {
			info.Header = &SecretHeader{Name: h.Name, Format: h.Format}
		}
		out.Secrets = append(out.Secrets, info)
	}
	return nil, out, nil
}
