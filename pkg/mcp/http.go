package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
)

// NewHandler serves MCP over the streamable HTTP transport, stateless (each
// POST stands alone; GET and DELETE answer 405) with JSON answers.
// Sessions of the tools end after cfg.SessionIdleSeconds without a call and
// belong to the API key that created them; the HTTP server mounting it
// checks the key (execute scope) and gives the caller in the request's
// context (runner.CallerOf); each run passes the run service's door. Executions
// run through svc, the API server's run service: the pool, the drain and
// the metrics are those of every other transport.
func NewHandler(cfg config.Config, svc *runner.Service, log *slog.Logger) http.Handler {
	s := newServer(cfg, svc, log)
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.mcp },
		&sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true, MaxRequestBodyBytes: cfg.MaxBodyBytes,
			// With API keys a request must carry one: a page that rebinds
			// a name to 127.0.0.1 has none, and a reverse proxy on the
			// same host must be able to pass its own Host.
			DisableLocalhostProtection: len(cfg.Keys) > 0})
	// A client that goes away must stop its run, whatever protocol version
	// it negotiated (the SDK cancels a tool's context for some only): each
	// POST's context is found again by a header only this handler sets.
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := newCallID()
		s.calls.Store(id, r.Context())
		defer s.calls.Delete(id)
		r.Header = r.Header.Clone()
		r.Header.Set(callHeader, id)
		h.ServeHTTP(w, r)
	})
}

// callHeader carries the id of the HTTP request a tool call came in (set
// here, whatever the client sent).
const callHeader = "X-Sandbox-Run-Call"

func newCallID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// bind ties ctx to the HTTP request the call came in, if any: when that
// request's client goes away (or the server gives up on it), the returned
// context ends and the run is killed. stop must be called.
func (s *Server) bind(ctx context.Context, req *sdk.CallToolRequest) (_ context.Context, stop func()) {
	if req == nil || req.Extra == nil || req.Extra.Header == nil {
		return ctx, func() {}
	}
	v, ok := s.calls.Load(req.Extra.Header.Get(callHeader))
	if !ok {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancel(runner.WithCaller(ctx, runner.CallerOf(v.(context.Context))))
	unhook := context.AfterFunc(v.(context.Context), cancel)
	return ctx, func() {
		unhook()
		cancel()
	}
}
