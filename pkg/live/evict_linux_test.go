package live_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/live"
	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
	"github.com/sandbox-run/sandbox-run/pkg/local"
)

// full says err is a call's refusal for want of room (507 at the doors).
func full(err error) bool {
	var e *live.Error
	return errors.As(err, &e) && e.Code == agent.CodeNoSpace && strings.Contains(e.Msg, "memory")
}

// TestEvict: a paused sandbox evicted to disk gives its memory back and
// stays the same sandbox, paused; a call brings it back with its files
// (its processes ended, under the native engine), or fails with a
// LimitError while the server's memory is full; a create past the
// server's memory does not evict a paused sandbox that would lose its
// processes; a snapshot of an
// evicted sandbox is taken from the disk; the next Manager takes an
// evicted sandbox over evicted; EvictAfter evicts a sandbox paused that
// long; killed, nothing of it is left on disk.
func TestEvict(t *testing.T) {
	x, cfg := keptExecutor(t)
	cfg.Prewarm, cfg.MaxMemoryBytes = 0, 512<<20
	m := live.NewManager(local.LiveStarter(x), cfg)
	ctx := context.Background()
	s, err := m.Create(ctx, "k", live.CreateOptions{Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	sh(t, s, "echo kept > /home/user/f; echo tmp > /tmp/t")
	if _, _, err := s.Start(ctx, agent.Request{Args: []string{"sleep", "1000"}}); err != nil {
		t.Fatal(err)
	}
	if err := m.Evict(ctx, "k", s.ID); !errors.Is(err, live.ErrNotPaused) {
		t.Errorf("evicting a running sandbox: %v", err)
	}
	if err := m.Pause(ctx, "k", s.ID); err != nil {
		t.Fatal(err)
	}
	if err := m.Evict(ctx, "k", s.ID); err != nil {
		t.Fatal(err)
	}
	if !s.Evicted() || !s.Paused() {
		t.Fatalf("evicted %v, paused %v", s.Evicted(), s.Paused())
	}
	if st, err := s.Stats(); err != nil || st.Memory != 0 {
		t.Errorf("an evicted sandbox's stats: %+v %v", st, err)
	}
	// Its memory is given back: two more fit in the server's 512 MiB.
	b, err := m.Create(ctx, "k", live.CreateOptions{Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	c, err := m.Create(ctx, "k", live.CreateOptions{Timeout: time.Hour})
	if err != nil {
		t.Fatalf("a create after an eviction: %v", err)
	}
	var le *live.LimitError
	if _, err := s.Client().Call(ctx, agent.Request{Op: agent.OpStat, Path: "/home/user/f"}); !full(err) {
		t.Errorf("a call to an evicted sandbox while the server's memory is full: %v", err)
	}
	if !s.Evicted() {
		t.Error("not back, yet no longer evicted")
	}
	if err := m.Kill("k", c.ID); err != nil {
		t.Fatal(err)
	}
	if out, _, code := sh(t, s, "cat /home/user/f /tmp/t"); out != "kept\ntmp\n" || code != 0 {
		t.Errorf("back from disk: %q %d", out, code)
	}
	if s.Evicted() || s.Paused() {
		t.Errorf("back from disk: evicted %v, paused %v", s.Evicted(), s.Paused())
	}
	if n := len(s.Procs()); n != 0 {
		t.Errorf("back from disk with its files only, %d processes are listed", n)
	}

	// A create past the server's memory does not evict a paused sandbox
	// that would lose its processes: only one asked to.
	if err := m.Pause(ctx, "k", b.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, "k", live.CreateOptions{Timeout: time.Hour}); !errors.As(err, &le) || !le.Full || b.Evicted() {
		t.Fatalf("a create past the server's memory with a paused sandbox: %v (evicted %v)", err, b.Evicted())
	}
	if err := m.Evict(ctx, "k", b.ID); err != nil {
		t.Fatal(err)
	}
	sh2, err := m.Create(ctx, "k", live.CreateOptions{Timeout: time.Hour})
	if err != nil {
		t.Fatalf("a create after an eviction: %v", err)
	}
	// A snapshot of it is taken from the disk.
	snap, err := m.SnapshotSandbox(ctx, "k", b.ID, "")
	if err != nil || !b.Evicted() {
		t.Fatalf("a snapshot of an evicted sandbox: %v (evicted %v)", err, b.Evicted())
	}
	if err := m.Kill("k", sh2.ID); err != nil {
		t.Fatal(err)
	}
	from, err := m.Create(ctx, "k", live.CreateOptions{Snapshot: snap.ID})
	if err != nil {
		t.Fatal(err)
	}
	m.Kill("k", from.ID)

	// The next Manager takes it over evicted.
	if err := m.Pause(ctx, "k", s.ID); err != nil {
		t.Fatal(err)
	}
	if err := m.Evict(ctx, "k", s.ID); err != nil {
		t.Fatal(err)
	}
	m.Detach()
	cfg.EvictAfter = 200 * time.Millisecond
	m2 := live.NewManager(local.LiveStarter(x), cfg)
	defer m2.Close()
	s2, err := m2.Get("k", s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !s2.Evicted() || !s2.Paused() {
		t.Fatalf("taken over: evicted %v, paused %v", s2.Evicted(), s2.Paused())
	}
	if out, _, _ := sh(t, s2, "cat /home/user/f"); out != "kept\n" {
		t.Errorf("taken over evicted, then called: %q", out)
	}

	// EvictAfter evicts a sandbox paused that long.
	if err := m2.Pause(ctx, "k", s.ID); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for !s2.Evicted() {
		if time.Now().After(deadline) {
			t.Fatal("not evicted after EvictAfter")
		}
		time.Sleep(20 * time.Millisecond)
	}
	dir := filepath.Join(cfg.StateDir, "evicted", s.ID)
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("its directory: %v", err)
	}
	if err := m2.Kill("k", s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("killed evicted, its directory stays: %v", err)
	}
}

// TestEvictGVisor: a sandbox under gVisor is evicted with its memory,
// by a create past the server's memory while it is paused: a call brings
// it back with its running process where it was (its output still
// reaching whoever follows it), once there is memory for it; a fork of it
// while it is on disk goes on from there too, and so does the sandbox
// after a restart.
func TestEvictGVisor(t *testing.T) {
	x, cfg := gvisorExecutor(t)
	cfg.MaxMemoryBytes = 512 << 20
	m := live.NewManager(local.LiveStarter(x), cfg)
	ctx := context.Background()
	s, p, sub := counting(t, m)
	sh(t, s, "echo kept > /home/user/f")
	if err := m.Pause(ctx, "k", s.ID); err != nil {
		t.Fatal(err)
	}
	b, err := m.Create(ctx, "k", live.CreateOptions{Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	c, err := m.Create(ctx, "k", live.CreateOptions{Timeout: time.Hour})
	if err != nil {
		t.Fatalf("a create that a paused sandbox makes room for: %v", err)
	}
	t.Logf("a create that evicts a paused sandbox with its memory: %v", time.Since(t0))
	if !s.Evicted() {
		t.Fatal("the paused sandbox was not evicted to make room")
	}
	if _, err := s.Client().Call(ctx, agent.Request{Op: agent.OpList}); !full(err) {
		t.Errorf("a call to it while the server's memory is full: %v", err)
	}
	m.Kill("k", b.ID)
	m.Kill("k", c.ID)
	// A fork while it is on disk.
	kids, errs, err := m.Fork(ctx, "k", s.ID, 1, time.Minute)
	if err != nil || errs[0] != nil {
		t.Fatalf("a fork of an evicted sandbox: %v %v", err, errs)
	}
	if !s.Evicted() {
		t.Error("its fork brought it back")
	}
	if got := say(t, kids[0], mustSub(t, kids[0], p.PID), p.PID, "kid"); got != "kid 2" {
		t.Errorf("the child of an evicted sandbox: %q", got)
	}
	m.Kill("k", kids[0].ID)
	t0 = time.Now()
	if got := say(t, s, sub, p.PID, "b"); got != "b 2" {
		t.Errorf("back from disk, the counter: %q", got)
	}
	t.Logf("back from disk with its memory in %v (a call's whole time)", time.Since(t0))
	if out, _, _ := sh(t, s, "cat /home/user/f"); out != "kept\n" {
		t.Errorf("back from disk, its file: %q", out)
	}
	// Evicted again, then a restart.
	if err := m.Pause(ctx, "k", s.ID); err != nil {
		t.Fatal(err)
	}
	if err := m.Evict(ctx, "k", s.ID); err != nil {
		t.Fatal(err)
	}
	m.Detach()
	m2 := live.NewManager(local.LiveStarter(x), cfg)
	defer m2.Close()
	s2, err := m2.Get("k", s.ID)
	if err != nil || !s2.Evicted() {
		t.Fatalf("taken over: %v", err)
	}
	if out, _, _ := sh(t, s2, "cat /home/user/f"); out != "kept\n" {
		t.Errorf("after a restart, back from disk, its file: %q", out)
	}
	if got := say(t, s2, mustSub(t, s2, p.PID), p.PID, "c"); got != "c 3" {
		t.Errorf("after a restart, back from disk: %q", got)
	}
}

// evictBench makes a sandbox of isolation on x whose Python process holds
// a 100 MB heap, with 100 MB of files in its home (heapAndFiles), then
// evicts it and brings it back by a call, b.N times: ms/evict (paused to
// on disk), ms/back (the call that brings it back, whole) and MB/disk
// (what it takes on disk).
func evictBench(b *testing.B, x *executor.Executor, cfg live.Config, isolation string) {
	ctx := context.Background()
	m := live.NewManager(local.LiveStarter(x), cfg)
	defer m.Close()
	s, err := m.Create(ctx, "k", live.CreateOptions{Isolation: isolation, Languages: []string{"python"}, Timeout: time.Hour, MemoryBytes: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	if _, _, err := s.Start(ctx, agent.Request{Args: []string{"python3", "-c", heapAndFiles}}); err != nil {
		b.Fatal(err)
	}
	ready(b, s)
	var evict, back time.Duration
	var disk int64
	for b.Loop() {
		if err := m.Pause(ctx, "k", s.ID); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if err := m.Evict(ctx, "k", s.ID); err != nil {
			b.Fatal(err)
		}
		evict += time.Since(t0)
		filepath.Walk(filepath.Join(cfg.StateDir, "evicted", s.ID), func(_ string, fi os.FileInfo, _ error) error {
			if fi != nil && fi.Mode().IsRegular() {
				disk += fi.Size()
			}
			return nil
		})
		t0 = time.Now()
		if _, err := s.Client().Call(ctx, agent.Request{Op: agent.OpStat, Path: "/home/user/ready"}); err != nil {
			b.Fatal(err)
		}
		back += time.Since(t0)
	}
	n := float64(b.N)
	b.ReportMetric(float64(evict.Microseconds())/1000/n, "ms/evict")
	b.ReportMetric(float64(back.Microseconds())/1000/n, "ms/back")
	b.ReportMetric(float64(disk)/1e6/n, "MB/disk")
}

// heapAndFiles is a Python program that holds a 100 MB heap and writes
// 100 MB of files in its home, then /home/user/ready.
const heapAndFiles = `import os, time
heap = bytearray(os.urandom(1 << 20)) * 100
for i in range(4):
    with open("/home/user/data%d" % i, "wb") as f:
        for _ in range(25):
            f.write(os.urandom(1 << 20))
open("/home/user/ready", "w").close()
while True:
    time.sleep(1)
`

// ready waits until s's program has written /home/user/ready.
func ready(b *testing.B, s *live.Sandbox) {
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := s.Client().Call(ctx, agent.Request{Op: agent.OpStat, Path: "/home/user/ready"})
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("the program did not get ready: %v", err)
		}
	}
}

// BenchmarkEvictGVisor: a sandbox under gVisor (evictBench's) evicted
// with its memory and brought back.
func BenchmarkEvictGVisor(b *testing.B) {
	x, cfg := gvisorExecutor(b)
	evictBench(b, x, cfg, "gvisor")
}

// BenchmarkEvict: a native sandbox (evictBench's: its process ends with
// the first eviction) evicted with its files and brought back.
func BenchmarkEvict(b *testing.B) {
	x, cfg := keptExecutor(b)
	cfg.Prewarm = 0
	evictBench(b, x, cfg, "")
}
