package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// systemdV1Mountinfo is /proc/self/mountinfo of a systemd host on cgroup v1
// (and a container that sees a subtree of the memory hierarchy).
const systemdV1Mountinfo = `25 30 0:23 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
26 25 0:24 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:10 - cgroup cgroup rw,xattr,name=systemd
29 25 0:27 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:13 - cgroup cgroup rw,cpu,cpuacct
30 25 0:28 /docker/abc /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:14 - cgroup cgroup rw,memory
31 25 0:29 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,pids
32 25 0:30 / /sys/fs/cgroup/net_cls,net_prio rw,nosuid,nodev,noexec,relatime shared:16 - cgroup cgroup rw,net_cls,net_prio
33 25 0:31 / /sys/fs/cgroup/my\040cg rw,relatime - cgroup2 cgroup2 rw
`

// TestCgroupV1MountLayouts: controllers are found wherever their hierarchy
// is mounted, co-mounted ones (cpu,cpuacct) sharing one mount, and a
// subtree mount maps the process's cgroup path below its root.
func TestCgroupV1MountLayouts(t *testing.T) {
	m, err := parseCgroupMounts(strings.NewReader(systemdV1Mountinfo))
	if err != nil {
		t.Fatal(err)
	}
	if m["cpu"].Point != "/sys/fs/cgroup/cpu,cpuacct" || m["cpuacct"] != m["cpu"] {
		t.Errorf("cpu %+v, cpuacct %+v: want both at /sys/fs/cgroup/cpu,cpuacct", m["cpu"], m["cpuacct"])
	}
	if m["pids"].Point != "/sys/fs/cgroup/pids" || m["unified"].Point != "/sys/fs/cgroup/my cg" {
		t.Errorf("pids %+v, unified %+v", m["pids"], m["unified"])
	}
	if got := m["memory"].dir("/docker/abc/x"); got != "/sys/fs/cgroup/memory/x" {
		t.Errorf("memory dir of /docker/abc/x = %s", got)
	}
	if got := m["cpu"].dir("/user.slice"); got != "/sys/fs/cgroup/cpu,cpuacct/user.slice" {
		t.Errorf("cpu dir of /user.slice = %s", got)
	}
}

// TestCgroupV1CoMountedCreate: with cpu and cpuacct in one hierarchy a
// sandbox gets one directory there (not one per controller, whose second
// mkdir failed with "file exists"), and its removal removes it. Plain
// directories stand in for the hierarchies: no limit is written.
func TestCgroupV1CoMountedCreate(t *testing.T) {
	root := t.TempDir()
	parents := map[string]string{}
	for c, h := range map[string]string{"memory": "memory", "pids": "pids", "cpu": "cpu,cpuacct", "cpuacct": "cpu,cpuacct"} {
		parents[c] = filepath.Join(root, h, cgroupParentName)
		if err := os.MkdirAll(parents[c], 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cg := &cgroups{parents: parents}
	rc, err := cg.create("ct-1-1", Limits{})
	if err != nil {
		t.Fatalf("create in co-mounted hierarchies: %v", err)
	}
	if rc.dirs["cpu"] != rc.dirs["cpuacct"] || rc.dirs["cpu"] != filepath.Join(root, "cpu,cpuacct", cgroupParentName, "ct-1-1") {
		t.Errorf("cpu %s, cpuacct %s: want one directory", rc.dirs["cpu"], rc.dirs["cpuacct"])
	}
	if got := distinctDirs(rc.dirs); len(got) != 3 {
		t.Errorf("distinct directories %v, want 3 hierarchies", got)
	}
	if err := rc.remove(); err != nil {
		t.Fatal(err)
	}
	left, _ := filepath.Glob(filepath.Join(root, "*", cgroupParentName, "ct-*"))
	if len(left) > 0 {
		t.Errorf("left after remove: %v", left)
	}
	if n := cg.cleanStale(); n != 0 {
		t.Errorf("cleanStale removed %d of nothing", n)
	}
}

// TestCgroupLayoutUsed: the engine's parents follow the host's hierarchies:
// controllers that /proc/self/cgroup shows co-mounted share a directory.
// With SANDBOX_TEST_REQUIRE_CGROUP=1 (the v1 VM) it must be v1.
func TestCgroupLayoutUsed(t *testing.T) {
	info := testEngine(t).Cgroups()
	if want := os.Getenv("SANDBOX_TEST_REQUIRE_CGROUP"); want != "" && want != fmt.Sprint(info.Version) {
		t.Fatalf("engine uses cgroup v%d, want v%s", info.Version, want)
	}
	if info.Version != 1 {
		t.Skip("cgroup v2")
	}
	own, _ := os.ReadFile("/proc/self/cgroup")
	for _, line := range strings.Split(string(own), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		var ours []string
		for _, c := range strings.Split(parts[1], ",") {
			if _, ok := info.Parents[c]; ok {
				ours = append(ours, c)
			}
		}
		for _, c := range ours[min(1, len(ours)):] {
			if info.Parents[c] != info.Parents[ours[0]] {
				t.Errorf("co-mounted %s and %s have parents %s and %s", ours[0], c, info.Parents[ours[0]], info.Parents[c])
			}
		}
	}
	t.Logf("parents %v", info.Parents)
}

// startInCgroup starts the test binary as workload kind, born in the cgroup
// v2 directory dir.
func startInCgroup(t *testing.T, dir, kind string, cloneflags uintptr) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = []string{"SANDBOX_TEST_WORKLOAD=" + kind}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: cloneflags}
	if dir != "" {
		// Kept open until the test ends: the child is cloned at Start.
		fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
	}
	return cmd
}

