package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/internal/lib/mountinfo"
	"github.com/sandbox-run/sandbox-run/pkg/monitor"
)

// cgroupParentName is the directory the engine owns under its own cgroup;
// everything below it is ours to create and remove.
const cgroupParentName = "sandbox-run"

// supervisorLeaf is the leaf cgroup a v2 engine moves its own cgroup's
// processes into, so that the cgroup can enable controllers for runs.
const supervisorLeaf = "supervisor"

// v1Controllers are the hierarchies a sandbox needs on cgroup v1.
var v1Controllers = []string{"memory", "pids", "cpu", "cpuacct"}

// v1Optional are hierarchies a sandbox is in when they are mounted: the
// freezer, which pauses it (Process.Freeze).
var v1Optional = []string{"freezer"}

// v1Known are the hierarchies the engine uses, needed and optional.
var v1Known = append(slices.Clone(v1Controllers), v1Optional...)

// v1RunControllers are those where each run has a cgroup of its own: its
// memory and process limits and their accounting. PID 1 is idle while a
// run lasts, so the rest is done on the sandbox's own cgroups: the CPU
// bandwidth limit, set anew at the start of each run (which also refills
// its quota), and the live CPU time the watchdog reads, counted from the
// start of the run; the run's exact CPU time comes from PID 1, which reaps
// all of its processes. Two hierarchies less to create and remove per run.
var v1RunControllers = []string{"memory", "pids"}

// cgroups creates one cgroup per run under the engine's parent cgroup.
type cgroups struct {
	v2 bool
	// parent is the v2 parent directory; parents maps each v1 controller
	// to its parent directory (co-mounted controllers share one).
	parent  string
	parents map[string]string
	// memsw: v1 accounts swap (memory.memsw.* exist).
	memsw bool
	// tcpmem: v1 can charge socket buffers to a memory cgroup
	// (memory.kmem.tcp.* exist). See tcpLimitFile.
	tcpmem bool
}

// tcpLimitFile limits, on cgroup v1, the socket buffers of a memory cgroup's
// TCP (and UDP) sockets. v1 charges them to a counter of their own, apart
// from memory.limit_in_bytes, and only in cgroups where this limit was
// written before the socket was made: unset, a run could hold any amount
// of kernel memory in the buffers of loopback connections it never reads.
// Each run's gets the run's memory limit, and its peak (tcpPeakFile) counts
// in the run's peak memory. v2 charges socket memory to memory.current
// ("sock" in memory.stat), under memory.max, with nothing to set.
const (
	tcpLimitFile = "memory.kmem.tcp.limit_in_bytes"
	tcpPeakFile  = "memory.kmem.tcp.max_usage_in_bytes"
)

// CgroupInfo describes the host's cgroup setup as the engine sees it.
type CgroupInfo struct {
	Version int // 1 or 2
	// Parents maps each controller (v1; co-mounted controllers share one
	// directory) or "unified" (v2) to the parent directory of run cgroups.
	Parents     map[string]string
	Controllers []string // controllers available for runs
}

// cgroupMount is where a cgroup hierarchy is mounted: Point is the mount
// point, Root the hierarchy's directory mounted there (not "/" when only a
// subtree is, as in some containers).
type cgroupMount struct {
	Point, Root string
}

// dir is the directory of the cgroup path (as /proc/self/cgroup gives it)
// under this mount.
func (m cgroupMount) dir(path string) string {
	if m.Root != "/" {
		if rest, ok := strings.CutPrefix(path, m.Root); ok && (rest == "" || rest[0] == '/') {
			path = rest
		}
	}
	return filepath.Join(m.Point, path)
}

// detectCgroups finds the cgroup version and prepares the parent cgroup.
// With parentOverride set (v2: a directory; v1: a path relative to each
// hierarchy's root) it is used instead of the process's own cgroup.
func detectCgroups(parentOverride string) (*cgroups, error) {
	mounts, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	own, err := ownCgroups()
	if err != nil {
		return nil, err
	}
	// A v2 hierarchy is used when it can do the job: it has memory and pids.
	// Hybrid hosts (v1 controllers, an empty v2) fall back to v1.
	if m, ok := mounts["unified"]; ok {
		if ctrls, _ := os.ReadFile(filepath.Join(m.Point, "cgroup.controllers")); hasAll(string(ctrls), "memory", "pids", "cpu") {
			cg, err := setupV2(m, own[""], parentOverride)
			if err != nil {
				return nil, &SetupError{Step: "cgroup v2", Err: err}
			}
			return cg, nil
		}
	}
	// v1: each controller's hierarchy, wherever and with whatever else it
	// is mounted (systemd co-mounts cpu and cpuacct, others may co-mount
	// more). One parent directory per hierarchy, shared by its controllers.
	cg := &cgroups{parents: make(map[string]string)}
	for _, c := range v1Known {
		m, ok := mounts[c]
		if !ok && slices.Contains(v1Optional, c) {
			continue
		}
		if !ok {
			return nil, &SetupError{Step: "cgroup", Err: fmt.Errorf("no cgroup v2 with memory, pids and cpu, and no cgroup v1 %q hierarchy mounted", c)}
		}
		dir := filepath.Join(m.dir(own[c]), cgroupParentName)
		if parentOverride != "" {
			dir = filepath.Join(m.Point, parentOverride, cgroupParentName)
			if !within(m.Point, filepath.Join(m.Point, parentOverride)) {
				return nil, &SetupError{Step: "cgroup", Err: fmt.Errorf("cgroup parent %q leaves the %s hierarchy (%s): give a path inside it", parentOverride, c, m.Point)}
			}
		}
		cg.parents[c] = dir
		if slices.Contains(v1Optional, c) {
			continue // made when a sandbox needs it (createSandbox)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, &SetupError{Step: "cgroup v1", Err: cgroupWriteError(m, dir, err)}
		}
		cg.parents[c] = dir
	}
	_, err = os.Stat(filepath.Join(cg.parents["memory"], "memory.memsw.limit_in_bytes"))
	cg.memsw = err == nil
	_, err = os.Stat(filepath.Join(cg.parents["memory"], tcpLimitFile))
	cg.tcpmem = err == nil
	return cg, nil
}

