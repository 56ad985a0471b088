// Package leakcheck finds what sandboxed runs could leave on the host:
// processes running as sandbox uids and run cgroups. The tests of several
// packages use it to prove that nothing survives a run.
package leakcheck

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Processes lists host processes with a uid in [lo, hi) ("pid N (name)").
// With a cgroupMarker, only those whose /proc/PID/cgroup contains it count,
// so that test binaries running sandboxes side by side see only their own.
// The PID 1 of idle pooled sandboxes count: drain the engine first, or use
// ProgramProcesses.
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