// v2TestCgroup makes a cgroup beside the engine's parent, in the cgroup
// delegated to the test binary, and removes it at the end.
func v2TestCgroup(t *testing.T, name string) string {
	t.Helper()
	info := testEngine(t).Cgroups()
	if info.Version != 2 {
		t.Skip("needs cgroup v2 (run in scripts/cgroupv2-vm)")
	}
	dir := filepath.Join(filepath.Dir(info.Parents["unified"]), fmt.Sprintf("%s-%d", name, os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeTree(true, dir) })
	return dir
}

// TestForeignProcessesNotMoved: an engine whose cgroup v2 also holds
// processes it did not start (a login shell after sudo, sshd) moves none
// of them into its supervisor leaf: it refuses, saying how to get a
// delegated cgroup. Alone in its cgroup, it moves itself only.
func TestForeignProcessesNotMoved(t *testing.T) {
	dir := v2TestCgroup(t, "shared")
	sibling := startInCgroup(t, dir, "sleep", 0)
	if err := sibling.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		sibling.Process.Kill()
		sibling.Wait()
	}()
	out, _ := startInCgroup(t, dir, "engine", 0).CombinedOutput()
	t.Logf("%s", out)
	if !strings.Contains(string(out), "engine error") || !strings.Contains(string(out), "did not start") ||
		!strings.Contains(string(out), "Delegate=yes") || !strings.Contains(string(out), "cgroup_parent") {
		t.Errorf("engine in a shared cgroup: %s", out)
	}
	procs, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if !strings.Contains(" "+strings.Join(strings.Fields(string(procs)), " ")+" ", fmt.Sprintf(" %d ", sibling.Process.Pid)) {
		t.Errorf("the sibling %d was moved out of %s (its processes: %q)", sibling.Process.Pid, dir, procs)
	}
	if leaf, err := os.ReadFile(filepath.Join(dir, supervisorLeaf, "cgroup.procs")); err == nil && len(leaf) > 0 {
		t.Errorf("processes moved into the supervisor leaf: %q", leaf)
	}

	// Alone, the engine takes the cgroup: it moves itself, nothing else.
	alone := v2TestCgroup(t, "alone")
	out, err := startInCgroup(t, alone, "engine", 0).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "engine ok") {
		t.Errorf("engine alone in its cgroup: %v: %s", err, out)
	}
}

// TestMissingControllersNamed: in a cgroup v2 whose parent delegates no
// controllers (a systemd unit without Delegate=yes) the engine says which
// controllers are missing and how to get them, not a raw ENOENT.
func TestMissingControllersNamed(t *testing.T) {
	parent := v2TestCgroup(t, "nodelegate")
	dir := filepath.Join(parent, "unit")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out, _ := startInCgroup(t, dir, "engine", 0).CombinedOutput()
	t.Logf("%s", out)
	for _, want := range []string{"engine error", "no memory, pids, cpu controllers", "Delegate=yes", "systemd-run --scope -p Delegate=yes", "cgroup_parent"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("missing %q in: %s", want, out)
		}
	}
}