// delegationHelp says how to give the engine a cgroup of its own with the
// controllers it needs.
const delegationHelp = "run the engine in a delegated cgroup of its own: as a systemd unit with Delegate=yes " +
	"(deploy/sandbox-run.service), or for one command `systemd-run --scope -p Delegate=yes sandbox-run ...`, " +
	"or point cgroup_parent (SANDBOX_RUN_CGROUP_PARENT, --cgroup-parent) at a cgroup whose controllers are delegated to it"

// cgroupWriteError explains the errors a host without a usable cgroup
// gives, and passes the others on.
func cgroupWriteError(m cgroupMount, path string, err error) error {
	if errors.Is(err, syscall.EROFS) {
		return fmt.Errorf("cannot write %s: the cgroup filesystem at %s is read-only (an unprivileged container?); the engine "+
			"makes a cgroup for each run and needs a writable cgroup delegated to it: give the container a writable cgroupfs of "+
			"its own (e.g. docker run --privileged --cgroupns=private), or, on the host, %s (%w)", path, m.Point, delegationHelp, err)
	}
	return err
}

// within says whether the clean path p is dir or below it: a cgroup
// parent given as "../x" must not make directories outside the
// hierarchy's mount.
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, filepath.Clean(p))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

func setupV2(m cgroupMount, own, override string) (*cgroups, error) {
	base := m.dir(own)
	if filepath.Base(base) == supervisorLeaf {
		// An engine before us in this process (or its parent) moved us into
		// the leaf: the delegated cgroup is the one above it.
		base = filepath.Dir(base)
	}
	if override != "" {
		base = override
		if !filepath.IsAbs(base) {
			base = filepath.Join(m.Point, override)
		}
		if !within(m.Point, base) {
			return nil, fmt.Errorf("cgroup parent %q is outside the cgroup2 mount %s", override, m.Point)
		}
		if err := os.MkdirAll(base, 0o755); err != nil {
			return nil, cgroupWriteError(m, base, err)
		}
	}
	// The controllers must be delegated to this cgroup: they are when its
	// parent enables them for it (systemd does for Delegate=yes units).
	have, err := os.ReadFile(filepath.Join(base, "cgroup.controllers"))
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, c := range []string{"memory", "pids", "cpu"} {
		if !hasAll(string(have), c) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("the cgroup %s has no %s controller%s (its parent does not delegate them: a systemd unit or "+
			"session without Delegate=yes); %s", base, strings.Join(missing, ", "), map[bool]string{true: "s"}[len(missing) > 1], delegationHelp)
	}
	const ctrls = "+memory +pids +cpu"
	err = os.WriteFile(filepath.Join(base, "cgroup.subtree_control"), []byte(ctrls), 0)
	if errors.Is(err, syscall.EBUSY) && override == "" {
		// Our own cgroup (a systemd unit with Delegate=yes, a container)
		// holds our process, and v2 allows no controllers in a cgroup with
		// processes: move ourselves into a leaf first, as container
		// runtimes nested in a delegated cgroup do. Never anyone else: a
		// cgroup shared with other processes (a login session's, after
		// sudo) is not ours to rearrange.
		if err = moveSelfToLeaf(base, filepath.Join(base, supervisorLeaf)); err != nil {
			return nil, cgroupWriteError(m, base, err)
		}
		err = os.WriteFile(filepath.Join(base, "cgroup.subtree_control"), []byte(ctrls), 0)
	}
	if errors.Is(err, syscall.EBUSY) {
		return nil, fmt.Errorf("cannot enable controllers in %s: other processes live in it (cgroup v2 allows no controllers in a cgroup with processes, and the engine moves no process it did not start); %s", base, delegationHelp)
	}
	if err != nil {
		return nil, fmt.Errorf("enable controllers in %s: %w", base, cgroupWriteError(m, base, err))
	}
	parent := filepath.Join(base, cgroupParentName)
	if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, cgroupWriteError(m, parent, err)
	}
	if err := os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte(ctrls), 0); err != nil {
		return nil, fmt.Errorf("enable controllers in %s: %w", parent, err)
	}
	return &cgroups{v2: true, parent: parent}, nil
}

// moveSelfToLeaf moves this process into the leaf cgroup below dir, when it
// is the only process in dir; otherwise it moves nothing and says who
// else is there.
func moveSelfToLeaf(dir, leaf string) error {
	procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return err
	}
	self := strconv.Itoa(os.Getpid())
	var others []string
	for _, pid := range strings.Fields(string(procs)) {
		if pid != self {
			others = append(others, pid)
		}
	}
	if len(others) > 0 {
		if len(others) > 5 {
			others = append(others[:5], "...")
		}
		return fmt.Errorf("cannot enable controllers in %s: it holds processes the engine did not start (pids %s), "+
			"and cgroup v2 allows no controllers in a cgroup with processes; the engine will not move them; %s",
			dir, strings.Join(others, " "), delegationHelp)
	}
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(self), 0); err != nil {
		return fmt.Errorf("move the engine into %s: %w", leaf, err)
	}
	return nil
}

