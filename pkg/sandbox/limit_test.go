package sandbox

import (
	"testing"
	"time"
)

// TestWhichLimit: the limit a run's facts name, in the engine's order,
// for every backend; the filesystems are read only when it matters.
func TestWhichLimit(t *testing.T) {
	l := Limits{CPUTime: time.Second, FileSize: 1 << 20}
	for _, c := range []struct {
		name  string
		f     LimitFacts
		want  Limit
		reads bool // the filesystems are read
	}{
		{"a watch's kill", LimitFacts{Hit: LimitOutput, Result: &Result{ExitCode: -1, Signal: "SIGKILL"}}, LimitOutput, false},
		{"the clock on a fork bomb", LimitFacts{Hit: LimitWallTime, PidsRefused: true, Result: &Result{ExitCode: -1}}, LimitProcesses, false},
		{"CPU time used up", LimitFacts{Result: &Result{CPUTime: time.Second}}, LimitCPUTime, false},
		{"killed for memory", LimitFacts{OOMKilled: true, Result: &Result{ExitCode: -1, Signal: "SIGKILL"}}, LimitMemory, false},
		{"an OOM kill the program survived", LimitFacts{OOMKilled: true, Result: &Result{}}, LimitNone, false},
		{"seccomp", LimitFacts{Result: &Result{ExitCode: -1, Signal: "SIGSYS"}}, LimitSeccomp, false},
		{"SIGXFSZ in a child of the shell", LimitFacts{Result: &Result{ExitCode: 153}}, LimitFileSize, false},
		{"SIGXCPU", LimitFacts{Result: &Result{ExitCode: -1, Signal: "SIGXCPU"}}, LimitCPUTime, false},
		{"a refused fork", LimitFacts{PidsRefused: true, Result: &Result{}}, LimitProcesses, false},
		{"a full disk", LimitFacts{DiskFull: func() bool { return true }, Result: &Result{ExitCode: 1}}, LimitDisk, true},
		{"EFBIG", LimitFacts{DiskFull: func() bool { return false }, Largest: func() int64 { return 1 << 20 }, Result: &Result{ExitCode: 1}}, LimitFileSize, true},
		{"a plain failure", LimitFacts{DiskFull: func() bool { return false }, Largest: func() int64 { return 10 }, Result: &Result{ExitCode: 1}}, LimitNone, true},
		{"a success is not read", LimitFacts{Result: &Result{}}, LimitNone, false},
	} {
		read := false
		f := c.f
		f.Limits = l
		disk, largest := f.DiskFull, f.Largest
		f.DiskFull = func() bool { read = true; return disk() }
		f.Largest = func() int64 { read = true; return largest() }
		if got := WhichLimit(f); got != c.want || read != c.reads {
			t.Errorf("%s: %q (filesystems read: %v), want %q (%v)", c.name, got, read, c.want, c.reads)
		}
	}
}
