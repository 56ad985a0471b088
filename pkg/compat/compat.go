// Package compat links the peers' APIs into every api.Server: Judge0 CE
// under /judge0 (pkg/judge0) and Piston v2 under /piston (pkg/piston). A
// command imports it for their side effect.
package compat

import (
	_ "github.com/sandbox-run/sandbox-run/pkg/judge0" // /judge0
	_ "github.com/sandbox-run/sandbox-run/pkg/piston" // /piston
)
