package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// cleanStale removes run cgroups that an engine process which no longer
// exists left behind (it was killed mid-run): their sandboxes died with it
// (PID 1 has a parent-death signal), but the empty cgroup directories stay.
// Only directories named run-<pid>-<n> under our own parent are touched,
// and only when no process <pid> is alive.
func (c *cgroups) cleanStale() (removed int) {
	parents := []string{c.parent}
	if !c.v2 {
		parents = parents[:0]
		for _, p := range c.parents {
			parents = append(parents, p)
		}
	}
	for _, parent := range parents {
		entries, err := os.ReadDir(parent)
		if err != nil {
			continue
		}
		for _, e := range entries {
			pid, ok := runOwner(e.Name())
			if !e.IsDir() || !ok || processAlive(pid) {
				continue
			}
			rc := &runCgroup{v2: c.v2, dir: filepath.Join(parent, e.Name()), fd: -1}
			if !c.v2 {
				rc.dirs = map[string]string{"pids": rc.dir}
				rc.dir = ""
			}
			rc.kill()
			if rc.remove() == nil {
				removed++
			}
		}
	}
	return removed
}

// runOwner parses the engine pid out of a run cgroup name.
func runOwner(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "run-")
	if !ok {
		return 0, false
	}
	pidText, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(pidText)
	return pid, err == nil && pid > 0
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
