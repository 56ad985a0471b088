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
// only when no process <pid> is alive. Those of detachable sandboxes
// (ct-<pid>-d<n>) may hold runs that outlived their engine, waiting to be
// adopted: they are removed only when empty, and nothing in them is
// killed.
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
			dir := filepath.Join(parent, e.Name())
			var err error
			if isDetachable(e.Name()) {
				err = removeEmptyTree(dir)
			} else {
				err = removeTree(c.v2, dir)
			}
			if err == nil {
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

// removeEmptyTree removes the cgroup dir and those below it that hold no
// process, children first, killing nothing: one that holds a process
// stays, and so do those above it.
func removeEmptyTree(dir string) error {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			removeEmptyTree(filepath.Join(dir, e.Name()))
		}
	}
	err := syscall.Rmdir(dir)
	if errors.Is(err, syscall.ENOENT) {
		return nil
	}
	return err
}

// detachableMark follows ct-<pid>- in the name of a detachable sandbox's
// cgroup.
const detachableMark = "d"

// isDetachable says whether the sandbox cgroup name is a detachable
// sandbox's.
func isDetachable(name string) bool {
	rest, ok := strings.CutPrefix(name, "ct-")
	if !ok {
		return false
	}
	_, rest, _ = strings.Cut(rest, "-")
	return strings.HasPrefix(rest, detachableMark)
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
