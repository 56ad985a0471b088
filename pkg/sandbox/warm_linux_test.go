package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// readyFor lists the sandboxes the engine keeps ready for the Detachable
// spec, oldest first.
func readyFor(t *testing.T, e *Engine, spec *Spec) []*container {
	t.Helper()
	p := &Process{spec: spec, limits: spec.Limits.WithDefaults(), e: e}
	cfg, err := p.initConfig()
	if err != nil {
		t.Fatal(err)
	}
	e.warm.mu.Lock()
	defer e.warm.mu.Unlock()
	return slices.Clone(e.warm.ready[configKey(cfg)])
}

// readyRecord describes a ready sandbox as a detached run's record does:
// its PID 1 and its cgroups.
func readyRecord(t *testing.T, c *container) *Detached {
	t.Helper()
	pid := c.cmd.Process.Pid
	start, err := procStartTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	d := &Detached{Pid: pid, StartTime: start, UID: c.hostRoot, CgroupV2: c.e.cg.v2}
	if d.CgroupV2 {
		d.Sandbox = map[string]string{"unified": filepath.Join(c.e.cg.parent, c.cg.name)}
	} else {
		d.Sandbox = maps.Clone(c.cg.v1.dirs)
	}
	return d
}

// pidGone says whether the PID 1 of d has exited and been reaped.
func pidGone(d *Detached) bool {
	start, err := procStartTime(d.Pid)
	return err != nil || start != d.StartTime
}

// checkDirsGone checks that the cgroups of d are removed.
func checkDirsGone(t *testing.T, d *Detached) {
	t.Helper()
	for _, dir := range d.Sandbox {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("cgroup %s left: %v", dir, err)
		}
	}
}