// closeOptional removes the parents of the optional hierarchies when
// they are empty (another engine's sandboxes may be in them: then they
// stay) and hold none of a needed controller's.
func (c *cgroups) closeOptional() {
	for _, o := range v1Optional {
		dir, ok := c.parents[o]
		if !ok {
			continue
		}
		shared := false
		for _, n := range v1Controllers {
			shared = shared || c.parents[n] == dir
		}
		if !shared {
			os.Remove(dir)
		}
	}
}

func (c *cgroups) info() CgroupInfo {
	if c.v2 {
		return CgroupInfo{Version: 2, Parents: map[string]string{"unified": c.parent}, Controllers: []string{"cpu", "memory", "pids"}}
	}
	return CgroupInfo{Version: 1, Parents: c.parents, Controllers: v1Controllers}
}

// runCgroup is the cgroup of one run.
type runCgroup struct {
	v2   bool
	dir  string            // v2
	dirs map[string]string // v1: controller → dir
	fd   int               // v2: open directory for CLONE_INTO_CGROUP
	// handover are the descriptors PID 1 gets to put the program here:
	// v2 the directory (fd), v1 each hierarchy's tasks file and pids.max.
	handover []int
	// spare is a process never to kill: the sandbox's PID 1, one of whose
	// threads passes through a v1 run cgroup to fork the program.
	spare int
	// v1 runs of a sandbox: each hierarchy's directory open (files are
	// reached from it, the kernel walking one name instead of the whole
	// path), and the sandbox's, to remove it from.
	dfd    map[string]int
	parent map[string]int
	name   string
	// acct is the sandbox's cpuacct directory (not owned), read from
	// cpuBase on.
	acct    int
	cpuBase time.Duration
	limits  Limits // what the memory and pids limits were set to (v1)
	// recycled: a finished run's v1 cgroups, kept as fresh ones for the
	// next run of its tenant (see ctCgroup.recycle).
	recycled bool
	tenant   string
}

// writeAt writes value to the file name of the cgroup directory dirfd.
func writeAt(dirfd int, name, value string) error {
	fd, err := unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: name, Err: err}
	}
	defer unix.Close(fd)
	if err := writeFD(fd, value); err != nil {
		return &os.PathError{Op: "write", Path: name, Err: err}
	}
	return nil
}

// writeFD writes value to the open cgroup file fd, again while a signal
// interrupts it. Some writes check for a pending signal before they do
// anything (v1's memory.limit_in_bytes does, on each round of reclaim)
// and fail with EINTR, which SA_RESTART does not restart; the Go runtime
// signals its threads (SIGURG, to preempt goroutines) at any time.
func writeFD(fd int, value string) error {
	b := []byte(value)
	for {
		_, err := unix.Write(fd, b)
		if err != unix.EINTR {
			return err
		}
	}
}

// create makes the cgroup name under the parent with the limits l; a zero
// Limits sets none.
func (c *cgroups) create(name string, l Limits) (*runCgroup, error) {
	pidsMax := l.Processes
	rc := &runCgroup{v2: c.v2, fd: -1}
	if c.v2 {
		rc.dir = filepath.Join(c.parent, name)
		if err := os.Mkdir(rc.dir, 0o755); err != nil {
			return nil, err
		}
		period := 100000
		files := []struct{ file, value string }{
			{"memory.max", strconv.FormatInt(l.Memory, 10)},
			{"memory.swap.max", "0"},
			{"memory.oom.group", "1"},
			{"pids.max", strconv.Itoa(pidsMax)},
			{"cpu.max", fmt.Sprintf("%d %d", int(l.CPUs*float64(period)), period)},
		}
		if l.Idle {
			files = append(files, struct{ file, value string }{"cpu.idle", "1"})
		}
		if l == (Limits{}) {
			files = nil
		}
		for _, f := range files {
			err := os.WriteFile(filepath.Join(rc.dir, f.file), []byte(f.value), 0)
			if err != nil && !((f.file == "memory.swap.max" || f.file == "cpu.idle") && errors.Is(err, os.ErrNotExist)) {
				rc.remove()
				return nil, fmt.Errorf("cgroup %s: %w", f.file, err)
			}
		}
		fd, err := unix.Open(rc.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			rc.remove()
			return nil, err
		}
		rc.fd = fd
		return rc, nil
	}
	rc.dirs = make(map[string]string, len(c.parents))
	for _, parent := range distinctDirs(c.parents) {
		dir := filepath.Join(parent, name)
		if err := os.Mkdir(dir, 0o755); err != nil { // an existing one is someone else's
			rc.remove()
			return nil, err
		}
		// Every controller of this hierarchy has its files here.
		for ctrl, p := range c.parents {
			if p == parent {
				rc.dirs[ctrl] = dir
			}
		}
	}
	mem := strconv.FormatInt(l.Memory, 10)
	period := 100000
	files := []struct{ ctrl, file, value string }{
		{"memory", "memory.limit_in_bytes", mem},
		{"memory", "memory.memsw.limit_in_bytes", mem}, // absent without swap accounting
		{"memory", tcpLimitFile, mem},                  // absent without kernel memory accounting
		{"memory", "memory.swappiness", "0"},
		{"pids", "pids.max", strconv.Itoa(pidsMax)},
		{"cpu", "cpu.cfs_period_us", strconv.Itoa(period)},
		{"cpu", "cpu.cfs_quota_us", strconv.Itoa(int(l.CPUs * float64(period)))},
	}
	if l == (Limits{}) {
		files = nil
	}
	for _, f := range files {
		err := os.WriteFile(filepath.Join(rc.dirs[f.ctrl], f.file), []byte(f.value), 0)
		if err != nil && !(f.file != "memory.limit_in_bytes" && errors.Is(err, os.ErrNotExist)) {
			rc.remove()
			return nil, fmt.Errorf("cgroup %s: %w", f.file, err)
		}
	}
	return rc, nil
}

