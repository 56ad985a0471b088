package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// cleanStale removes sandbox cgroups that an engine process which no
// longer exists left behind (it was killed): their sandboxes died with it
// (PID 1 has a parent-death signal), but the empty cgroup directories stay.
// Only directories named ct-<pid>-<n> (and the run-<pid>-<n> of older
// engines) under our own parent are touched, with what is inside them, and
// only when no process <pid> is alive.
func (c *cgroups) cleanStale() (removed int) {
	parents := []string{c.parent}
	if !c.v2 {
		parents = distinctDirs(c.parents) // co-mounted controllers share one
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
			if removeTree(c.v2, filepath.Join(parent, e.Name())) == nil {
				removed++
			}
		}
	}
	return removed
}

// removeTree kills what is in the cgroup dir and below and removes them,
// children first.
func removeTree(v2 bool, dir string) error {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			removeTree(v2, filepath.Join(dir, e.Name()))
		}
	}
	rc := &runCgroup{v2: v2, dir: dir, fd: -1}
	if !v2 {
		rc.dirs = map[string]string{"pids": dir}
		rc.dir = ""
	}
	rc.kill()
	return rc.remove()
}

// runOwner parses the engine pid out of a sandbox cgroup name.
func runOwner(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "ct-")
	if !ok {
		rest, ok = strings.CutPrefix(name, "run-")
	}
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
