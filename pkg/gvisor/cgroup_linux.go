package gvisor

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// cgroups is where the runs' cgroups are made: under parent, in the
// unified hierarchy (v2) or in each of the v1 controllers' hierarchies
// the runs use.
type cgroups struct {
	root   string // /sys/fs/cgroup
	parent string // relative to each hierarchy's root
	v2     bool
}

// v1Controllers are the v1 hierarchies a run's cgroup is made in.
var v1Controllers = []string{"memory", "pids", "cpu", "cpuacct"}

func newCgroups(parent string) (cgroups, error) {
	c := cgroups{root: "/sys/fs/cgroup"}
	if _, err := os.Stat(filepath.Join(c.root, "cgroup.controllers")); err == nil {
		c.v2 = true
	}
	if parent == "" {
		own, err := ownCgroup(c.v2)
		if err != nil {
			return c, err
		}
		parent = own
	}
	c.parent = filepath.Join("/", parent, "sandbox-run-gvisor")
	return c, nil
}

// makeParent makes the runs' parent cgroup (made with the first run).
func (c cgroups) makeParent() error {
	for _, dir := range c.dirs(c.parent) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("gvisor: cgroup %s: %w", dir, err)
		}
	}
	if c.v2 {
		// The runs' controllers, delegated to their cgroups.
		os.WriteFile(filepath.Join(c.root, c.parent, "cgroup.subtree_control"), []byte("+memory +pids +cpu"), 0)
	}
	return nil
}

// removeParent removes the runs' parent cgroup from every hierarchy
// where it is empty: other runners' runs under it keep it (rmdir of a
// cgroup with children fails).
func (c cgroups) removeParent() {
	for _, dir := range c.allDirs(c.parent) {
		os.Remove(dir)
	}
}

// ownCgroup is this process's cgroup: the unified one, or the memory
// controller's (v1).
func ownCgroup(v2 bool) (string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if v2 && parts[0] == "0" || !v2 && strings.Contains(","+parts[1]+",", ",memory,") {
			return parts[2], nil
		}
	}
	return "", errors.New("gvisor: this process's cgroup is not in /proc/self/cgroup")
}

// path is run id's cgroup, as OCI's cgroupsPath.
func (c cgroups) path(id string) string { return filepath.Join(c.parent, id) }

// dirs are rel's directories in the hierarchies.
func (c cgroups) dirs(rel string) []string {
	if c.v2 {
		return []string{filepath.Join(c.root, rel)}
	}
	var out []string
	for _, ctl := range v1Controllers {
		out = append(out, filepath.Join(c.root, ctl, rel))
	}
	return out
}

// runCgroup is one run's cgroup.
type runCgroup struct {
	c   cgroups
	rel string
}

// create makes run id's cgroup with l's memory, processes and CPU limits.
func (c cgroups) create(id string, l sandbox.Limits) (*runCgroup, error) {
	if err := c.makeParent(); err != nil {
		return nil, err
	}
	rc := &runCgroup{c: c, rel: c.path(id)}
	for _, dir := range c.dirs(rc.rel) {
		err := os.Mkdir(dir, 0o755)
		for try := 0; errors.Is(err, os.ErrNotExist) && try < 3; try++ {
			// Another runner's Close removed the parent, empty then.
			if err = c.makeParent(); err == nil {
				err = os.Mkdir(dir, 0o755)
			}
		}
		if err != nil {
			rc.remove()
			return nil, err
		}
	}
	if err := rc.setLimits(l); err != nil {
		rc.remove()
		return nil, err
	}
	return rc, nil
}

// setLimits gives the cgroup l's memory, processes and CPU limits (and,
// on v1, starts its peak memory anew).
func (rc *runCgroup) setLimits(l sandbox.Limits) error {
	c := rc.c
	period := 100000
	quota := int(l.CPUs * float64(period))
	var writes [][2]string
	if c.v2 {
		writes = [][2]string{{"memory.max", fmt.Sprint(l.Memory)}, {"memory.swap.max", "0"},
			{"pids.max", fmt.Sprint(l.Processes + gvisorTasks)}, {"cpu.max", fmt.Sprintf("%d %d", quota, period)}}
	} else {
		writes = [][2]string{{"memory/memory.limit_in_bytes", fmt.Sprint(l.Memory)}, {"memory/memory.swappiness", "0"},
			{"pids/pids.max", fmt.Sprint(l.Processes + gvisorTasks)},
			{"cpu/cpu.cfs_period_us", fmt.Sprint(period)}, {"cpu/cpu.cfs_quota_us", fmt.Sprint(quota)}}
	}
	for _, w := range writes {
		if err := os.WriteFile(rc.file(w[0]), []byte(w[1]), 0); err != nil && !(strings.HasSuffix(w[0], "swap.max") || strings.HasSuffix(w[0], "swappiness")) {
			return fmt.Errorf("%s: %w", w[0], err)
		}
	}
	if !c.v2 {
		os.WriteFile(rc.file("memory/memory.max_usage_in_bytes"), []byte("0"), 0)
	}
	return nil
}