func (rc *runCgroup) cpu() (time.Duration, error) {
	switch {
	case rc.v2 && rc.fd >= 0:
		return monitor.CgroupV2CPUAt(rc.fd)
	case rc.v2:
		return monitor.CgroupV2CPU(rc.dir)
	case rc.dfd != nil:
		cpu, err := monitor.CgroupV1CPUAt(rc.acct)
		return cpu - rc.cpuBase, err
	}
	return monitor.CgroupV1CPU(rc.dirs["cpuacct"])
}

// usage is what the run used; on v1, its CPU time only when cpu is set
// (reading it there is one more file on the path of every run).
func (rc *runCgroup) usage(cpu bool) (monitor.Usage, error) {
	switch {
	case rc.v2 && rc.fd >= 0:
		return monitor.CgroupV2At(rc.fd)
	case rc.v2:
		return monitor.CgroupV2(rc.dir)
	case rc.dfd != nil:
		u, err := monitor.CgroupV1At(rc.dfd["memory"], -1, rc.dfd["pids"])
		if err == nil && cpu {
			u.CPU, err = rc.cpu()
		}
		if err == nil {
			u.PeakMemory += readIntAt(rc.dfd["memory"], tcpPeakFile)
		}
		return u, err
	}
	u, err := monitor.CgroupV1(rc.dirs["memory"], rc.dirs["cpuacct"], rc.dirs["pids"])
	if err == nil {
		if tcp, err := monitor.ReadInt(filepath.Join(rc.dirs["memory"], tcpPeakFile)); err == nil && tcp > 0 {
			u.PeakMemory += tcp
		}
	}
	return u, err
}

// readIntAt reads the number in the file name of the directory dirfd; 0
// when it cannot (an absent file: a kernel without that accounting).
func readIntAt(dirfd int, name string) int64 {
	v, err := monitor.ReadIntAt(dirfd, name)
	if err != nil || v < 0 {
		return 0
	}
	return v
}

// procs lists the processes still in the run's cgroup.
func (rc *runCgroup) procs() []int {
	dir := rc.dir
	if !rc.v2 {
		dir = rc.dirs["pids"]
	}
	f, err := os.Open(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	defer f.Close()
	var pids []int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if p, err := strconv.Atoi(strings.TrimSpace(sc.Text())); err == nil {
			pids = append(pids, p)
		}
	}
	return pids
}

// kill ends every process in the run's cgroup. The pid namespace already
// dies with its init; this is the second layer.
func (rc *runCgroup) kill() {
	if rc.v2 {
		if os.WriteFile(filepath.Join(rc.dir, "cgroup.kill"), []byte("1"), 0) == nil {
			return
		}
	}
	for _, p := range rc.procs() {
		if p != rc.spare {
			_ = unix.Kill(p, unix.SIGKILL)
		}
	}
}

// remove kills what is left and removes the cgroup directories, waiting
// briefly for dying processes to leave.
func (rc *runCgroup) remove() error {
	if rc.fd >= 0 {
		unix.Close(rc.fd)
		rc.fd = -1
	}
	for _, fd := range rc.handover {
		unix.Close(fd)
	}
	rc.handover = nil
	if rc.dfd != nil {
		return rc.removeAt()
	}
	dirs := []string{rc.dir}
	if !rc.v2 {
		dirs = distinctDirs(rc.dirs)
	}
	var last error
	for _, d := range dirs {
		if d == "" {
			continue
		}
		last = nil
		for wait := time.Millisecond; ; wait *= 2 {
			err := unix.Rmdir(d)
			if err == nil || errors.Is(err, unix.ENOENT) {
				break
			}
			if wait > 2*time.Second {
				last = fmt.Errorf("remove cgroup %s: %w", d, err)
				break
			}
			rc.kill()
			time.Sleep(wait)
		}
	}
	return last
}

// removeAt removes a v1 run cgroup from its sandbox's directories.
func (rc *runCgroup) removeAt() error {
	for _, fd := range distinctFDs(rc.dfd) {
		unix.Close(fd)
	}
	rc.dfd = nil
	var last error
	for _, ctrl := range distinctCtrls(rc.parent) {
		parent := rc.parent[ctrl]
		for wait := time.Millisecond; ; wait *= 2 {
			err := unix.Unlinkat(parent, rc.name, unix.AT_REMOVEDIR)
			if err == nil || err == unix.ENOENT {
				break
			}
			if wait > 2*time.Second {
				last = fmt.Errorf("remove cgroup %s: %w", rc.dirs[ctrl], err)
				break
			}
			rc.kill()
			time.Sleep(wait)
		}
	}
	return last
}

