package main

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/lib/mountinfo"
)

const cgroupRoot = "/sys/fs/cgroup"

// The directories the engine keeps in its own cgroup: its parent of every
// sandbox's cgroup, and (v2) the leaf it moves itself into.
const (
	engineParent    = "sandbox-run"
	supervisorLeaf  = "supervisor"
	leftoverTimeout = 30 * time.Second
)

// ctName is a sandbox's cgroup below the engine's parent: ct-<engine pid>-<n>.
var ctName = regexp.MustCompile(`^ct-([0-9]+)-[0-9]+$`)

// mount is one line of /proc/self/mountinfo.
type mount struct {
	root, point, fstype, options string
}

func mounts() []mount {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []mount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if sep < 5 || len(fields) < sep+4 {
			continue
		}
		out = append(out, mount{root: mountinfo.Unescape(fields[3]), point: mountinfo.Unescape(fields[4]), fstype: fields[sep+1], options: fields[sep+3]})
	}
	return out
}

// mountOf is the mount that holds path (the longest mount point above it).
func mountOf(all []mount, path string) mount {
	var best mount
	for _, m := range all {
		if (path == m.point || strings.HasPrefix(path, strings.TrimSuffix(m.point, "/")+"/")) && len(m.point) >= len(best.point) {
			best = m
		}
	}
	return best
}

// controllersOf names the controllers of a cgroup mount: "unified" for
// cgroup2, else the v1 controllers among its options (name=systemd too).
func controllersOf(m mount) []string {
	if m.fstype == "cgroup2" {
		return []string{"unified"}
	}
	var out []string
	for _, o := range strings.Split(m.options, ",") {
		switch o {
		case "rw", "ro", "nosuid", "nodev", "noexec", "relatime", "noatime", "clone_children", "nsdelegate", "memory_recursiveprot", "memory_localevents", "favordynmods", "xattr":
		default:
			out = append(out, o)
		}
	}
	return out
}

// describeHost prints what the VM looks like: the cgroup mounts and where
// this process is.
func (d *driver) describeHost() {
	fmt.Printf("vm-check: expecting cgroup layout %s, languages %s, %d concurrent requests\n",
		d.cfg.layout, strings.Join(d.cfg.languages, ","), d.cfg.concurrency)
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		fmt.Printf("vm-check: kernel %s", b)
	}
	for _, m := range mounts() {
		if m.fstype == "cgroup" || m.fstype == "cgroup2" {
			fmt.Printf("vm-check: %s on %s (%s)\n", m.fstype, m.point, m.options)
		}
	}
	if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			fmt.Printf("vm-check: /proc/self/cgroup %s\n", l)
		}
	}
}

// snapshot is what the leak checks compare: user processes, every cgroup
// directory of every hierarchy, and the mount points.
type snapshot struct {
	procs   map[int]string // pid → command line
	cgroups map[string]bool
	mounts  map[string]string // mount point → fs type
}

func takeSnapshot() snapshot {
	s := snapshot{procs: userProcs(), cgroups: map[string]bool{}, mounts: map[string]string{}}
	filepath.WalkDir(cgroupRoot, func(path string, e fs.DirEntry, err error) error {
		if err == nil && e.IsDir() { // symlinks (cpu -> cpu,cpuacct) are not followed
			s.cgroups[path] = true
		}
		return nil
	})
	for _, m := range mounts() {
		s.mounts[m.point] = m.fstype
	}
	return s
}

// userProcs lists the processes other than kernel threads and this one.
func userProcs() map[int]string {
	out := map[int]string{}
	entries, _ := os.ReadDir("/proc")
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self || pid == 2 {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // gone
		}
		s := string(stat)
		rest := s[strings.LastIndexByte(s, ')')+1:]
		f := strings.Fields(rest) // state ppid ...
		if len(f) < 2 || f[1] == "2" {
			continue // a kernel thread
		}
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		line := strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))
		if line == "" {
			line = "[" + s[strings.IndexByte(s, '(')+1:strings.LastIndexByte(s, ')')] + "] state " + f[0]
		}
		out[pid] = line
	}
	return out
}

