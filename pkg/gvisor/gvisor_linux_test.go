package gvisor

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// testRunner is a Runner over a temporary directory, or a skip where runsc
// is not installed (scripts/install-gvisor.sh) or this is not root.
func testRunner(t *testing.T) *Runner {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("runs runsc: needs root")
	}
	if _, err := Find(""); err != nil {
		t.Skip(err)
	}
	g, err := New(Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Error(err)
		}
	})
	return g
}

func spec(args ...string) *sandbox.Spec {
	return &sandbox.Spec{Args: args, Env: []string{"PATH=/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8"}, Mounts: sandbox.SystemMounts,
		Limits: sandbox.Limits{WallTime: 60 * time.Second, CPUTime: 60 * time.Second}}
}

// TestRun: a program under gVisor's kernel (its /proc/version is gVisor's,
// not the host's) reads its stdin and input files, writes output files,
// and its exit code, output and metrics come back; it has no network but
// its loopback.
func TestRun(t *testing.T) {
	g := testRunner(t)
	s := spec("/bin/bash", "-c", `cat /proc/version; read x; echo "got $x"; cat in.txt; echo out > out.txt; echo err >&2
python3 -c "import socket; print(sorted(n for _, n in socket.if_nameindex()))"; exit 3`)
	s.Stdin = strings.NewReader("w0rld\n")
	s.Files = []sandbox.File{{Path: "in.txt", Data: []byte("input\n")}}
	s.Collect = sandbox.Collect{Patterns: []string{"out.txt"}}
	res, err := g.Run(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.ReadFile("/proc/version")
	out := string(res.Stdout)
	if !strings.HasPrefix(out, "Linux version") || strings.HasPrefix(out, strings.TrimSpace(string(host))) {
		t.Errorf("not gVisor's kernel: %q", out)
	}
	if !strings.Contains(out, "got w0rld\ninput\n['lo']\n") || string(res.Stderr) != "err\n" || res.ExitCode != 3 || res.Limit != "" {
		t.Errorf("result: exit %d limit %q stdout %q stderr %q", res.ExitCode, res.Limit, out, res.Stderr)
	}
	if len(res.Files) != 1 || string(res.Files[0].Data) != "out\n" {
		t.Errorf("output files: %+v", res.Files)
	}
	if res.CPUTime <= 0 || res.PeakMemory <= 0 || res.WallTime <= 0 {
		t.Errorf("metrics: cpu %v memory %d wall %v", res.CPUTime, res.PeakMemory, res.WallTime)
	}
}

// TestLimits: the wall time, the memory and the output limits end a run
// under gVisor and say which; nothing of the runs is left.
func TestLimits(t *testing.T) {
	g := testRunner(t)
	s := spec("/usr/bin/python3", "-c", "while True: pass")
	s.Limits.WallTime = time.Second
	start := time.Now()
	res, err := g.Run(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if res.Limit != sandbox.LimitWallTime && res.Limit != sandbox.LimitCPUTime || time.Since(start) > 30*time.Second {
		t.Errorf("a loop past 1 s: limit %q after %v", res.Limit, time.Since(start))
	}
	s = spec("/usr/bin/python3", "-c", "keep = []\nfor i in range(64): keep.append(b'x' * (16 << 20))\nprint('allocated')")
	s.Limits.Memory = 200 << 20
	if res, err = g.Run(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if res.Limit != sandbox.LimitMemory || strings.Contains(string(res.Stdout), "allocated") {
		t.Errorf("a memory hog: limit %q stdout %q", res.Limit, res.Stdout)
	}
	s = spec("/usr/bin/python3", "-c", "import sys\nfor i in range(200): sys.stdout.write('x' * 9999 + '\\n')")
	s.Limits.OutputBytes = 10000
	if res, err = g.Run(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if !res.StdoutTruncated || len(res.Stdout) > 10000 || res.Limit != sandbox.LimitOutput {
		t.Errorf("an output flood: truncated %v, %d bytes, limit %q", res.StdoutTruncated, len(res.Stdout), res.Limit)
	}
	g.Quiesce() // a sandbox is removed after its result is out
	if entries, _ := os.ReadDir(g.runs); len(entries) != 0 {
		t.Errorf("bundles left: %d", len(entries))
	}
	if left := g.Leftovers(); len(left) != 0 {
		t.Errorf("left: %v", left)
	}
	for _, parent := range g.cg.allDirs(g.cg.parent) {
		entries, _ := os.ReadDir(parent)
		for _, e := range entries {
			if e.IsDir() && strings.HasPrefix(e.Name(), fmt.Sprintf("sr%d-", os.Getpid())) {
				t.Errorf("cgroup left: %s/%s", parent, e.Name())
			}
		}
	}
}

// TestDiagnose: doctor's line says gVisor runs here, with its platform; a
// runsc that is not there says so.
func TestDiagnose(t *testing.T) {
	if c := Diagnose(Config{Runsc: "/nonexistent/runsc", Dir: t.TempDir()}); c.OK || c.Name != "gvisor" || c.Detail == "" {
		t.Errorf("without runsc: %+v", c)
	}
	testRunner(t) // skips where gVisor cannot run
	if c := Diagnose(Config{Dir: t.TempDir()}); !c.OK || !strings.Contains(c.Detail, "platform systrap") {
		t.Errorf("with runsc: %+v", c)
	}
}

func TestMain(m *testing.M) {
	ShimMain() // a pooled sandbox's first program is this test binary
	os.Exit(m.Run())
}

// ready is how many sandboxes the pool has booted for spec's kind.
func (g *Runner) readyFor(spec *sandbox.Spec) int {
	g.pool.mu.Lock()
	defer g.pool.mu.Unlock()
	return len(g.pool.ready[poolKey(spec, spec.Limits.WithDefaults())])
}

// TestPool: after a first run, sandboxes of its kind are booted ahead,
// and a run taken by one is a run as any other (stdin, files, exit code,
// output, the memory and wall-time limits with their own counts), much
// sooner; Close lets them go.
func TestPool(t *testing.T) {
	g := testRunner(t)
	g.cfg.Pool = 2
	s := spec("/bin/bash", "-c", `cat /proc/version; read x; echo "got $x"; cat in.txt; echo out > out.txt; exit 3`)
	s.Files = []sandbox.File{{Path: "in.txt", Data: []byte("input\n")}}
	s.Collect = sandbox.Collect{Patterns: []string{"out.txt"}}
	s.Stdin = strings.NewReader("w0rld\n")
	t0 := time.Now()
	if _, err := g.Run(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	cold := time.Since(t0)
	deadline := time.Now().Add(time.Minute)
	for g.readyFor(s) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the pool booted %d sandboxes", g.readyFor(s))
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.Stdin = strings.NewReader("again\n")
	t0 = time.Now()
	res, err := g.Run(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	warm := time.Since(t0)
	t.Logf("cold %v, from the pool %v", cold, warm)
	out := string(res.Stdout)
	if !strings.HasPrefix(out, "Linux version") || !strings.HasSuffix(out, "got again\ninput\n") || res.ExitCode != 3 || res.Limit != "" {
		t.Errorf("a pooled run: exit %d limit %q stdout %q stderr %q", res.ExitCode, res.Limit, out, res.Stderr)
	}
	if len(res.Files) != 1 || string(res.Files[0].Data) != "out\n" {
		t.Errorf("a pooled run's files: %+v", res.Files)
	}
	// How the program ended, precisely (the shim reports it): its own
	// exit(130) is not SIGINT, a signal is named; and it cannot end the
	// shim that reports it (kill -9 -1 as the sandbox's user).
	for _, c := range []struct {
		script, signal string
		exit           int
	}{
		{"exit 130", "", 130},
		{"kill -SEGV $$", "SIGSEGV", -1},
		{"sleep 100 & kill -9 -1; echo survived; exit 4", "", 4},
	} {
		s := spec("/bin/bash", "-c", c.script)
		for g.readyFor(s) < 1 {
			time.Sleep(20 * time.Millisecond)
		}
		res, err := g.Run(context.Background(), s)
		if err != nil {
			t.Fatalf("%s: %v", c.script, err)
		}
		if res.ExitCode != c.exit || res.Signal != c.signal || res.Limit != "" {
			t.Errorf("%s: exit %d signal %q limit %q stdout %q stderr %q", c.script, res.ExitCode, res.Signal, res.Limit, res.Stdout, res.Stderr)
		}
	}
	hog := spec("/usr/bin/python3", "-c", "keep = []\nfor i in range(64): keep.append(b'x' * (16 << 20))\nprint('allocated')")
	hog.Limits.Memory = 200 << 20
	g.Run(context.Background(), hog) // boots its kind's sandboxes
	for g.readyFor(hog) < 1 {
		time.Sleep(20 * time.Millisecond)
	}
	if res, err = g.Run(context.Background(), hog); err != nil {
		t.Fatal(err)
	}
	if res.Limit != sandbox.LimitMemory || strings.Contains(string(res.Stdout), "allocated") {
		t.Errorf("a pooled memory hog: limit %q stdout %q stderr %q", res.Limit, res.Stdout, res.Stderr)
	}
	loop := spec("/usr/bin/python3", "-c", "while True: pass")
	loop.Limits.WallTime = time.Second
	g.Run(context.Background(), loop)
	for g.readyFor(loop) < 1 {
		time.Sleep(20 * time.Millisecond)
	}
	if res, err = g.Run(context.Background(), loop); err != nil {
		t.Fatal(err)
	}
	if res.Limit != sandbox.LimitWallTime && res.Limit != sandbox.LimitCPUTime || res.CPUTime > 5*time.Second {
		t.Errorf("a pooled loop: limit %q cpu %v", res.Limit, res.CPUTime)
	}
	g.Close()
	if entries, _ := os.ReadDir(g.runs); len(entries) != 0 {
		t.Errorf("bundles left after Close: %d", len(entries))
	}
	if mounts, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mounts), g.state) {
		t.Errorf("runsc's mounts in %s left after Close", g.state)
	}
}

// TestPoolBurst: a kind whose runs find its pool empty keeps twice as
// many sandboxes ahead (up to maxBurst times Config.Pool), and goes back
// to Config.Pool, letting the others go, once burstFor has passed without
// that; a kind's first run is not counted.
func TestPoolBurst(t *testing.T) {
	g := testRunner(t)
	g.cfg.Pool = 1
	s := spec("/bin/true")
	key := poolKey(s, s.Limits.WithDefaults())
	target := func() int {
		g.pool.mu.Lock()
		defer g.pool.mu.Unlock()
		return g.pool.target[key]
	}
	waitReady := func(n int) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for g.readyFor(s) < n {
			if time.Now().After(deadline) {
				t.Fatalf("the pool booted %d sandboxes, want %d", g.readyFor(s), n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	run := func() {
		t.Helper()
		if res, err := g.Run(context.Background(), s); err != nil || res.ExitCode != 0 {
			t.Fatalf("run: %+v %v", res, err)
		}
	}
	run()
	if got := target(); got != 1 {
		t.Fatalf("after a kind's first run it keeps %d ahead, want Config.Pool (1)", got)
	}
	waitReady(1)
	run() // takes the one booted
	run() // finds none (unless the next booted within the run): the kind ran out
	for i := 0; target() < 4 && i < 20; i++ {
		run() // runs back to back until it runs out twice
	}
	if got := target(); got != maxBurst*g.cfg.Pool {
		t.Fatalf("after running out the kind keeps %d ahead, want %d", got, maxBurst*g.cfg.Pool)
	}
	waitReady(4)
	g.pool.mu.Lock()
	g.pool.emptied[key] = time.Now().Add(-2 * burstFor)
	g.pool.mu.Unlock()
	run()
	if got, ready := target(), g.readyFor(s); got != 1 || ready > 1 {
		t.Errorf("burstFor after it last ran out the kind keeps %d ahead with %d ready, want 1 and at most 1", got, ready)
	}
	waitReady(1)
	g.pool.mu.Lock()
	filling := g.pool.filling[key]
	g.pool.mu.Unlock()
	if ready := g.readyFor(s); ready != 1 || filling != 0 {
		t.Errorf("the kind has %d ready and %d booting, want 1 and 0", ready, filling)
	}
}

// TestSyscallPatching: gVisor's systrap platform patches a program's
// system calls into calls of its trampoline table (the "[usertrap]"
// mapping), which it maps locked: RLIMIT_MEMLOCK 0 forbade it, and each
// system call then went through a trap, about five times slower.
func TestSyscallPatching(t *testing.T) {
	g := testRunner(t)
	res, err := g.Run(context.Background(), spec("/bin/bash", "-c", "ulimit -l; grep -c '\\[usertrap\\]' /proc/$$/maps"))
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "64\n1\n" {
		t.Errorf("want RLIMIT_MEMLOCK 64 KiB and the usertrap table mapped: stdout %q stderr %q", res.Stdout, res.Stderr)
	}
}

// TestClearStale: a new runner clears what a runner of a process that is
// gone left: its state and bundle directories, its cgroups.
func TestClearStale(t *testing.T) {
	g := testRunner(t)
	dead := 1 << 22 // above pid_max's default: no process has it
	for _, d := range []string{"state", "runs"} {
		if err := os.MkdirAll(fmt.Sprintf("%s/%s/%d/x", g.cfg.Dir, d, dead), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cg, err := g.cg.create(fmt.Sprintf("sr%d-left", dead), spec("true").Limits.WithDefaults())
	if err != nil {
		t.Fatal(err)
	}
	g2, err := New(Config{Dir: g.cfg.Dir})
	if err != nil {
		t.Fatal(err)
	}
	defer g2.Close()
	for _, d := range []string{"state", "runs"} {
		if _, err := os.Stat(fmt.Sprintf("%s/%s/%d", g.cfg.Dir, d, dead)); !os.IsNotExist(err) {
			t.Errorf("%s of a process gone: %v", d, err)
		}
	}
	for _, dir := range cg.c.dirs(cg.rel) {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("cgroup %s left: %v", dir, err)
		}
	}
}

// TestParentCgroupRemoved: a runner's Close removes the runs' parent
// cgroup it made under --cgroup-parent (doctor left it behind), from every
// hierarchy runsc made it in; while another runner's run is under it, the
// parent stays.
func TestParentCgroupRemoved(t *testing.T) {
	testRunner(t) // skips where gVisor cannot run
	v2 := false
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		v2 = true
	}
	own, err := ownCgroup(v2)
	if err != nil {
		t.Fatal(err)
	}
	top := cgroups{root: "/sys/fs/cgroup", v2: v2}
	parent := fmt.Sprintf("%s/sr-test-parent-%d", own, os.Getpid())
	t.Cleanup(func() { // the test's own cgroups, made by the runners
		for _, rel := range []string{parent + "/sandbox-run-gvisor", parent} {
			for _, dir := range top.allDirs(rel) {
				os.Remove(dir)
			}
		}
	})
	newRunner := func() *Runner {
		g, err := New(Config{Dir: t.TempDir(), CgroupParent: parent})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	run := func(g *Runner) {
		if res, err := g.Run(context.Background(), spec("/bin/true")); err != nil || res.ExitCode != 0 {
			t.Fatalf("run: %+v %v", res, err)
		}
	}
	a, b := newRunner(), newRunner()
	run(a)
	dirs := a.cg.allDirs(a.cg.parent)
	if len(dirs) == 0 {
		t.Fatal("no parent cgroup was made")
	}
	held, err := b.cg.create("sr-test-held", spec("true").Limits.WithDefaults())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	for _, dir := range held.c.dirs(held.rel) {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("another runner's run's cgroup went with the parent: %v", err)
		}
	}
	held.remove()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("parent cgroup %s left after Close: %v", dir, err)
		}
	}
}
