package agent

import "golang.org/x/sys/unix"

// setUndumpable keeps the sandbox's other processes (the same user) out of
// the agent's memory and environment (/proc/PID/mem, environ).
func setUndumpable() error { return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0) }