// TestWarmDetachable: a Detachable spec's Start takes a sandbox Prewarm
// built before it was called; the sandbox serves that run alone (it is
// destroyed after, and the next Start gets another), the pool refills in
// the background, and Close ends the ready ones.
func TestWarmDetachable(t *testing.T) {
	e := detachEngine(t, 24)
	spec := withDefaults(&Spec{Args: []string{"echo", "hello"}, Detachable: true, PTY: true, Home: "/home/user"})
	if err := e.Prewarm(spec, 2); err != nil {
		t.Fatal(err)
	}
	ready := readyFor(t, e, spec)
	if len(ready) != 2 {
		t.Fatalf("%d sandboxes ready, want 2", len(ready))
	}
	for _, c := range ready {
		if c.key != "" || c.served || c.cmd.SysProcAttr.Pdeathsig != 0 || !isDetachable(c.cg.name) {
			t.Errorf("a ready sandbox not built as a detachable one: key %q served %v pdeathsig %v cgroup %s",
				c.key, c.served, c.cmd.SysProcAttr.Pdeathsig, c.cg.name)
		}
	}
	used := map[*container]bool{}
	for i := range 2 {
		p, err := e.Start(context.Background(), spec)
		if err != nil {
			t.Fatal(err)
		}
		c := p.c
		if !slices.Contains(ready, c) || used[c] {
			t.Errorf("run %d: not a ready sandbox of the pool (used before: %v)", i, used[c])
		}
		used[c] = true
		res, err := p.Wait()
		if err != nil || res.ExitCode != 0 || string(res.Stdout) != "hello\n" {
			t.Fatalf("run %d: %+v %v", i, res, err)
		}
		e.Quiesce()
		if c.alive() || e.pool.len() != 0 {
			t.Errorf("run %d: its sandbox serves again (alive %v, pooled %d)", i, c.alive(), e.pool.len())
		}
		// The pool is back to two in the background, none of them used.
		if !waitUntil(30*time.Second, func() bool { return len(readyFor(t, e, spec)) == 2 }) {
			t.Fatalf("run %d: the pool was not refilled: %d ready", i, len(readyFor(t, e, spec)))
		}
		ready = readyFor(t, e, spec)
		for _, r := range ready {
			if used[r] {
				t.Errorf("run %d: a used sandbox is ready again", i)
			}
		}
	}
	var records []*Detached
	for _, c := range ready {
		records = append(records, readyRecord(t, c))
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range ready {
		if c.alive() {
			t.Error("a ready sandbox outlived Close")
		}
	}
	for _, d := range records {
		checkDirsGone(t, d)
	}
	if err := e.Prewarm(spec, 1); err != nil || e.warm.len() != 0 {
		t.Errorf("Prewarm after Close: %v, %d ready", err, e.warm.len())
	}
}

// TestWarmDetachAdopt: a run started from a ready sandbox is detached and
// adopted by another engine as any detachable run.
func TestWarmDetachAdopt(t *testing.T) {
	const port, marker = 8000, "marker-warm"
	e1 := detachEngine(t, 25)
	spec := detachableSpec(port, marker)
	if err := e1.Prewarm(spec, 1); err != nil {
		t.Fatal(err)
	}
	ready := readyFor(t, e1, spec)
	p := startDetachable(t, e1, port, marker)
	if !slices.Contains(ready, p.c) {
		p.Kill()
		p.Wait()
		t.Fatal("the run did not take the ready sandbox")
	}
	d, err := p.Detach()
	if err != nil {
		p.Kill()
		p.Wait()
		t.Fatal(err)
	}
	killAtEnd(t, e1, d)
	if _, err := p.Wait(); err != ErrDetached {
		t.Errorf("Wait of a detached run: %v", err)
	}
	if err := e1.Close(); err != nil {
		t.Fatal(err)
	}

	e2 := detachEngine(t, 25)
	a, err := e2.Adopt(roundTrip(t, d))
	if err != nil {
		t.Fatal(err)
	}
	if body := get(t, a, port, "/index.html"); body != marker {
		t.Fatalf("GET through the adopted run: %q", body)
	}
	a.Kill()
	if err := awaitEnd(t, a); err != nil {
		t.Errorf("Wait after Kill: %v", err)
	}
	checkGone(t, d, e1, e2)
}

// prewarmOldServer is TestDetachOldServer's "prewarm" mode: it prepares
// two sandboxes for a detachable server and prints a record of each, and
// its process exits without closing the engine.
func prewarmOldServer(t *testing.T, e *Engine, o oldServer) {
	spec := detachableSpec(o.Port, o.Marker)
	if err := e.Prewarm(spec, 2); err != nil {
		t.Fatal(err)
	}
	for _, c := range readyFor(t, e, spec) {
		b, err := json.Marshal(readyRecord(t, c))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("%s%s\n", recordPrefix, b)
	}
}

// TestWarmEndsWithHost: the ready sandboxes of a process that exits
// without Close (as one killed does) end with it, though they have no
// parent-death signal: their PID 1 sees its control socket close. Their
// empty cgroups go at the next engine's start, and nothing is left.
func TestWarmEndsWithHost(t *testing.T) {
	const k = 26
	records := runOldServerRecords(t, oldServer{Mode: "prewarm", Port: 8000, Marker: "warm"}, k)
	if len(records) != 2 {
		t.Fatalf("%d ready sandboxes in the old server, want 2", len(records))
	}
	for _, d := range records {
		if !waitUntil(30*time.Second, func() bool { return pidGone(d) }) {
			t.Fatalf("a ready sandbox's PID 1 (pid %d) outlived the process that built it", d.Pid)
		}
	}
	e := detachEngine(t, k) // its start removes the cgroups left (cleanStale)
	for _, d := range records {
		checkGone(t, d, e)
	}
}

// lateDir is a directory holding a file marker that says text.
func lateDir(t *testing.T, text string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "marker"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestWarmLateMount: a Late mount's source is bound when the run starts:
// a sandbox prepared with one source serves a run with another, read-only;
// one built for the run binds it as well, and a spec that is not
// Detachable binds it when its sandbox is built.
func TestWarmLateMount(t *testing.T) {
	e := detachEngine(t, 27)
	a, b := lateDir(t, "from-a"), lateDir(t, "from-b")
	spec := func(src, hostname string, detachable bool) *Spec {
		return withDefaults(&Spec{
			Args:       []string{"/bin/sh", "-c", "cat /late/marker; touch /late/new 2>/dev/null && echo writable; true"},
			Mounts:     append(slices.Clone(SystemMounts), Mount{Source: src, Target: "/late", Late: true}),
			Hostname:   hostname,
			Detachable: detachable,
		})
	}
	if err := e.Prewarm(spec(a, "", true), 1); err != nil {
		t.Fatal(err)
	}
	ready := readyFor(t, e, spec(b, "", true))
	if len(ready) != 1 {
		t.Fatalf("%d sandboxes ready for another source, want 1", len(ready))
	}
	for _, c := range []struct {
		name   string
		spec   *Spec
		warmed bool
	}{
		{"prepared with another source", spec(b, "", true), true},
		{"built for the run", spec(b, "other", true), false},
		{"not detachable", spec(b, "", false), false},
	} {
		p, err := e.Start(context.Background(), c.spec)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if warmed := slices.Contains(ready, p.c); warmed != c.warmed {
			t.Errorf("%s: from the ready sandboxes: %v", c.name, warmed)
		}
		res, err := p.Wait()
		if err != nil || res.ExitCode != 0 || string(res.Stdout) != "from-b" {
			t.Errorf("%s: %+v %v", c.name, res, err)
		}
	}
	if _, err := os.Stat(filepath.Join(b, "new")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a run wrote into a Late mount: %v", err)
	}
	bad := spec(b, "", true)
	bad.Mounts[len(bad.Mounts)-1].Writable = true
	if _, err := e.Start(context.Background(), bad); err == nil {
		t.Error("a Writable Late mount was accepted")
	}
}