// TestReadOnlyCgroupfs: with the cgroup filesystem read-only (an
// unprivileged container) the engine says what it needs, not a raw EROFS.
// The remount happens in a mount namespace of the child's own.
func TestReadOnlyCgroupfs(t *testing.T) {
	if os.Getenv("SANDBOX_TEST_REQUIRE_CGROUP") == "" {
		t.Skip("remounts cgroupfs (in a private mount namespace): run in scripts/cgroupv2-vm")
	}
	out, _ := startInCgroup(t, "", "engine-ro", syscall.CLONE_NEWNS).CombinedOutput()
	t.Logf("%s", out)
	for _, want := range []string{"engine error", "read-only", "read-only file system", "Delegate=yes"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("missing %q in: %s", want, out)
		}
	}
}

// runEngineWorkload is the child side of the tests above: it builds an
// engine and says how that went. "engine-ro" first makes every cgroup
// mount read-only in its own mount namespace.
func runEngineWorkload(kind string) {
	if kind == "engine-ro" {
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			fmt.Println("engine setup:", err)
			os.Exit(1)
		}
		mounts, _ := cgroupMounts()
		for _, m := range mounts {
			unix.Mount("", m.Point, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, "")
		}
		// A fresh parent: the existing one would need no write.
		if _, err := New(Config{UIDBase: testUIDs(2), UIDSlots: 1, CgroupParent: fmt.Sprintf("ro-test-%d", os.Getpid())}); err != nil {
			fmt.Println("engine error:", err)
			return
		}
		fmt.Println("engine ok")
		return
	}
	e, err := New(Config{UIDBase: testUIDs(2), UIDSlots: 1, PoolSize: NoPool})
	if err != nil {
		fmt.Println("engine error:", err)
		return
	}
	defer e.Close()
	cg, _ := os.ReadFile("/proc/self/cgroup")
	fmt.Printf("engine ok in %s", cg)
}

