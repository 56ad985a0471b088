package executor

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// cachedShell is a compiled language whose toolchain cache is cheap to
// fill, to watch what a first compile on a fresh data dir does.
const cachedShell = `languages:
  - {name: cachedsh, source: main.sh, toolchain: [/bin/bash], cache: {dir: /cache/sh, prepare: ["{bin}", -c, "echo warm > /cache/sh/w"]}, compile: ["{bin}", -c, "cat /cache/sh/w main.sh > prog"], artifacts: [prog], run: ["{bin}", -c, "head -1 prog"]}
`

// TestCacheProgress: filling a toolchain cache is announced (start, then
// done) to Config.CacheProgress, once per data dir; PrepareCaches fills it
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
		x, err := New(Config{Languages: langs, DataDir: dataDir, CompileCacheBytes: -1, CacheProgress: progress})
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
	x, err := New(Config{Languages: langs, DataDir: t.TempDir(), CompileCacheBytes: -1})
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