// cgroupMounts maps each v1 controller (and "unified" for v2) to the mount
// of its hierarchy, read from /proc/self/mountinfo. Co-mounted controllers
// (cpu,cpuacct) map to the same mount; a hierarchy mounted at several
// places counts at its first.
func cgroupMounts() (map[string]cgroupMount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseCgroupMounts(f)
}

func parseCgroupMounts(r io.Reader) (map[string]cgroupMount, error) {
	m := make(map[string]cgroupMount)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if sep < 6 || len(fields) < sep+4 {
			continue
		}
		mnt := cgroupMount{Point: mountinfo.Unescape(fields[4]), Root: mountinfo.Unescape(fields[3])}
		fsType, superOpts := fields[sep+1], fields[sep+3]
		switch fsType {
		case "cgroup2":
			if _, dup := m["unified"]; !dup {
				m["unified"] = mnt
			}
		case "cgroup":
			for _, opt := range strings.Split(superOpts, ",") {
				if _, dup := m[opt]; !dup && slices.Contains(v1Known, opt) {
					m[opt] = mnt
				}
			}
		}
	}
	return m, sc.Err()
}

// ownCgroups maps each controller ("" for v2) to this process's cgroup path.
func ownCgroups() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	m := make(map[string]string)
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			m[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			m[c] = parts[2]
		}
	}
	return m, nil
}

