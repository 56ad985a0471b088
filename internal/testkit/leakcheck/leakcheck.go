// Package leakcheck finds what sandboxed runs could leave on the host:
// processes running as sandbox uids and run cgroups. The tests of several
// packages use it to prove that nothing survives a run.
package leakcheck

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// Test uid bands. A test binary whose engines take their uids from a
// block of its package's band (UIDBlock) shares no uid with another test
// binary running beside it (go test runs packages in parallel; the same
// package twice gets two blocks, by pid), and its leak checks count every
// process with a uid of its block as its own: one that escaped its
// sandbox's process tree and cgroups too. The default engine's range
// (sandbox.Config: 2000000000 and 8192 uids), which servers started by
// tests use, lies below every band.
const (
	BandSandbox   = 1 // pkg/sandbox
	BandRedTeam   = 2 // test/redteam
	BandAPIFaults = 3 // pkg/api's engines of their own (faults)
	BandLive      = 4 // pkg/live
)

// UIDBlock is this test binary's block of band: 100,000 uids.
func UIDBlock(band int) (lo, hi int) {
	lo = 2000000000 + band*100_000_000 + os.Getpid()%1000*100_000
	return lo, lo + 100_000
}

// Processes lists host processes with a uid in [lo, hi) ("pid N (name)").
// With a cgroupMarker, only those whose /proc/PID/cgroup contains it count,
// so that test binaries sharing a uid range (the default engine's) see
// only their own; without one, every process in the range counts, which
// must then be the caller's own (UIDBlock). The PID 1 of idle pooled
// sandboxes count: drain the engine first, or use ProgramProcesses.
func Processes(lo, hi int, cgroupMarker string) []string {
	return processes(lo, hi, cgroupMarker, false)
}

// ProgramProcesses is Processes for the uids programs run as (every second
// uid from lo, the others being the sandboxes' PID 1): none may outlive its
// run, whether its sandbox is pooled or not.
func ProgramProcesses(lo, hi int, cgroupMarker string) []string {
	return processes(lo, hi, cgroupMarker, true)
}

func processes(lo, hi int, cgroupMarker string, programsOnly bool) []string {
	entries, _ := os.ReadDir("/proc")
	var found []string
	for _, ent := range entries {
		if _, err := strconv.Atoi(ent.Name()); err != nil {
			continue
		}
		status, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "status"))
		if err != nil {
			continue
		}
		inRange, name := false, ""
		for _, line := range strings.Split(string(status), "\n") {
			f := strings.Fields(line)
			switch {
			case len(f) > 1 && f[0] == "Name:":
				name = f[1]
			case len(f) > 1 && f[0] == "Uid:":
				for _, u := range f[1:] {
					if uid, err := strconv.Atoi(u); err == nil && uid >= lo && uid < hi && (!programsOnly || (uid-lo)%2 == 1) {
						inRange = true
					}
				}
			}
		}
		if !inRange {
			continue
		}
		if cgroupMarker != "" {
			cg, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cgroup"))
			if err != nil || !strings.Contains(string(cg), cgroupMarker) {
				continue
			}
		}
		found = append(found, fmt.Sprintf("pid %s (%s)", ent.Name(), name))
	}
	return found
}

// RunCgroups lists the run cgroups of engine process pid under the
// engine's parent cgroups: ct-<pid>-<n>/run-<m> (and the run-<pid>-<n> of
// older engines). The cgroups of idle pooled sandboxes themselves are
// SandboxCgroups.
func RunCgroups(parents map[string]string, pid int) []string {
	var left []string
	for _, ct := range SandboxCgroups(parents, pid) {
		if strings.HasPrefix(filepath.Base(ct), "run-") {
			left = append(left, ct)
			continue
		}
		entries, _ := os.ReadDir(ct)
		for _, e := range entries {
			if e.IsDir() && strings.HasPrefix(e.Name(), "run-") {
				left = append(left, filepath.Join(ct, e.Name()))
			}
		}
	}
	return left
}

// SandboxCgroups lists the cgroups of engine process pid's sandboxes
// (ct-<pid>-<n>, run-<pid>-<n>), idle pooled ones included.
func SandboxCgroups(parents map[string]string, pid int) []string {
	var left []string
	prefixes := []string{fmt.Sprintf("run-%d-", pid), fmt.Sprintf("ct-%d-", pid)}
	for _, parent := range parents {
		entries, _ := os.ReadDir(parent)
		for _, e := range entries {
			if e.IsDir() && (strings.HasPrefix(e.Name(), prefixes[0]) || strings.HasPrefix(e.Name(), prefixes[1])) {
				left = append(left, filepath.Join(parent, e.Name()))
			}
		}
	}
	return left
}

// HostTempDir is the host's shared temporary directory. Other programs
// create and remove entries there all the time, so a leak check must not
// count every new entry in it: see HostTemp.
const HostTempDir = "/tmp"

// ToolchainLeftovers are the names the toolchains the project starts on
// the host (version checks) left in /tmp before they were given a private
// HOME: Go's telemetry under $HOME/.config and the JVM's hsperfdata
// directory, which ignores TMPDIR.
var ToolchainLeftovers = []string{".config", "hsperfdata_root"}

// HostTemp lists the entries of the host's /tmp that this project's code
// could have made, each with why it counts: owned (uid or gid) by a
// sandbox uid in [lo, hi), which only a sandboxed program that reached the
// host's /tmp could make, or named as a toolchain leftover. Everything the
// project makes on purpose goes to TMPDIR: run the code under test with a
// private one (PrivateTempDir) and check that instead.
func HostTemp(lo, hi int) map[string]string { return hostTemp(HostTempDir, lo, hi) }

func hostTemp(dir string, lo, hi int) map[string]string {
	found := map[string]string{}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		for _, n := range ToolchainLeftovers {
			if e.Name() == n {
				found[e.Name()] = "a toolchain's leftover"
			}
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			if u, g := int(st.Uid), int(st.Gid); u >= lo && u < hi || g >= lo && g < hi {
				found[e.Name()] = fmt.Sprintf("owned by sandbox uid %d gid %d", u, g)
			}
		}
	}
	return found
}

// NewIn lists the entries of after (HostTemp or Entries) not in before,
// with why they count, sorted.
func NewIn(before, after map[string]string) []string {
	var left []string
	for name, why := range after {
		if _, ok := before[name]; !ok {
			left = append(left, fmt.Sprintf("%s (%s)", name, why))
		}
	}
	slices.Sort(left)
	return left
}

// Entries lists the names in dir (for a private TMPDIR, where every entry
// is this process's), each "in <dir>".
func Entries(dir string) map[string]string {
	found := map[string]string{}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		found[e.Name()] = "in " + dir
	}
	return found
}

// PrivateTempDir makes a temporary directory of this process's own and
// sets TMPDIR to it, so that everything the code under test (and every
// program it starts) puts in "the temporary directory" lands there, where
// a leak check may count every entry: nothing else writes there. It
// returns the directory and a function that removes it and restores
// TMPDIR. Test binaries call it from TestMain.
func PrivateTempDir(name string) (string, func(), error) {
	old, had := os.LookupEnv("TMPDIR")
	dir, err := os.MkdirTemp("", name+"-")
	if err != nil {
		return "", nil, err
	}
	os.Setenv("TMPDIR", dir)
	return dir, func() {
		if had {
			os.Setenv("TMPDIR", old)
		} else {
			os.Unsetenv("TMPDIR")
		}
		os.RemoveAll(dir)
	}, nil
}
