package main

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Each sandbox-run command runs in a cgroup of its own, a "unit", as under
// systemd with Delegate=yes (or systemd-run --scope -p Delegate=yes): the
// driver makes the unit's cgroup in each hierarchy it is in itself, starts
// the command in it (re-executing itself as enterArg, which joins the
// cgroups and execs sandbox-run), and once the command has exited checks
// that the unit holds nothing but what the engine keeps (its "sandbox-run"
// parent, empty, and on v2 its "supervisor" leaf, empty), then removes it.

const (
	enterArg = "__enter-cgroup"
	enterEnv = "VMCHECK_CGROUP_PROCS" // the cgroup.procs files to join, ':'-separated

	driverLeaf = "vm-check"      // v2: the leaf the driver moves itself into
	rootSlice  = "vmcheck.slice" // the units' parent when the driver runs in the root cgroup
)

// enterAndExec is the child side of a unit: join its cgroups, then exec
// argv (sandbox-run). It returns only on failure.
func enterAndExec(argv []string) int {
	files := os.Getenv(enterEnv)
	os.Unsetenv(enterEnv)
	pid := []byte(strconv.Itoa(os.Getpid()))
	for _, f := range strings.Split(files, ":") {
		if f == "" {
			continue
		}
		if err := os.WriteFile(f, pid, 0); err != nil {
			fmt.Fprintf(os.Stderr, "vm-check: join the unit's cgroup: %v\n", err)
			return 125
		}
	}
	if len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "vm-check: nothing to exec")
		return 125
	}
	err := syscall.Exec(argv[0], argv, os.Environ())
	fmt.Fprintf(os.Stderr, "vm-check: exec %s: %v\n", argv[0], err)
	return 125
}

// hierarchy is one cgroup hierarchy this process is in.
type hierarchy struct {
	mount mount
	key   string // as in /proc/self/cgroup: "" (v2), "memory", "cpu,cpuacct", "name=systemd"
	own   string // this process's cgroup directory in it
	rel   string // ... relative to the hierarchy's root ("/" for the root)
}

func (h hierarchy) v2() bool { return h.mount.fstype == "cgroup2" }

// ownHierarchies reads /proc/self/cgroup against the cgroup mounts.
func ownHierarchies() ([]hierarchy, error) {
	all := mounts()
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []hierarchy
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		key, rel := parts[1], parts[2]
		for _, m := range all {
			if !matches(m, key) {
				continue
			}
			dir := filepath.Join(m.point, strings.TrimPrefix(rel, m.root))
			out = append(out, hierarchy{mount: m, key: key, own: dir, rel: rel})
			break
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no cgroup hierarchy of this process is mounted")
	}
	return out, sc.Err()
}

// matches says whether a cgroup mount is the hierarchy of a
// /proc/self/cgroup line's controller list.
func matches(m mount, key string) bool {
	if key == "" {
		return m.fstype == "cgroup2"
	}
	if m.fstype != "cgroup" {
		return false
	}
	opts := strings.Split(m.options, ",")
	for _, k := range strings.Split(key, ",") {
		if !slices.Contains(opts, k) {
			return false
		}
	}
	return true
}

// setupUnits prepares, in each hierarchy, the directory the units are made
// in, and returns them. On v2 a cgroup with processes cannot give its
// children controllers, so the driver first moves itself into a leaf of
// its own cgroup (or, in the root cgroup, which is exempt, makes a slice).
func setupUnits() ([]string, error) {
	hs, err := ownHierarchies()
	if err != nil {
		return nil, err
	}
	atRoot := true
	for _, h := range hs {
		if h.rel != "/" {
			atRoot = false
		}
	}
	var parents []string
	for _, h := range hs {
		var parent string
		switch {
		case atRoot:
			parent = filepath.Join(h.own, rootSlice)
			if err := os.MkdirAll(parent, 0o755); err != nil {
				return nil, err
			}
		case h.rel == "/":
			continue // a hierarchy the unit is not in (v1 cpuset, freezer...)
		default:
			parent = h.own
			if h.v2() && hasControllers(h.own) {
				leaf := filepath.Join(h.own, driverLeaf)
				if err := os.MkdirAll(leaf, 0o755); err != nil {
					return nil, err
				}
				if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
					return nil, fmt.Errorf("move the driver into %s: %w", leaf, err)
				}
			}
		}
		if h.v2() {
			if err := delegate(parent); err != nil {
				return nil, err
			}
		}
		parents = append(parents, parent)
	}
	return parents, nil
}

// hasControllers says whether a v2 cgroup has controllers to delegate.
func hasControllers(dir string) bool {
	b, _ := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	return len(strings.Fields(string(b))) > 0
}

// delegate enables, for the children of a v2 cgroup, the controllers the
// engine needs, among those it has.
func delegate(dir string) error {
	b, _ := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	have := strings.Fields(string(b))
	for _, c := range []string{"memory", "pids", "cpu"} {
		if !slices.Contains(have, c) {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+"+c), 0); err != nil {
			return fmt.Errorf("enable %s in %s: %w", c, dir, err)
		}
	}
	return nil
}

// unit is one command's cgroup, one directory per hierarchy.
type unit struct {
	name, what string
	dirs       []string
}

func (d *driver) newUnit(name, what string) (*unit, error) {
	u := &unit{name: name, what: what}
	for _, p := range d.unitParents {
		dir := filepath.Join(p, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return nil, fmt.Errorf("make the unit cgroup: %w", err)
		}
		u.dirs = append(u.dirs, dir)
	}
	return u, nil
}

// procsFiles are the files a process writes its pid to, to join the unit.
func (u *unit) procsFiles() string {
	var fs []string
	for _, d := range u.dirs {
		fs = append(fs, filepath.Join(d, "cgroup.procs"))
	}
	return strings.Join(fs, ":")
}

// leftovers lists what is in the unit beyond the engine's own two (empty)
// directories: processes and cgroups.
func (u *unit) leftovers() []string {
	var out []string
	for _, dir := range u.dirs {
		filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
			if err != nil || !e.IsDir() {
				return nil
			}
			b, _ := os.ReadFile(filepath.Join(path, "cgroup.procs"))
			for _, pid := range strings.Fields(string(b)) {
				cmd, _ := os.ReadFile("/proc/" + pid + "/cmdline")
				out = append(out, fmt.Sprintf("process %s (%s) in %s", pid, strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " ")), path))
			}
			rel, _ := filepath.Rel(dir, path)
			switch {
			case rel == "." || rel == engineParent || rel == supervisorLeaf:
			default:
				out = append(out, "cgroup "+path)
			}
			return nil
		})
	}
	sort.Strings(out)
	return out
}

// settle waits until the unit holds nothing the engine should have removed
// (its sandboxes die with it, a moment later), and returns what is left.
func (u *unit) settle(timeout time.Duration) []string {
	deadline := time.Now().Add(timeout)
	for {
		l := u.leftovers()
		if len(l) == 0 || time.Now().After(deadline) {
			return l
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// remove removes the unit's cgroups, children first; what it cannot remove
// (a process still in it) is an error.
func (u *unit) remove() error {
	var errs []error
	for _, dir := range u.dirs {
		var all []string
		filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				all = append(all, path)
			}
			return nil
		})
		for i := len(all) - 1; i >= 0; i-- {
			if err := os.Remove(all[i]); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// engineParents are the engine's parent cgroups in the unit.
func (u *unit) engineParents() []string {
	var out []string
	for _, dir := range u.dirs {
		p := filepath.Join(dir, engineParent)
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			out = append(out, p)
		}
	}
	return out
}
