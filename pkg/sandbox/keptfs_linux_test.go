package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// keptRun starts spec on e and returns its result, the sandbox that served
// it and whether it ran on the filesystems its sandbox's last run left.
func keptRun(t *testing.T, e *Engine, spec *Spec) (*Result, *container, bool) {
	t.Helper()
	p, err := e.Start(context.Background(), withDefaults(spec))
	if err != nil {
		t.Fatal(err)
	}
	c, kept := p.c, p.fsKept
	res, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	e.Quiesce()
	return res, c, kept
}

// TestRunFilesystemsKept: a run's /work, /tmp and /dev/shm serve the next
// run of its tenant in the same sandbox, emptied, without a mount: the next
// run sees them as fresh ones (empty, their modes, all their space), and
// the host's files a link in them names are untouched by the emptying.
// Another tenant's run gets new ones; a run that changed what emptying
// cannot undo (the mode of /work, an extended attribute on it) or left
// more entries than it removes retires its sandbox.
func TestRunFilesystemsKept(t *testing.T) {
	e, err := New(Config{UIDBase: testUIDs(17), UIDSlots: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	// What the host has beyond the links a run leaves.
	hostDir := t.TempDir()
	hostFile := filepath.Join(hostDir, "keep")
	if err := os.WriteFile(hostFile, []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Dir(hostDir), 0o755)
	look := `stat -c '%a %U' /work /tmp /dev/shm; ls -A /work /tmp /dev/shm; df --output=used /work /tmp /dev/shm | tail -n +2
/usr/bin/python3 -c 'import os; print(os.listxattr("/work"))'`
	fresh, c0, kept := keptRun(t, e, &Spec{Args: []string{"bash", "-c", look}, Tenant: "a"})
	if kept {
		t.Error("a new sandbox's first run had kept filesystems")
	}
	if fresh.ExitCode != 0 {
		t.Fatalf("look: %q %q", fresh.Stdout, fresh.Stderr)
	}
	litter := `set -e
mkdir -p /work/a/b/c /tmp/d/e /dev/shm/f
echo x > /work/a/b/c/file; echo y > /tmp/d/e/file; head -c 1000000 /dev/zero > /dev/shm/f/big
ln -s ` + hostDir + ` /tmp/evil; ln -s ` + hostFile + ` /work/a/evil; ln ` + "/work/a/b/c/file" + ` /work/hard
mkfifo /tmp/fifo; chmod 000 /tmp/d; touch /work/.hidden
mkdir /tmp/sticky; chmod 1777 /tmp/sticky; touch /tmp/sticky/x`
	res, c1, _ := keptRun(t, e, &Spec{Args: []string{"bash", "-c", litter}, Tenant: "a"})
	if res.ExitCode != 0 || c1 != c0 {
		t.Fatalf("litter: exit %d %q, same sandbox %v", res.ExitCode, res.Stderr, c1 == c0)
	}
	after, c2, kept := keptRun(t, e, &Spec{Args: []string{"bash", "-c", look}, Tenant: "a"})
	if c2 != c0 || !kept {
		t.Errorf("the tenant's next run: same sandbox %v, kept filesystems %v", c2 == c0, kept)
	}
	if string(after.Stdout) != string(fresh.Stdout) {
		t.Errorf("after a run that left files, the next run saw:\n%s\nwhere a fresh sandbox's first run saw:\n%s", after.Stdout, fresh.Stdout)
	}
	if b, err := os.ReadFile(hostFile); err != nil || string(b) != "host" {
		t.Errorf("the host file a link named: %q, %v", b, err)
	}

	// Another tenant: new filesystems (inode numbers and times would tell
	// it about the last tenant's runs).
	if _, _, kept := keptRun(t, e, &Spec{Args: []string{"true"}, Tenant: "b"}); kept {
		t.Error("another tenant's run got the last tenant's filesystems")
	}

	// What emptying cannot undo retires the sandbox.
	for _, undo := range []string{
		"chmod 700 /work",
		// Where the kernel's tmpfs has no user xattrs (before 6.6) the
		// program cannot set one: then there is nothing to undo.
		`/usr/bin/python3 -c '
import errno, os
try:
    os.setxattr("/work", "user.mark", b"1")
except OSError as e:
    if e.errno != errno.EOPNOTSUPP: raise
    print("no user xattrs on tmpfs here")'`,
		"mkdir /tmp/many && cd /tmp/many && touch $(seq 1200)",
	} {
		res, c, _ := keptRun(t, e, &Spec{Args: []string{"bash", "-c", undo}, Tenant: "b"})
		if res.ExitCode != 0 {
			t.Fatalf("%s: exit %d %q", undo, res.ExitCode, res.Stderr)
		}
		nothing := strings.Contains(string(res.Stdout), "no user xattrs")
		if nothing {
			t.Log("this kernel's tmpfs takes no user xattr: nothing to undo")
		}
		next, c2, kept := keptRun(t, e, &Spec{Args: []string{"bash", "-c", look}, Tenant: "b"})
		if !nothing && (c2 == c || kept) {
			t.Errorf("after %q: same sandbox %v, kept filesystems %v", undo, c2 == c, kept)
		}
		if string(next.Stdout) != string(fresh.Stdout) {
			t.Errorf("after %q the next run saw:\n%s", undo, next.Stdout)
		}
	}
}

// TestLateCancelKillsNothing: a run's watch on its context that gets to
// run only after the run is over (a busy machine; the request's context
// is canceled once the caller has the result) kills nothing, though the
// run's cgroup now serves the next run of its tenant. Before, the watch
// found both its context done and its stop signal, picked at random, and
// killed the next run's program (seen as a run ending with SIGKILL within
// a millisecond under load).
func TestLateCancelKillsNothing(t *testing.T) {
	e, err := New(Config{UIDBase: testUIDs(18), UIDSlots: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	release := make(chan struct{})
	var wg sync.WaitGroup
	// Only the watches of the runs of "true" are late.
	testHookCancelWatch = func(p *Process) {
		if p.spec.Args[0] == "true" {
			<-release
		}
	}
	defer func() { testHookCancelWatch = nil }()
	shared := 0
	defer func() {
		// v1 recycles a run's cgroup for the tenant's next run (where the
		// late kill hit it); v2 gives each run its own.
		t.Logf("the next run had the first run's cgroup in %d of 8 rounds", shared)
	}()
	for i := 0; i < 8; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		p, err := e.Start(ctx, withDefaults(&Spec{Args: []string{"true"}, Tenant: "t"}))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Wait(); err != nil {
			t.Fatal(err)
		}
		e.Quiesce()
		cancel()
		next, err := e.Start(context.Background(), withDefaults(&Spec{Args: []string{"bash", "-c", "sleep 0.3; echo alive"}, Tenant: "t"}))
		if err != nil {
			t.Fatal(err)
		}
		if next.cg == p.cg {
			shared++
		}
		// The first run's watch runs now, while the next run lasts.
		wg.Add(1)
		go func() {
			defer wg.Done()
			release <- struct{}{}
		}()
		res, err := next.Wait()
		wg.Wait()
		if err != nil {
			t.Fatal(err)
		}
		if string(res.Stdout) != "alive\n" || res.Signal != "" {
			t.Fatalf("round %d: the next run got %q, signal %q, limit %q", i, res.Stdout, res.Signal, res.Limit)
		}
		e.Quiesce()
	}
}
