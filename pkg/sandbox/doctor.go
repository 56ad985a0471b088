package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"
)

// Check is one finding about what the host offers the engine: what
// `sandbox-run doctor` prints.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	// Required checks decide whether the host can run sandboxes; the
	// others are information.
	Required bool `json:"required"`
}

// Diagnose checks the host (kernel, privileges, namespaces, seccomp,
// landlock), builds an engine with cfg and, if it could, says where its
// cgroups are and runs /bin/true in a sandbox. The engine is closed
// before it returns: nothing it made is left.
func Diagnose(cfg Config) []Check {
	checks := hostChecks()
	e, err := New(cfg)
	var setupErr *SetupError
	switch {
	case errors.As(err, &setupErr) && strings.HasPrefix(setupErr.Step, "cgroup"):
		// The message names what is missing and how to get it.
		return append(checks, Check{Name: "cgroups", Detail: err.Error(), Required: true})
	case err != nil:
		return append(checks, Check{Name: "sandbox engine", Detail: err.Error(), Required: true})
	}
	defer e.Close()
	cg := e.Cgroups()
	detail := fmt.Sprintf("cgroup v%d, controllers %s", cg.Version, strings.Join(cg.Controllers, ", "))
	for c, dir := range cg.Parents {
		if cg.Version == 2 || c == "memory" {
			detail += ", runs under " + dir
		}
	}
	checks = append(checks, Check{Name: "cgroups", OK: true, Detail: detail, Required: true})
	checks = append(checks, trialRun(e))
	e.Quiesce() // the trial's sandbox gone, and its uid slot free
	return append(checks, trialNetwork(e))
}

// trialNetwork runs /bin/true with a network device (Spec.Network), as a
// run whose request asks for network access gets one: information, since
// runs without network need none.
func trialNetwork(e *Engine) Check {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n := &Network{Address: netip.MustParsePrefix("10.77.0.2/24"), Gateway: netip.MustParseAddr("10.77.0.1"),
		Attach: func(tun *os.File) (func(), error) { return func() { tun.Close() }, nil }}
	res, err := e.Run(ctx, &Spec{Args: []string{"/bin/true"}, Mounts: SystemMounts, Env: []string{"PATH=/usr/bin:/bin"}, Network: n})
	c := Check{Name: "network access"}
	switch {
	case err != nil:
		c.Detail = fmt.Sprintf("not available (%v): requests that ask for network access fail; load the tun module (modprobe tun) for them", err)
	case res.ExitCode != 0:
		c.Detail = fmt.Sprintf("a run with a network device: /bin/true exited %d %s", res.ExitCode, res.Signal)
	default:
		c.OK, c.Detail = true, "TUN devices available: runs may get network access to what network.allow permits (none by default)"
	}
	return c
}

// trialRun proves the whole chain by running /bin/true in a sandbox.
func trialRun(e *Engine) Check {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	res, err := e.Run(ctx, &Spec{Args: []string{"/bin/true"}, Mounts: SystemMounts, Env: []string{"PATH=/usr/bin:/bin"}})
	c := Check{Name: "trial run", Required: true}
	switch {
	case err != nil:
		c.Detail = err.Error()
	case res.ExitCode != 0:
		c.Detail = fmt.Sprintf("/bin/true exited %d %s", res.ExitCode, res.Signal)
	default:
		c.OK = true
		c.Detail = fmt.Sprintf("/bin/true ran sandboxed in %v", time.Since(start).Round(10*time.Microsecond))
	}
	return c
}
