package sandbox

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// hostChecks inspects the kernel features the sandbox relies on.
func hostChecks() []Check {
	var checks []Check
	var uts unix.Utsname
	if unix.Uname(&uts) == nil {
		checks = append(checks, Check{Name: "kernel", OK: true, Detail: unix.ByteSliceToString(uts.Release[:])})
	}
	root := Check{Name: "privileges", Required: true, OK: os.Geteuid() == 0, Detail: "running as root"}
	if !root.OK {
		root.Detail = "not root: the engine needs root to map sandbox uids and create cgroups (sandboxed code never runs as root)"
	}
	checks = append(checks, root)

	userns := Check{Name: "user namespaces", Required: true}
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err != nil {
		userns.Detail = "unknown: " + err.Error()
	} else if n := strings.TrimSpace(string(b)); n == "0" {
		userns.Detail = "disabled (user.max_user_namespaces = 0)"
	} else {
		userns.OK, userns.Detail = true, "enabled (max "+n+"); pid, mount, net, ipc, uts, cgroup namespaces per run"
	}
	checks = append(checks, userns)

	seccomp := Check{Name: "seccomp", Required: true}
	if _, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0); err != nil {
		seccomp.Detail = "not available: " + err.Error()
	} else {
		seccomp.OK, seccomp.Detail = true, "filter mode available (allow-list installed per run)"
	}
	checks = append(checks, seccomp)

	landlock := Check{Name: "landlock"}
	const createRulesetVersion = 1
	if v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, createRulesetVersion); errno != 0 {
		landlock.Detail = "not available (" + errno.Error() + "); not needed: mounts already confine the filesystem"
	} else {
		landlock.OK, landlock.Detail = true, fmt.Sprintf("ABI v%d available (not needed: mounts already confine the filesystem)", v)
	}
	checks = append(checks, landlock)
	return checks
}
