package mcp

import (
	"log/slog"
	"net/http"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandbox-run/sandbox-run/pkg/api"
)

// Every api.Server serves MCP at /mcp once this package is linked in (the
// sandbox-run binary links it for its mcp command).
func init() {
	api.RegisterHandler("/mcp", NewHandler)
}

// NewHandler serves MCP over the streamable HTTP transport, stateless (each
// POST stands alone; GET and DELETE answer 405) with JSON answers.
// Sessions of the tools end after cfg.SessionIdleSeconds without a call and
// belong to the API key that created them; the api.Server checks the key
// (execute scope) and its limits before a request gets here. Executions
// are bounded by a pool of cfg.Workers of this handler's own.
func NewHandler(cfg api.Config, x api.Executor, log *slog.Logger) http.Handler {
	s := newServer(cfg, x, log, seconds(cfg.SessionIdleSeconds))
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.mcp },
		&sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true, MaxRequestBodyBytes: cfg.MaxBodyBytes,
			// With API keys a request must carry one: a page that rebinds
			// a name to 127.0.0.1 has none, and a reverse proxy on the
			// same host must be able to pass its own Host.
			DisableLocalhostProtection: len(cfg.Keys) > 0})
}
