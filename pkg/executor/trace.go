package executor

import "github.com/sandbox-run/sandbox-run/pkg/sandbox"

// Trace is what the executor decided for one execution, for a person to
// read (the CLI's --verbose): the toolchain, the limits and mounts of each
// step, the toolchain cache a compile was given. It is not part of the
// result's JSON.
type Trace struct {
	// Toolchain is the binary that compiled or ran the program, Home its
	// installation directory.
	Toolchain, Home string
	// Source is the program's file in /work.
	Source string
	// Inputs counts the files placed in /work (the source, the request's
	// files, the session's).
	Inputs int
	// RunLimits are the limits of the run step, every default applied.
	RunLimits sandbox.Limits
	// Mounts are the run step's read-only mounts besides /work and /tmp.
	Mounts []sandbox.Mount
	// CompileLimits are the compile step's limits (nil for interpreted
	// languages); CompileCacheDir is the toolchain cache the compile saw
	// as a private copy-on-write overlay (Go's build cache), if any.
	CompileLimits   *sandbox.Limits
	CompileCacheDir string
}
