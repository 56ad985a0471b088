// Package e2b is the E2B door: live sandboxes (pkg/live, through the run
// service's door) in the protocol the unmodified `e2b` and
// `@e2b/code-interpreter` SDKs speak, at the server's root, so that they
// work with E2B_API_URL and E2B_SANDBOX_URL set to the server's URL:
//
//   - the control plane (POST /v2/sandboxes, GET /v2/sandboxes,
//     /sandboxes/{id}...), behind the server's API keys (the SDKs send
//     theirs as X-API-KEY), JSON errors {"code", "message"};
//   - envd, the in-sandbox daemon's Connect-JSON services process.Process
//     and filesystem.Filesystem, GET/POST /files and GET /health, routed by
//     the E2b-Sandbox-Id header and allowed by the sandbox's access token
//     (X-Access-Token), not by a key;
//   - the code interpreter's /execute and /contexts, on interpreter kernels
//     running in the sandbox;
//   - a sandbox's ports: a request to Host PORT-ID.<domain> reaches port
//     PORT in sandbox ID's own network namespace.
//
// See ../shared/E2B-PROTOCOL.md for the wire format. The package decodes
// and encodes; the live sandboxes are the run service's.
package e2b

import (
	"crypto/subtle"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/live"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
)

// EnvdVersion is the envd version the door answers as: the SDKs turn on
// features by it (0.6.4: file metadata, watch options, octet-stream
// uploads, closeStdin).
const EnvdVersion = "0.6.4"

// Keyed are the door's paths behind the server's API keys (the control
// plane); Public those it authenticates itself (a sandbox's calls, by its
// access token).
var (
	Keyed  = []string{"/v2/sandboxes", "/v2/sandboxes/", "/sandboxes", "/sandboxes/", "/snapshots", "/templates/"}
	Public = []string{"/process.Process/", "/filesystem.Filesystem/", "/files", "/health", "/execute", "/contexts", "/contexts/"}
)

// Door serves the E2B protocol over a run service's live sandboxes.
type Door struct {
	svc    *runner.Service
	log    *slog.Logger
	domain string
	mux    *http.ServeMux

	mu       sync.Mutex
	contexts map[string]*contexts // code contexts, by sandbox id
}

// New is the door over svc, for api.MountRoutes(New, Keyed, Public).
func New(cfg config.Config, svc *runner.Service, log *slog.Logger) http.Handler {
	d := &Door{svc: svc, log: log, domain: cfg.Live.Domain, mux: http.NewServeMux(), contexts: map[string]*contexts{}}
	d.routeControl()
	d.routeEnvd()
	d.routeInterpreter()
	return d
}

// ServeHTTP serves a sandbox's ports by Host, the rest by path.
func (d *Door) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if port, id, ok := portHost(r.Host); ok {
		d.proxy(w, r, id, port)
		return
	}
	d.mux.ServeHTTP(w, r)
}

// Refuse answers a request refused before the door (a missing or wrong
// key) as the control plane answers errors: the SDKs read the body's code.
func (d *Door) Refuse(w http.ResponseWriter, status int, msg string) {
	writeError(w, status, msg)
}

// writeError is the control plane's error: {"code": status, "message"}.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"code": status, "message": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// sandboxOf is the sandbox a call to envd or the code interpreter names
// (E2b-Sandbox-Id), once the call shows its access token; ok false when it
// was answered (404, 401).
func (d *Door) sandboxOf(w http.ResponseWriter, r *http.Request, fail func(http.ResponseWriter, int, string)) (*live.Sandbox, bool) {
	m := d.svc.Live()
	id := r.Header.Get("E2b-Sandbox-Id")
	if id == "" {
		id = r.URL.Query().Get("sandbox_id")
	}
	if m == nil || id == "" {
		fail(w, http.StatusNotFound, "no sandbox named: send the E2b-Sandbox-Id header")
		return nil, false
	}
	sb, err := m.Find(id)
	if err != nil {
		// 502 is how the SDKs learn that a sandbox is gone.
		fail(w, http.StatusBadGateway, "sandbox "+id+" is not running")
		return nil, false
	}
	tok := r.Header.Get("X-Access-Token")
	if tok == "" { // the code interpreter sends it on /execute only
		tok = r.Header.Get("E2B-Traffic-Access-Token")
	}
	if subtle.ConstantTimeCompare([]byte(tok), []byte(sb.Token)) != 1 && !signedURL(r, sb) {
		fail(w, http.StatusUnauthorized, "this sandbox's calls need its access token (X-Access-Token)")
		return nil, false
	}
	return sb, true
}

// caller is the control plane's caller (the server's authentication put it
// in the context).
func caller(r *http.Request) runner.Caller { return runner.CallerOf(r.Context()) }

// home is where relative paths lead, and commands start without a cwd:
// E2B's user's home (in a live sandbox, /work by that name).
const home = "/home/user"

// abs is p made absolute against the home directory.
func abs(p string) string {
	if p == "" {
		return home
	}
	if strings.HasPrefix(p, "/") {
		return p
	}
	return home + "/" + p
}