func hasAll(list string, want ...string) bool {
	have := strings.Fields(list)
	for _, w := range want {
		found := false
		for _, h := range have {
			if h == w {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// ctCgroup is a sandbox's own cgroup. PID 1 lives in it (on v2 in its
// "init" leaf, v2 allowing no processes beside child cgroups with
// controllers) and each run gets a fresh child cgroup.
type ctCgroup struct {
	c     *cgroups
	name  string // relative to the engine's parent
	owner int    // host uid of the sandbox's PID 1
	fd    int    // v2: the directory, to clone PID 1 into
	v1    *runCgroup
	dfd   map[string]int // v1: each hierarchy's directory
	// mu guards next, the cgroups prepared for the next run, kept, a
	// finished run's recycled for the next run of the same tenant (v1,
	// see recycle), and removed.
	mu      sync.Mutex
	next    *runCgroup
	kept    *runCgroup
	removed bool
	idle    bool // v1: cpu.idle of the sandbox's cgroup is 1
}

// setIdle writes cpu.idle in the directory dirfd; a kernel without it
// (before 5.15) is left as it is.
func setIdle(dirfd int, idle bool) error {
	v := "0"
	if idle {
		v = "1"
	}
	err := writeAt(dirfd, "cpu.idle", v)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	return err
}

// ctInitLeaf is where a v2 sandbox's PID 1 lives.
const ctInitLeaf = "init"

// createSandbox makes a sandbox's cgroup. On v2, PID 1 (host uid owner)
// clones each run's program into its cgroup itself: the kernel wants it
// allowed to write cgroup.procs of the run's cgroup and of the closest
// cgroup above both, which is this one.
//
// Only a sandbox that may be frozen (freezable: a live one) is in v1's
// freezer hierarchy: one cgroup less to make and remove for every other.
func (c *cgroups) createSandbox(name string, owner int, freezable bool) (*ctCgroup, error) {
	ct := &ctCgroup{c: c, name: name, owner: owner, fd: -1}
	in := c
	if _, ok := c.parents["freezer"]; ok && !freezable {
		cc := *c
		cc.parents = maps.Clone(c.parents)
		delete(cc.parents, "freezer")
		in = &cc
	}
	rc, err := in.create(name, Limits{})
	if dir, ok := in.parents["freezer"]; ok && errors.Is(err, fs.ErrNotExist) {
		// The freezer's parent is made with the first sandbox that needs
		// it: it may lie outside the engine's own cgroup (a systemd unit
		// is in no freezer cgroup of its own), and an engine that closes
		// removes it when it is empty (closeOptional), perhaps just now.
		if err = os.MkdirAll(dir, 0o755); err == nil {
			rc, err = in.create(name, Limits{})
		}
	}
	if err != nil {
		return nil, err
	}
	if !c.v2 {
		ct.v1 = rc
		// Run cgroups take their swappiness from here.
		if err := os.WriteFile(filepath.Join(rc.dirs["memory"], "memory.swappiness"), []byte("0"), 0); err != nil {
			ct.remove()
			return nil, err
		}
		ct.dfd = make(map[string]int, len(rc.dirs))
		for _, dir := range distinctDirs(rc.dirs) {
			fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				ct.remove()
				return nil, err
			}
			for ctrl, d := range rc.dirs {
				if d == dir {
					ct.dfd[ctrl] = fd
				}
			}
		}
		return ct, nil
	}
	ct.fd, rc.fd = rc.fd, -1
	if err := os.Chown(filepath.Join(rc.dir, "cgroup.procs"), owner, owner); err != nil {
		ct.remove()
		return nil, err
	}
	return ct, nil
}

// settle puts PID 1 where it stays: on v1 it joins the sandbox's memory
// and pids cgroups (while it builds the root) and the engine's CPU ones
// (see cpuOnly); on v2, born in the sandbox's cgroup, it moves into the
// init leaf so that runs can have controllers.
func (ct *ctCgroup) settle(pid int) error {
	if !ct.c.v2 {
		p := []byte(strconv.Itoa(pid))
		for _, c := range distinctCtrls(ct.v1.dirs) {
			dir := ct.v1.dirs[c]
			if ct.cpuOnly(c) {
				dir = ct.c.parents[c]
			}
			if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), p, 0); err != nil {
				return fmt.Errorf("join cgroup %s: %w", dir, err)
			}
		}
		return nil
	}
	dir := filepath.Join(ct.c.parent, ct.name)
	leaf := filepath.Join(dir, ctInitLeaf)
	if err := os.Mkdir(leaf, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		return fmt.Errorf("move PID 1 into %s: %w", leaf, err)
	}
	return os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+memory +pids +cpu"), 0)
}

// cpuOnly says whether the v1 hierarchy of ctrl is one of the CPU
// controllers' (cpu, cpuacct) that holds neither memory nor pids. PID 1
// lives in the engine's cgroup of each, beside the sandboxes; only its
// spawner thread, and so the programs it forks, live in the sandbox's own
// (spawnerTasks). PID 1's threads wake and sleep through every run
// (control messages, reaping, unmounts, the Go runtime's own): in the
// program's CPU group they had the scheduler, which weighs a group by its
// recent load, leave programs waiting for several of their peers' runs
// (python's p99 at 4 clients 2.6-3.2x a bare run's, against 1.3-1.4x
// without, docs/BENCHMARKS.md), and their CPU counted in the program's quota.
func (ct *ctCgroup) cpuOnly(ctrl string) bool {
	dirs := ct.c.parents
	shared := func(other string) bool { return dirs[other] == dirs[ctrl] }
	return (shared("cpu") || shared("cpuacct")) && !shared("memory") && !shared("pids")
}

// spawnerTasks opens the tasks files of the sandbox's own cgroups in the
// hierarchies of cpuOnly, which PID 1's spawner thread joins: the programs
// it forks are born there.
func (ct *ctCgroup) spawnerTasks() ([]int, error) {
	var fds []int
	for _, c := range distinctCtrls(ct.dfd) {
		if !ct.cpuOnly(c) {
			continue
		}
		fd, err := unix.Openat(ct.dfd[c], "tasks", unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			closeFDs(fds)
			return nil, fmt.Errorf("cgroup %s: %w", c, err)
		}
		fds = append(fds, fd)
	}
	return fds, nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// createRun makes the cgroup of one run inside the sandbox's. On v1 its
// pids.max starts one higher than the limit: the thread of PID 1 that
// forks the program counts in it until it has set the limit and gone.
func (ct *ctCgroup) createRun(name string, l Limits, tenant string) (*runCgroup, error) {
	if !ct.c.v2 {
		ct.mu.Lock()
		defer ct.mu.Unlock()
		var rc *runCgroup
		var err error
		if ct.kept != nil && ct.kept.tenant == tenant {
			rc, ct.kept = ct.kept, nil
		} else {
			rc, ct.next = ct.next, nil
		}
		if rc != nil {
			rc, err = ct.take(rc, name, l)
		}
		if rc == nil && err == nil {
			rc, err = ct.createRunV1(name, l)
		}
		if err != nil {
			return nil, err
		}
		return rc, ct.startRunV1(rc, l)
	}
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if rc, err := ct.takeNextV2(l); rc != nil || err != nil {
		return rc, err
	}
	return ct.createRunV2(name, l)
}

// createRunV2 makes a v2 run cgroup in the sandbox's, with the limits l,
// that PID 1 (the sandbox's owner) may clone the program into.
func (ct *ctCgroup) createRunV2(name string, l Limits) (*runCgroup, error) {
	rc, err := ct.c.create(filepath.Join(ct.name, name), l)
	if err != nil {
		return nil, err
	}
	if err := os.Chown(filepath.Join(rc.dir, "cgroup.procs"), ct.owner, ct.owner); err != nil {
		rc.remove()
		return nil, err
	}
	rc.limits = l
	return rc, nil
}

// takeNextV2 gives the run the cgroup prepared for it, with its limits
// where they differ from the last run's; nil when there is none. v2 cannot
// rename a cgroup: the run keeps the next- name it was made with.
func (ct *ctCgroup) takeNextV2(l Limits) (*runCgroup, error) {
	rc := ct.next
	if rc == nil {
		return nil, nil
	}
	ct.next = nil
	var files [][2]string
	if l.Memory != rc.limits.Memory {
		files = append(files, [2]string{"memory.max", strconv.FormatInt(l.Memory, 10)})
	}
	if l.Processes != rc.limits.Processes {
		files = append(files, [2]string{"pids.max", strconv.Itoa(l.Processes)})
	}
	if l.CPUs != rc.limits.CPUs {
		files = append(files, [2]string{"cpu.max", fmt.Sprintf("%d %d", int(l.CPUs*cfsPeriod), cfsPeriod)})
	}
	for _, f := range files {
		if err := writeAt(rc.fd, f[0], f[1]); err != nil {
			rc.remove()
			return nil, fmt.Errorf("cgroup %s: %w", f[0], err)
		}
	}
	if l.Idle != rc.limits.Idle {
		if err := setIdle(rc.fd, l.Idle); err != nil {
			rc.remove()
			return nil, fmt.Errorf("cgroup cpu.idle: %w", err)
		}
	}
	rc.limits = l
	return rc, nil
}

// prepareNext makes the cgroups of the sandbox's next run ahead, with the
// limits of the last, off the path of any run: creating a memory cgroup
// and writing its limits is the costliest step of starting a run. They are
// named next-<n>, so that no check mistakes them for a run's; v1 renames
// them when a run takes them, v2 cannot (the program sees next-<n> as its
// cgroup there: random as run-<n> is).
func (ct *ctCgroup) prepareNext(l Limits) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.next != nil || ct.removed {
		return
	}
	name := fmt.Sprintf("next-%016x", rand.Uint64())
	var rc *runCgroup
	var err error
	if ct.c.v2 {
		rc, err = ct.createRunV2(name, l)
	} else {
		rc, err = ct.createRunV1(name, l)
	}
	if err == nil {
		ct.next = rc
	}
}

// take turns prepared or recycled cgroups into the run's: renamed, and
// with the run's limits where they differ.
func (ct *ctCgroup) take(rc *runCgroup, name string, l Limits) (*runCgroup, error) {
	rc.recycled = false
	if err := rc.rename(name); err != nil {
		rc.remove()
		return nil, err
	}
	mem := strconv.FormatInt(l.Memory, 10)
	var files [][3]string
	if l.Memory != rc.limits.Memory {
		// The kernel keeps memory.limit <= memsw.limit at every step.
		files = append(files, [3]string{"memory", "memory.limit_in_bytes", mem})
		if ct.c.memsw && l.Memory > rc.limits.Memory {
			files = append([][3]string{{"memory", "memory.memsw.limit_in_bytes", mem}}, files...)
		} else if ct.c.memsw {
			files = append(files, [3]string{"memory", "memory.memsw.limit_in_bytes", mem})
		}
		if ct.c.tcpmem {
			files = append(files, [3]string{"memory", tcpLimitFile, mem})
		}
	}
	if l.Processes != rc.limits.Processes {
		files = append(files, [3]string{"pids", "pids.max", strconv.Itoa(l.Processes + 1)})
	}
	for _, f := range files {
		if err := writeAt(rc.dfd[f[0]], f[1], f[2]); err != nil {
			rc.remove()
			return nil, fmt.Errorf("cgroup %s: %w", f[1], err)
		}
	}
	rc.limits = l
	return rc, nil
}

// recycleLeftover is the most memory a finished run's v1 memory cgroup may
// still have charged to be kept for the next run: about what the kernel's
// per-CPU charge caches (of pages and of kernel objects) hold ahead, 64
// pages each per CPU, which is no memory of the run's.
var recycleLeftover = int64(2*64*os.Getpagesize()) * int64(runtime.NumCPU())

// recycle keeps a finished run's v1 cgroups for the container's next run
// of the same tenant, instead of removing them and making new ones (a
// memory cgroup's mkdir and rmdir are the costliest steps of a v1 run's
// set-up and clean-up). Only a cgroup the run left as a fresh one would
// be (the caller has checked that no OOM kill or refused fork was
// counted): no process in it and no more memory charged than
// recycleLeftover. What may remain charged (the charge caches' and a few
// kernel objects') stays within the tenant: a run of another tenant takes
// the cgroups made fresh for it (next). The next run renames them and
// takes them with its own limits (take). False when they were not kept:
// the caller removes them.
func (ct *ctCgroup) recycle(rc *runCgroup, tenant string) bool {
	if ct.c.v2 || rc.v2 || rc.dfd == nil {
		return false
	}
	if n, err := monitor.ReadIntAt(rc.dfd["pids"], "pids.current"); err != nil || n != 0 {
		return false
	}
	if n, err := monitor.ReadIntAt(rc.dfd["memory"], "memory.usage_in_bytes"); err != nil || n > recycleLeftover {
		return false
	}
	// The run's peaks go (each write sets its peak to what is charged
	// now: at most recycleLeftover), and pids.max is one above the limit
	// again (PID 1 lowered it after its fork), as in a fresh cgroup.
	files := [][2]string{{"memory", "memory.max_usage_in_bytes"}}
	if ct.c.memsw {
		files = append(files, [2]string{"memory", "memory.memsw.max_usage_in_bytes"})
	}
	if ct.c.tcpmem {
		files = append(files, [2]string{"memory", tcpPeakFile})
	}
	for _, f := range files {
		if writeAt(rc.dfd[f[0]], f[1], "0") != nil {
			return false
		}
	}
	if writeAt(rc.dfd["pids"], "pids.max", strconv.Itoa(rc.limits.Processes+1)) != nil {
		return false
	}
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.removed || rc.rename(fmt.Sprintf("next-%016x", rand.Uint64())) != nil {
		return false
	}
	if ct.kept != nil {
		ct.kept.remove()
	}
	rc.recycled, rc.tenant = true, tenant
	ct.kept = rc
	return true
}

// rename renames a v1 run cgroup in every hierarchy; on failure it is left
// as it was.
func (rc *runCgroup) rename(name string) error {
	ctrls := distinctCtrls(rc.parent)
	for i, ctrl := range ctrls {
		parent := rc.parent[ctrl]
		if err := unix.Renameat(parent, rc.name, parent, name); err != nil {
			for _, done := range ctrls[:i] {
				unix.Renameat(rc.parent[done], name, rc.parent[done], rc.name)
			}
			return fmt.Errorf("cgroup %s: %w", ctrl, err)
		}
	}
	for ctrl, dir := range rc.dirs {
		rc.dirs[ctrl] = filepath.Join(filepath.Dir(dir), name)
	}
	rc.name = name
	return nil
}

// startRunV1 sets what a v1 run keeps on the sandbox's own cgroups: the
// CPU quota (which the write refills) and where its CPU time counts from.
func (ct *ctCgroup) startRunV1(rc *runCgroup, l Limits) error {
	err := writeAt(ct.dfd["cpu"], "cpu.cfs_quota_us", strconv.Itoa(int(l.CPUs*cfsPeriod)))
	if err == nil && l.Idle != ct.idle {
		if err = setIdle(ct.dfd["cpu"], l.Idle); err == nil {
			ct.idle = l.Idle
		}
	}
	if err == nil {
		rc.cpuBase, err = monitor.CgroupV1CPUAt(rc.acct)
	}
	if err != nil {
		rc.remove()
		return fmt.Errorf("cgroup cpu: %w", err)
	}
	return nil
}

// cfsPeriod is the CPU bandwidth period on cgroup v1, the kernel's
// default, in microseconds.
const cfsPeriod = 100000

// createRunV1 makes a run's cgroup in each v1 hierarchy, working from the
// sandbox's open directories: this is on every run's path.
func (ct *ctCgroup) createRunV1(name string, l Limits) (_ *runCgroup, err error) {
	parents := make(map[string]int, len(v1RunControllers))
	for _, ctrl := range v1RunControllers {
		parents[ctrl] = ct.dfd[ctrl]
	}
	rc := &runCgroup{fd: -1, name: name, parent: parents, dfd: make(map[string]int, len(parents)), dirs: make(map[string]string, len(parents)), acct: ct.dfd["cpuacct"]}
	defer func() {
		if err != nil {
			rc.remove()
		}
	}()
	for _, ctrl := range distinctCtrls(parents) {
		if err := unix.Mkdirat(ct.dfd[ctrl], name, 0o755); err != nil {
			return nil, fmt.Errorf("cgroup %s: %w", ctrl, err)
		}
		fd, err := unix.Openat(ct.dfd[ctrl], name, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			unix.Unlinkat(ct.dfd[ctrl], name, unix.AT_REMOVEDIR)
			return nil, fmt.Errorf("cgroup %s: %w", ctrl, err)
		}
		// Controllers co-mounted with this one share the directory.
		for _, c := range v1RunControllers {
			if parents[c] == parents[ctrl] {
				rc.dirs[c] = filepath.Join(ct.v1.dirs[c], name)
				rc.dfd[c] = fd
			}
		}
	}
	// swappiness comes from the sandbox's cgroup.
	mem := strconv.FormatInt(l.Memory, 10)
	files := []struct {
		dirfd       int
		file, value string
	}{
		{rc.dfd["memory"], "memory.limit_in_bytes", mem},
		{rc.dfd["pids"], "pids.max", strconv.Itoa(l.Processes + 1)},
	}
	if ct.c.memsw {
		files = append(files, struct {
			dirfd       int
			file, value string
		}{rc.dfd["memory"], "memory.memsw.limit_in_bytes", mem})
	}
	if ct.c.tcpmem {
		files = append(files, struct {
			dirfd       int
			file, value string
		}{rc.dfd["memory"], tcpLimitFile, mem})
	}
	for _, f := range files {
		if err := writeAt(f.dirfd, f.file, f.value); err != nil {
			return nil, fmt.Errorf("cgroup %s: %w", f.file, err)
		}
	}
	for _, dfd := range distinctFDs(rc.dfd) {
		fd, err := unix.Openat(dfd, "tasks", unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		rc.handover = append(rc.handover, fd)
	}
	fd, err := unix.Openat(rc.dfd["pids"], "pids.max", unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	rc.handover = append(rc.handover, fd)
	rc.limits = l
	return rc, nil
}

// remove removes the sandbox's cgroups; PID 1 must be gone.
func (ct *ctCgroup) remove() error {
	ct.mu.Lock()
	ct.removed = true
	for _, rc := range []*runCgroup{ct.next, ct.kept} {
		if rc != nil {
			rc.remove()
		}
	}
	ct.next, ct.kept = nil, nil
	ct.mu.Unlock()
	if ct.fd >= 0 {
		unix.Close(ct.fd)
		ct.fd = -1
	}
	for _, fd := range distinctFDs(ct.dfd) {
		unix.Close(fd)
	}
	ct.dfd = nil
	if ct.v1 != nil {
		return ct.v1.remove()
	}
	dir := filepath.Join(ct.c.parent, ct.name)
	leaf := &runCgroup{v2: true, dir: filepath.Join(dir, ctInitLeaf), fd: -1}
	if _, err := os.Stat(leaf.dir); err == nil {
		if err := leaf.remove(); err != nil {
			return err
		}
	}
	return (&runCgroup{v2: true, dir: dir, fd: -1}).remove()
}

// distinctCtrls lists, in v1Known order, one controller of each
// hierarchy in m (controller → its directory or descriptor there):
// co-mounted controllers share one.
func distinctCtrls[V comparable](m map[string]V) []string {
	var ctrls []string
	seen := make(map[V]bool, len(m))
	for _, c := range v1Known {
		if v, ok := m[c]; ok && !seen[v] {
			seen[v] = true
			ctrls = append(ctrls, c)
		}
	}
	return ctrls
}

// distinctDirs lists the directories of dirs (controller → directory)
// once each, in v1Known order.
func distinctDirs(dirs map[string]string) []string {
	var out []string
	for _, c := range distinctCtrls(dirs) {
		out = append(out, dirs[c])
	}
	return out
}

// distinctFDs lists the descriptors of fds (controller → descriptor) once
// each, in v1Known order.
func distinctFDs(fds map[string]int) []int {
	var out []int
	for _, c := range distinctCtrls(fds) {
		out = append(out, fds[c])
	}
	return out
}
