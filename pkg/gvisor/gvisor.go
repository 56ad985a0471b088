// Package gvisor runs a sandbox.Spec under gVisor (runsc): the second
// wall. The program's system calls go to gVisor's user-space kernel (the
// Sentry), not the host's; the host sees runsc's own processes only. A run
// is an OCI bundle made for it: an empty read-only root with the spec's
// mounts bound read-only, /work the engine's size-bounded tmpfs
// (sandbox.NewWork) bound read-write, /tmp a tmpfs, no network (runsc
// --network=none) or, for a run with a Spec.Network, tun0 in a namespace
// made for it (runsc --network=sandbox), as a user without privileges. Its limits are a cgroup
// the package makes for it (memory, processes, CPU), which runsc joins and
// leaves in place, so that what the run used and whether the kernel killed
// it for memory are read from it afterwards; the wall time, the CPU time
// and the output are watched here.
package gvisor

import (
	"errors"
	"os"
	"os/exec"
)

// Config is how runs are made.
type Config struct {
	// Runsc is the runsc binary (default: runsc on PATH, else
	// /usr/local/bin/runsc, else /usr/local/lib/sandbox-run/runsc).
	Runsc string
	// Platform is gVisor's platform (default systrap).
	Platform string
	// Dir keeps the bundles of the runs going on and runsc's state.
	Dir string
	// CgroupParent is where the runs' cgroups go, relative to each
	// hierarchy's root (default: this process's own cgroup).
	CgroupParent string
	// Pool is how many sandboxes are kept booted ahead for each kind of
	// run once one has run, up to four times as many for a kind that ran
	// out in the last minute (0: none; the process that runs them must call ShimMain
	// first, for the shim is its own binary).
	Pool int
}

// ErrNoRunsc is a host where runsc is not installed.
var ErrNoRunsc = errors.New("gvisor: runsc is not installed (scripts/install-gvisor.sh builds it)")

// Find is the runsc binary: path when set, else runsc on PATH, else the
// places scripts/install-gvisor.sh puts it.
func Find(path string) (string, error) {
	if path != "" {
		return exec.LookPath(path)
	}
	if p, err := exec.LookPath("runsc"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/local/bin/runsc", "/usr/local/lib/sandbox-run/runsc"} {
		if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", ErrNoRunsc
}

// uid is the program's user inside gVisor's kernel (and the owner of
// /work on the host, where runsc's gofer writes as it).
const uid = 1000