// TestNextRunCgroupPrepared: after a run, a pooled sandbox has the next
// run's cgroup made ahead (v1 and v2 alike), off the path of the next run,
// and that run takes it, with its own limits.
func TestNextRunCgroupPrepared(t *testing.T) {
	e, err := New(Config{UIDBase: testUIDs(14), UIDSlots: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	spec := withDefaults(&Spec{Args: []string{"/bin/true"}})
	if _, err := e.Run(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	e.Quiesce()
	var c *container
	e.pool.mu.Lock()
	for _, list := range e.pool.idle {
		c = list[0]
	}
	e.pool.mu.Unlock()
	if c == nil {
		t.Fatal("no pooled sandbox")
	}
	c.cg.mu.Lock()
	next := c.cg.next
	c.cg.mu.Unlock()
	if next == nil {
		t.Fatal("no cgroup prepared for the next run")
	}
	dir := next.dir
	if !next.v2 {
		dir = next.dirs["memory"]
	}
	if _, err := os.Stat(dir); err != nil || !strings.HasPrefix(filepath.Base(dir), "next-") {
		t.Fatalf("prepared cgroup %s: %v", dir, err)
	}
	// The next run takes it, with limits of its own (another tenant's: on
	// v1 the last run's recycled cgroup is its tenant's, see
	// TestRunCgroupRecycled).
	p, err := e.Start(context.Background(), withDefaults(&Spec{Args: []string{"/bin/true"}, Limits: Limits{Processes: 7, Memory: 48 << 20}, Tenant: "another"}))
	if err != nil {
		t.Fatal(err)
	}
	if p.c != c || p.cg != next {
		t.Errorf("the run did not take the prepared cgroup")
	}
	read := func(ctrl, file string) string {
		dir := p.cg.dir
		if !p.cg.v2 {
			dir = p.cg.dirs[ctrl]
		}
		b, _ := os.ReadFile(filepath.Join(dir, file))
		return strings.TrimSpace(string(b))
	}
	if p.cg.v2 {
		if got := read("pids", "pids.max"); got != "7" {
			t.Errorf("pids.max %s, want 7", got)
		}
		if got := read("memory", "memory.max"); got != fmt.Sprint(48<<20) {
			t.Errorf("memory.max %s, want %d", got, 48<<20)
		}
	} else {
		// v1 counts PID 1's forking thread until the program is out.
		if got := read("pids", "pids.max"); got != "7" && got != "8" {
			t.Errorf("pids.max %s, want 7 (8 while PID 1 forks)", got)
		}
		if got := read("memory", "memory.limit_in_bytes"); got != fmt.Sprint(48<<20) {
			t.Errorf("memory.limit_in_bytes %s, want %d", got, 48<<20)
		}
	}
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
}

// cpuIdle is the cpu.idle of a running run's CPU cgroup (v1: the
// sandbox's, where the CPU controller is; v2: the run's).
func cpuIdle(t *testing.T, p *Process) string {
	t.Helper()
	dir := p.cg.dir
	if !p.cg.v2 {
		dir = p.c.cg.v1.dirs["cpu"]
	}
	b, err := os.ReadFile(filepath.Join(dir, "cpu.idle"))
	if errors.Is(err, os.ErrNotExist) {
		t.Skip("no cpu.idle: kernel before 5.15")
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// A run with Limits.Idle gets CPU only when nothing else wants it: its
// cgroup's cpu.idle is 1 (v1: the sandbox's, where the CPU controller is;
// v2: the run's), and a run after it is back to 0 (a pooled sandbox serves
// both).
func TestIdleRun(t *testing.T) {
	e := testEngine(t)
	for i, idle := range []bool{true, false, true} {
		spec := withDefaults(&Spec{Args: []string{"true"}})
		spec.Limits.Idle = idle
		p, err := e.Start(context.Background(), spec)
		if err != nil {
			t.Fatal(err)
		}
		want := map[bool]string{false: "0", true: "1"}[idle]
		if got := cpuIdle(t, p); got != want {
			t.Errorf("run %d (idle %v): cpu.idle %s", i, idle, got)
		}
		if _, err := p.Wait(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestIdleRunPrioritized: Prioritize takes a running idle run out of the
// idle priority (someone came to wait for it), and the sandbox's next idle
// run is idle again.
func TestIdleRunPrioritized(t *testing.T) {
	e := testEngine(t)
	for i := range 2 {
		// cat runs until its stdin closes: the run is alive while checked.
		in, w := io.Pipe()
		spec := withDefaults(&Spec{Args: []string{"cat"}, Stdin: in})
		spec.Limits.Idle = true
		p, err := e.Start(context.Background(), spec)
		if err != nil {
			t.Fatal(err)
		}
		if got := cpuIdle(t, p); got != "1" {
			t.Errorf("run %d: cpu.idle %s before Prioritize", i, got)
		}
		if i == 0 {
			if err := p.Prioritize(); err != nil {
				t.Fatal(err)
			}
			if got := cpuIdle(t, p); got != "0" {
				t.Errorf("cpu.idle %s after Prioritize", got)
			}
		}
		w.Close()
		if res, err := p.Wait(); err != nil || res.ExitCode != 0 {
			t.Fatalf("run %d: %v %+v", i, err, res)
		}
		if err := p.Prioritize(); err != nil {
			t.Errorf("Prioritize after the run: %v", err)
		}
	}
}

// TestRunCgroupRecycled: on cgroup v1 a run that leaves its cgroups as a
// fresh run's would be hands them to the container's next run (no memory
// cgroup made and removed per run), and one that leaves anything the next
// run could see does not: memory still charged (page cache it read first),
// an OOM kill or a refused fork counted. Each case is checked from what
// the next run reports.
func TestRunCgroupRecycled(t *testing.T) {
	e, err := New(Config{UIDBase: testUIDs(15), UIDSlots: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.cg.v2 {
		t.Skip("cgroup v2 makes each run's cgroup ahead and does not recycle it")
	}
	// Page cache a run reads first is charged to its memory cgroup and
	// stays charged after it: a file no one has read yet, in a mount of
	// its own (so that these runs have a container of their own).
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	f, err := os.Create(data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(bytes.Repeat([]byte("x"), 32<<20)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	f.Close()
	mounts := append(slices.Clone(SystemMounts), Mount{Source: dir, Target: "/data"})
	// A CPU time that never ends a run here (the balloon below must end by
	// memory; the CPU time is part of the sandbox's key, so every run has
	// the same).
	limits := Limits{Memory: 64 << 20, Processes: 8, CPUTime: 10 * time.Minute}
	next := func(c *container) *runCgroup {
		c.cg.mu.Lock()
		defer c.cg.mu.Unlock()
		return c.cg.kept
	}
	runWith := func(script string, l Limits) (*Result, *container) {
		t.Helper()
		return poolRun(t, e, &Spec{Args: []string{"bash", "-c", script}, Mounts: mounts, Limits: l})
	}
	runIn := func(script string) (*Result, *container) {
		t.Helper()
		return runWith(script, limits)
	}

	res, c := runIn("true")
	rc := next(c)
	if rc == nil || !rc.recycled || !strings.HasPrefix(rc.name, "next-") {
		t.Fatalf("a run that left nothing did not hand its cgroup on: %+v", rc)
	}
	res, c2 := runIn("exit 3")
	if c2 != c || res.ExitCode != 3 || res.Limit != LimitNone {
		t.Fatalf("run in the recycled cgroup: same container %v, exit %d, limit %q", c2 == c, res.ExitCode, res.Limit)
	}
	if rc2 := next(c); rc2 != rc {
		t.Errorf("the recycled cgroup was not recycled again: %p, want %p", rc2, rc)
	}
	// Another tenant's run never takes it.
	p, err := e.Start(context.Background(), withDefaults(&Spec{Args: []string{"true"}, Mounts: mounts, Limits: limits, Tenant: "another"}))
	if err != nil {
		t.Fatal(err)
	}
	if p.c != c || p.cg == rc || !strings.HasPrefix(p.cg.name, "run-") {
		t.Errorf("another tenant's run: same container %v, took the recycled cgroup %v", p.c == c, p.cg == rc)
	}
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	e.Quiesce()
	if rc := next(c); rc == nil || rc.tenant != "another" {
		t.Errorf("the other tenant's cgroup was not kept for it: %+v", rc)
	}
	if res, _ := runIn("true"); res.ExitCode != 0 {
		t.Fatalf("exit %d", res.ExitCode)
	}

	// Memory left charged: the next run must not count it.
	res, _ = runIn("cat /data/data >/dev/null")
	switch {
	case res.ExitCode != 0:
		t.Fatalf("reading the file: exit %d, %q", res.ExitCode, res.Stderr)
	case res.PeakMemory < 16<<20:
		// The file's pages were not dropped (a temp dir on tmpfs, as in
		// the test VM): they are charged to this test, not to the run.
		t.Logf("reading the file charged the run %d MiB: its pages stayed cached; the page-cache case is not checked here", res.PeakMemory>>20)
	default:
		if rc := next(c); rc != nil && rc.recycled {
			t.Error("a cgroup with the run's page cache charged was recycled")
		}
		if res, _ = runIn("true"); res.PeakMemory >= 16<<20 {
			t.Errorf("the run after one that read 32 MiB reports a peak of %d MiB", res.PeakMemory>>20)
		}
	}

	// An OOM kill counted: the next run that fails must not be told it
	// ran out of memory.
	// Its own wall time, far above what filling 64 MiB takes on a busy
	// machine (an emulated VM beside two CPU hogs took over 30 seconds):
	// it ends by the memory limit; the wall time must not come first. The
	// same container serves it (the wall time is not part of its key).
	balloon := limits
	balloon.WallTime = 10 * time.Minute
	res, cb := runWith(`x=$(head -c 200000000 /dev/zero | tr '\0' a); echo ${#x}`, balloon)
	if cb != c {
		t.Errorf("the balloon ran in another sandbox: the run after it checks nothing")
	}
	if res.Limit != LimitMemory {
		t.Fatalf("the balloon: exit %d, limit %q", res.ExitCode, res.Limit)
	}
	if res, _ = runIn("exit 3"); res.ExitCode != 3 || res.Limit != LimitNone {
		t.Errorf("the run after an OOM kill: exit %d, limit %q", res.ExitCode, res.Limit)
	}

	// A refused fork counted: the next run must not be told it hit the
	// process limit.
	res, _ = runIn(`for i in $(seq 20); do sleep 5 & done; kill $(jobs -p) 2>/dev/null; wait`)
	if res.Limit != LimitProcesses {
		t.Fatalf("the forks: exit %d, limit %q, stderr %q", res.ExitCode, res.Limit, res.Stderr)
	}
	if res, _ = runIn("true"); res.ExitCode != 0 || res.Limit != LimitNone {
		t.Errorf("the run after a refused fork: exit %d, limit %q", res.ExitCode, res.Limit)
	}
}

// TestPID1OutsideProgramCPUGroup: on v1 a sandbox's PID 1 lives in the
// engine's CPU cgroups and only its spawner thread, and so the program,
// in the sandbox's own (ctCgroup.cpuOnly): PID 1's threads neither share
// the program's CPU group (which left programs waiting for their peers'
// runs) nor count in its quota and CPU counter. The program still sees
// its CPU cgroup as the root of its cgroup namespace.
func TestPID1OutsideProgramCPUGroup(t *testing.T) {
	e, err := New(Config{UIDBase: testUIDs(16), UIDSlots: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.cg.v2 {
		t.Skip("cgroup v2: PID 1 lives in the sandbox's init leaf, the program in its run cgroup")
	}
	var stdout bytes.Buffer
	spec := withDefaults(&Spec{Args: []string{"bash", "-c", "grep -E ':cpu(acct)?[:,]' /proc/self/cgroup; exec sleep 60"}, Stdout: &stdout})
	p, err := e.Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	waited := false
	defer func() {
		if !waited {
			p.Kill()
			p.Wait()
		}
	}()
	pid1 := p.c.cmd.Process.Pid
	ct := p.c.cg
	cpuOnly := 0
	for _, c := range []string{"cpu", "cpuacct"} {
		parents := e.cg.parents
		if parents[c] == parents["memory"] || parents[c] == parents["pids"] || c == "cpuacct" && parents[c] == parents["cpu"] {
			continue
		}
		cpuOnly++
		// The program's processes (sleep: it exec'd) and one thread of
		// PID 1 are in the sandbox's group; no other.
		// (Until the program has exec'd sleep, bash or the fork's child.)
		var spawners, program int
		var others []string
		for deadline := time.Now().Add(30 * time.Second); ; {
			spawners, program, others = 0, 0, nil
			tasks, err := os.ReadFile(filepath.Join(ct.v1.dirs[c], "tasks"))
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range strings.Fields(string(tasks)) {
				tid, _ := strconv.Atoi(f)
				comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", tid))
				switch _, err := os.Stat(fmt.Sprintf("/proc/%d/task/%d", pid1, tid)); {
				case err == nil:
					spawners++
				case strings.TrimSpace(string(comm)) == "sleep":
					program++
				default:
					others = append(others, fmt.Sprintf("%d (%q)", tid, comm))
				}
			}
			if program == 1 && others == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if spawners != 1 || program != 1 || others != nil {
			t.Errorf("%s of the sandbox: %d threads of PID 1 (want the spawner alone), %d of the program (want 1), others %v", c, spawners, program, others)
		}
		// PID 1 itself is in the engine's group.
		procs, err := os.ReadFile(filepath.Join(e.cg.parents[c], "cgroup.procs"))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(strings.Fields(string(procs)), strconv.Itoa(pid1)) {
			t.Errorf("PID 1 (%d) is not in the engine's %s cgroup %s", pid1, c, e.cg.parents[c])
		}
	}
	if cpuOnly == 0 {
		t.Skip("no v1 hierarchy holds the CPU controllers apart from memory and pids")
	}
	p.Kill()
	waited = true
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		if !strings.HasSuffix(line, ":/") {
			t.Errorf("the program sees its CPU cgroup as %q, want the namespace's root", line)
		}
	}
	if stdout.Len() == 0 {
		t.Error("the program saw no CPU cgroup")
	}
}

// TestCgroupWriteInterrupted writes a v1 memory limit while the writing
// thread is signalled over and over, as the Go runtime signals its threads
// to preempt goroutines: the write is made, never failed with EINTR (seen
// in CI: a run refused with "write memory.limit_in_bytes: interrupted
// system call").
func TestCgroupWriteInterrupted(t *testing.T) {
	e, err := New(Config{UIDBase: testUIDs(15), UIDSlots: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.cg.v2 {
		t.Skip("v2's memory.max does not fail a write on a pending signal")
	}
	dir := filepath.Join(e.cg.parents["memory"], fmt.Sprintf("eintr-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(dir)
	dfd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)

	tid := make(chan int)
	stop := make(chan struct{})
	done := make(chan error)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tid <- unix.Gettid()
		<-tid
		for i := range 1000 {
			if err := writeAt(dfd, "memory.limit_in_bytes", strconv.Itoa((64+i%2)<<20)); err != nil {
				done <- fmt.Errorf("write %d: %w", i, err)
				return
			}
		}
		done <- nil
	}()
	id := <-tid
	var sent atomic.Int64
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if unix.Tgkill(os.Getpid(), id, unix.SIGURG) == nil {
				sent.Add(1)
			}
		}
	}()
	tid <- 0
	err = <-done
	close(stop)
	if err != nil {
		t.Fatalf("%v (%d signals sent)", err, sent.Load())
	}
	t.Logf("1000 writes, %d signals sent to the writer", sent.Load())
}
