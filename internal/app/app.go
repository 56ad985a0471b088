// Package app is the composition of sandbox-run's HTTP server: which
// transports it mounts beside the native API, each a sibling over the one
// run service (pkg/runner). It is wiring only: the one place that names
// them all. Below it are the commands' other parts (cli, clusternode,
// imagecmd, repl, sandboxcmd, secretcmd); internal/lib holds the helpers pkg/ may use and
// internal/testkit the test harnesses.
package app

import (
	"github.com/sandbox-run/sandbox-run/pkg/api"
	"github.com/sandbox-run/sandbox-run/pkg/e2b"
	"github.com/sandbox-run/sandbox-run/pkg/judge0"
	"github.com/sandbox-run/sandbox-run/pkg/mcp"
	"github.com/sandbox-run/sandbox-run/pkg/piston"
)

// Transports are the transports every server mounts besides the native
// API: Judge0 CE under /judge0, Piston v2 under /piston, MCP at /mcp, and
// the E2B door at the root (live sandboxes for E2B's SDKs).
func Transports() []api.Option {
	return []api.Option{
		api.Mount(judge0.Prefix, judge0.New),
		api.Mount(piston.Prefix, piston.New),
		api.Mount("/mcp", mcp.NewHandler),
		api.MountRoutes(e2b.New, e2b.Keyed, e2b.Public),
	}
}
