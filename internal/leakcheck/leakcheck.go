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
func Processes(lo, hi int, cgroupMarker string) []string {
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
					if uid, err := strconv.Atoi(u); err == nil && uid >= lo && uid < hi {
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

// RunCgroups lists the run cgroups of engine process pid (run-<pid>-<n>)
// under the engine's parent cgroups.
func RunCgroups(parents map[string]string, pid int) []string {
	var left []string
	prefix := fmt.Sprintf("run-%d-", pid)
	for _, parent := range parents {
		entries, _ := os.ReadDir(parent)
		for _, e := range entries {
			if e.IsDir() && strings.HasPrefix(e.Name(), prefix) {
				left = append(left, filepath.Join(parent, e.Name()))
			}
		}
	}
	return left
}
