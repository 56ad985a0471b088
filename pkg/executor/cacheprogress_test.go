package executor

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// cachedShell is a compiled language whose toolchain cache is cheap to
// fill, to watch what a first compile on a fresh data dir does.
const cachedShell = `languages:
  - {name: cachedsh, source: main.sh, toolchain: [/bin/bash], cache: {dir: /cache/sh, prepare: ["{bin}", -c, "echo warm > /cache/sh/w"]}, compile: ["{bin}", -c, "cat /cache/sh/w main.sh > prog"], artifacts: [prog], run: ["{bin}", -c, "head -1 prog"]}
`

// TestCacheProgress: filling a toolchain cache is announced (start, then
// done) to Config.CacheProgress, once per toolchain cache dir; PrepareCaches fills it
// ahead of any compile.
func TestCacheProgress(t *testing.T) {
	langs := filepath.Join(t.TempDir(), "languages.yaml")
	if err := os.WriteFile(langs, []byte(cachedShell), 0o644); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var events []string
	progress := func(ev CacheEvent) {
		mu.Lock()
		defer mu.Unlock()
		state := "start"
		if ev.Done {
			state = "done"
			if ev.Err != nil {
				state = "failed: " + ev.Err.Error()
			}
		}
		events = append(events, ev.Language+" "+state)
	}
	newExec := func(dataDir string) *Executor {
		// Each data dir here is a host of its own: its toolchain caches in it.
		x, err := New(Config{Languages: langs, DataDir: dataDir, ToolchainCacheDir: filepath.Join(dataDir, "toolchains"), CompileCacheBytes: -1, CacheProgress: progress})
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	dataDir := t.TempDir()
	x := newExec(dataDir)
	for range 2 {
		res := executeWith(t, x, &Request{Language: "cachedsh", Code: []byte("true\n")})
		expectCompleted(t, res, "warm\n")
	}
	if want := []string{"cachedsh start", "cachedsh done"}; !slices.Equal(events, want) {
		t.Errorf("first two runs: events %q, want %q", events, want)
	}
	// Another process on the same data dir finds the cache complete.
	events = nil
	executeWith(t, newExec(dataDir), &Request{Language: "cachedsh", Code: []byte("true\n")})
	if len(events) != 0 {
		t.Errorf("complete cache: events %q, want none", events)
	}

	// PrepareCaches (what serve runs at start) fills it before any compile.
	old := PrewarmLanguages
	PrewarmLanguages = []string{"cachedsh"}
	t.Cleanup(func() { PrewarmLanguages = old })
	events = nil
	fresh := newExec(t.TempDir())
	if err := fresh.PrepareCaches(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := []string{"cachedsh start", "cachedsh done"}; !slices.Equal(events, want) {
		t.Errorf("PrepareCaches: events %q, want %q", events, want)
	}
	events = nil
	executeWith(t, fresh, &Request{Language: "cachedsh", Code: []byte("true\n")})
	if len(events) != 0 {
		t.Errorf("run after PrepareCaches: events %q, want none", events)
	}
}

// TestCacheFillRetried: a toolchain cache whose filling failed (here its
// context ended, as when the client that started it goes away) is filled
// again by the next compile that needs it, not failed for the life of the
// process.
func TestCacheFillRetried(t *testing.T) {
	langs := filepath.Join(t.TempDir(), "languages.yaml")
	if err := os.WriteFile(langs, []byte(cachedShell), 0o644); err != nil {
		t.Fatal(err)
	}
	x, err := New(Config{Languages: langs, DataDir: t.TempDir(), ToolchainCacheDir: t.TempDir(), CompileCacheBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	old := PrewarmLanguages
	PrewarmLanguages = []string{"cachedsh"}
	t.Cleanup(func() { PrewarmLanguages = old })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := x.PrepareCaches(ctx); err == nil {
		t.Fatal("a fill with its context ended succeeded")
	}
	res := executeWith(t, x, &Request{Language: "cachedsh", Code: []byte("true\n")})
	expectCompleted(t, res, "warm\n")
}

// resumableShell's cache fill counts its runs in the cache and, on its
// first run, waits a minute (as Go's std build takes its time).
const resumableShell = `languages:
  - {name: resumesh, source: main.sh, toolchain: [/bin/bash], cache: {dir: /cache/sh, prepare: ["{bin}", -c, "echo run >> /cache/sh/runs; if [ $(wc -l < /cache/sh/runs) -lt 2 ]; then sleep 60; fi; echo warm > /cache/sh/w"]}, compile: ["{bin}", -c, "cat /cache/sh/w /cache/sh/runs main.sh > prog"], artifacts: [prog], run: ["{bin}", -c, "cat prog"]}
`

// TestCacheFillResumes: a toolchain cache fill cut short (a server stopped
// seconds after it started) leaves what it made for the next fill, which
// goes on from there instead of starting again; and two executors on one
// toolchain cache dir (a CLI beside a server) fill it once between them.
func TestCacheFillResumes(t *testing.T) {
	langs := filepath.Join(t.TempDir(), "languages.yaml")
	if err := os.WriteFile(langs, []byte(resumableShell), 0o644); err != nil {
		t.Fatal(err)
	}
	dataDir, toolchains := t.TempDir(), t.TempDir()
	newExec := func() *Executor {
		x, err := New(Config{Languages: langs, DataDir: dataDir, ToolchainCacheDir: toolchains, CompileCacheBytes: -1})
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	old := PrewarmLanguages
	PrewarmLanguages = []string{"resumesh"}
	t.Cleanup(func() { PrewarmLanguages = old })

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := newExec().PrepareCaches(ctx); err == nil {
		t.Fatal("the first fill, cut short, succeeded")
	}
	// The second fill finds the first's run and needs no minute; two
	// executors at once fill it once.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel2()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		x := newExec()
		wg.Go(func() { errs[i] = x.PrepareCaches(ctx2) })
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("the fills after the cut one: %v / %v (a fill that starts again waits a minute)", errs[0], errs[1])
	}
	res := executeWith(t, newExec(), &Request{Language: "resumesh", Code: []byte("true\n")})
	expectCompleted(t, res, "warm\nrun\nrun\ntrue\n")
}