// leftovers compares now with the baseline.
type leftovers struct {
	procs   []string // "pid: cmdline (cgroup)"
	mounts  []string
	cgroups []string
}

func (l leftovers) empty() bool { return len(l.procs)+len(l.mounts)+len(l.cgroups) == 0 }

func (d *driver) leftoversNow() leftovers {
	now := takeSnapshot()
	var l leftovers
	for pid, cmd := range now.procs {
		if old, ok := d.base.procs[pid]; ok && old == cmd {
			continue
		}
		cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		l.procs = append(l.procs, fmt.Sprintf("pid %d: %s (cgroup %s)", pid, cmd, strings.Join(strings.Fields(string(cg)), " ")))
	}
	for p, t := range now.mounts {
		if _, ok := d.base.mounts[p]; !ok {
			l.mounts = append(l.mounts, p+" ("+t+")")
		}
	}
	for p := range now.cgroups {
		if !d.base.cgroups[p] {
			l.cgroups = append(l.cgroups, p)
		}
	}
	sort.Strings(l.procs)
	sort.Strings(l.mounts)
	sort.Strings(l.cgroups)
	return l
}

// checkUnits: each unit (its command has exited) holds nothing but the
// engine's own empty directories; then the units are removed and the VM
// must look as it did at the start: no process, cgroup or mount more.
func (d *driver) checkUnits(units []*unit) error {
	var p problems
	deadline := time.Now().Add(leftoverTimeout)
	for _, u := range units {
		for _, x := range u.settle(time.Until(deadline)) {
			p.addf("%s (%s) left %s", u.name, u.what, x)
		}
		if err := u.remove(); err != nil {
			p.addf("remove %s: %v", u.name, err)
		}
	}
	var l leftovers
	for {
		l = d.leftoversNow()
		if l.empty() || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	for _, x := range l.procs {
		p.addf("process left: %s", x)
	}
	for _, x := range l.mounts {
		p.addf("mount left: %s", x)
	}
	for _, x := range l.cgroups {
		p.addf("cgroup left: %s", x)
	}
	return p.err()
}

// sandboxCount counts the sandbox cgroups (ct-*) in each engine parent.
func sandboxCount(parents []string) map[string]int {
	n := map[string]int{}
	for _, dir := range parents {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.IsDir() && ctName.MatchString(e.Name()) {
				n[dir]++
			}
		}
	}
	return n
}

// checkEngineCgroups: the engine's parent cgroups in the unit are in the
// hierarchies the layout says (v2: the unified one; v1: memory, pids, cpu
// and cpuacct, none in a cgroup2), and each held sandboxes (seen: the most
// sandbox cgroups seen in each while requests ran).
func (d *driver) checkEngineCgroups(u *unit, seen map[string]int) error {
	all := mounts()
	parents := u.engineParents()
	if len(parents) == 0 {
		return fmt.Errorf("no %q cgroup in the unit %s", engineParent, strings.Join(u.dirs, ", "))
	}
	var p problems
	covered := map[string]bool{}
	for _, dir := range parents {
		m := mountOf(all, dir)
		ctrls := controllersOf(m)
		info("%s: %s (%s), up to %d sandbox cgroups while the requests ran", dir, m.fstype, strings.Join(ctrls, ","), seen[dir])
		for _, c := range ctrls {
			covered[c] = true
		}
		if seen[dir] == 0 {
			p.addf("%s held no sandbox cgroup (ct-*) while the requests ran", dir)
		}
		if want := map[string]string{"v2": "cgroup2", "v1": "cgroup"}[d.engineVersion()]; m.fstype != want {
			p.addf("layout %s: the engine should use cgroup %s, but made %s on %s", d.cfg.layout, d.engineVersion(), dir, m.fstype)
		}
	}
	want := []string{"unified"}
	if d.engineVersion() == "v1" {
		want = []string{"memory", "pids", "cpu", "cpuacct"}
	}
	for _, c := range want {
		if !covered[c] {
			p.addf("no engine cgroup in the %s hierarchy", c)
		}
	}
	return p.err()
}