// gvisorTasks are the host tasks gVisor's own processes take (the Sentry's
// threads, the gofer's) beside what the program's processes map to: the
// processes limit is the Sentry's to keep (its own RLIMIT_NPROC-like
// accounting is not a host pid each).
const gvisorTasks = 256

// file is name in the run's cgroup: "memory/memory.max_usage_in_bytes" on
// v1 (controller first), "memory.peak" on v2.
func (rc *runCgroup) file(name string) string {
	if rc.c.v2 {
		return filepath.Join(rc.c.root, rc.rel, name)
	}
	ctl, file, _ := strings.Cut(name, "/")
	return filepath.Join(rc.c.root, ctl, rc.rel, file)
}

func (rc *runCgroup) read(name string) string {
	b, _ := os.ReadFile(rc.file(name))
	return strings.TrimSpace(string(b))
}

func (rc *runCgroup) field(name, key string) int64 {
	for _, line := range strings.Split(rc.read(name), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// cpu is the CPU time its processes used.
func (rc *runCgroup) cpu() time.Duration {
	if rc.c.v2 {
		return time.Duration(rc.field("cpu.stat", "usage_usec")) * time.Microsecond
	}
	n, _ := strconv.ParseInt(rc.read("cpuacct/cpuacct.usage"), 10, 64)
	return time.Duration(n)
}

// userSys is the CPU time split in user and system time.
func (rc *runCgroup) userSys() (user, sys time.Duration) {
	if rc.c.v2 {
		return time.Duration(rc.field("cpu.stat", "user_usec")) * time.Microsecond,
			time.Duration(rc.field("cpu.stat", "system_usec")) * time.Microsecond
	}
	tick := 10 * time.Millisecond // USER_HZ
	return time.Duration(rc.field("cpuacct/cpuacct.stat", "user")) * tick, time.Duration(rc.field("cpuacct/cpuacct.stat", "system")) * tick
}

// memory is its memory use now.
func (rc *runCgroup) memory() int64 {
	name := "memory/memory.usage_in_bytes"
	if rc.c.v2 {
		name = "memory.current"
	}
	n, _ := strconv.ParseInt(rc.read(name), 10, 64)
	return n
}

// peak is its highest memory use.
func (rc *runCgroup) peak() int64 {
	name := "memory/memory.max_usage_in_bytes"
	if rc.c.v2 {
		name = "memory.peak"
	}
	n, _ := strconv.ParseInt(rc.read(name), 10, 64)
	return n
}

// oomKilled says whether the kernel killed a process of it for memory.
func (rc *runCgroup) oomKilled() bool {
	if rc.c.v2 {
		return rc.field("memory.events", "oom_kill") > 0
	}
	return rc.field("memory/memory.oom_control", "oom_kill") > 0
}

// pidsRefused says whether a fork was refused for its processes limit.
func (rc *runCgroup) pidsRefused() bool {
	if rc.c.v2 {
		return rc.field("pids.events", "max") > 0
	}
	return rc.field("pids/pids.events", "max") > 0
}

// allDirs are rel's directories in every hierarchy that has it: runsc
// makes the cgroup in each v1 controller it knows (blkio, cpuset, devices
// and others besides ours).
func (c cgroups) allDirs(rel string) []string {
	if c.v2 {
		return c.dirs(rel)
	}
	var out []string
	entries, _ := os.ReadDir(c.root)
	for _, e := range entries {
		dir := filepath.Join(c.root, e.Name(), rel)
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			out = append(out, dir)
		}
	}
	return out
}

// remove removes the cgroup, killing what is left in it.
func (rc *runCgroup) remove() {
	for _, dir := range rc.c.allDirs(rc.rel) {
		for i := 0; i < 50; i++ {
			err := os.Remove(dir)
			if err == nil || os.IsNotExist(err) {
				break
			}
			killIn(dir, rc.c.v2)
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// killAll kills every process in the cgroup now.
func (rc *runCgroup) killAll() {
	killIn(rc.c.dirs(rc.rel)[0], rc.c.v2)
}

// killIn kills the processes of cgroup directory dir.
func killIn(dir string, v2 bool) {
	if v2 {
		os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
		return
	}
	if b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil {
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				killPid(pid)
			}
		}
	}
}

// clearStale removes the cgroups of runs of process pid, which is gone
// (their ids start with "sr<pid>-"), killing what is left in them.
func (c cgroups) clearStale(pid int) {
	prefix := fmt.Sprintf("sr%d-", pid)
	seen := map[string]bool{}
	for _, parent := range c.allDirs(c.parent) {
		entries, _ := os.ReadDir(parent)
		for _, e := range entries {
			if e.IsDir() && strings.HasPrefix(e.Name(), prefix) && !seen[e.Name()] {
				seen[e.Name()] = true
				(&runCgroup{c: c, rel: c.path(e.Name())}).remove()
			}
		}
	}
}
