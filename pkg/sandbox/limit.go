package sandbox

import (
	"math/bits"
	"syscall"
	"time"
)

// CPUBackstop is the RLIMIT_CPU, in seconds, a run with CPU-time limit
// limit gets: a backstop behind the exact watchdog, rounded up to a power
// of two so that close limits share sandboxes built ahead.
func CPUBackstop(limit time.Duration) int64 {
	s := uint64(limit/time.Second) + 2
	return int64(1) << bits.Len64(s-1)
}

// LimitFacts are what tells which limit ended a run, read once it is
// over: every isolation backend names limits by them (WhichLimit).
type LimitFacts struct {
	// Hit is the limit the backend's own watch ended the run for ("":
	// none).
	Hit Limit
	// Result has the run's CPU time, exit code and signal; Limits are
	// its limits.
	Result *Result
	Limits Limits
	// OOMKilled: the kernel killed in the run's cgroup for memory;
	// PidsRefused: its pids controller refused a fork.
	OOMKilled, PidsRefused bool
	// DiskFull and Largest read the run's filesystems (/work, /tmp,
	// /dev/shm): whether one has no room left, the size of their largest
	// file. Called only when the answer matters.
	DiskFull func() bool
	Largest  func() int64
}

// WhichLimit is the limit that ended a run, by its facts.
func WhichLimit(f LimitFacts) Limit {
	res := f.Result
	if f.Hit != LimitNone {
		if (f.Hit == LimitWallTime || f.Hit == LimitCPUTime) && f.PidsRefused {
			return LimitProcesses // a fork bomb spins until the clock ends it
		}
		return f.Hit
	}
	if res.CPUTime >= f.Limits.CPUTime {
		return LimitCPUTime
	}
	failed := res.ExitCode != 0
	switch {
	case f.OOMKilled && failed:
		return LimitMemory
	case res.Signal == "SIGSYS":
		return LimitSeccomp
	case res.Signal == "SIGXFSZ" || res.ExitCode == 128+int(syscall.SIGXFSZ):
		return LimitFileSize
	case res.Signal == "SIGXCPU":
		return LimitCPUTime
	case f.PidsRefused:
		return LimitProcesses
	case failed && f.DiskFull():
		return LimitDisk
	case failed && f.Largest() >= f.Limits.FileSize:
		// Programs that ignore SIGXFSZ (CPython does) see EFBIG instead.
		return LimitFileSize
	}
	return LimitNone
}
