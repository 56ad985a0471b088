package executor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/testkit/syncbuf"
)

// slowShell's cache takes a couple of seconds to prepare (as Go's std
// build takes its time); failingShell's cannot be prepared at all, and its
// compile works without it.
const slowShell = `languages:
  - {name: slowsh, source: main.sh, toolchain: [/bin/bash], cache: {dir: /cache/sh, prepare: ["{bin}", -c, "sleep 2; echo warm > /cache/sh/w"]}, compile: ["{bin}", -c, "cat /cache/sh/w main.sh > prog"], artifacts: [prog], run: ["{bin}", -c, "cat prog"]}
  - {name: failsh, source: main.sh, toolchain: [/bin/bash], cache: {dir: /cache/sh, prepare: ["{bin}", -c, "echo no room >&2; exit 3"]}, compile: ["{bin}", -c, "ls -A /cache/sh > prog; cat main.sh >> prog"], artifacts: [prog], run: ["{bin}", -c, "cat prog"]}
`

func toolcacheExec(t *testing.T, toolchains string) *Executor {
	t.Helper()
	langs := filepath.Join(t.TempDir(), "languages.yaml")
	if err := os.WriteFile(langs, []byte(slowShell), 0o644); err != nil {
		t.Fatal(err)
	}
	x, err := New(Config{Languages: langs, DataDir: t.TempDir(), ToolchainCacheDir: toolchains, CompileCacheBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// TestCacheWaitedForWithProgress: a request that needs a toolchain cache
// being prepared in the background waits for it, hearing how long it has
// waited; the preparation leaves the idle priority it started at; /readyz's
// states say preparing, then ready; and another data dir on the same host
// finds it ready.
func TestCacheWaitedForWithProgress(t *testing.T) {
	old, oldEvery := PrewarmLanguages, cacheProgressEvery
	PrewarmLanguages, cacheProgressEvery = []string{"slowsh"}, 200*time.Millisecond
	t.Cleanup(func() { PrewarmLanguages, cacheProgressEvery = old, oldEvery })
	toolchains := t.TempDir()
	x := toolcacheExec(t, toolchains)
	bg := make(chan error, 1)
	go func() { bg <- x.PrepareCaches(context.Background()) }()
	// The background preparation is under way (idle) before the request.
	deadline := time.Now().Add(time.Minute)
	for {
		states := x.CacheStates()
		if len(states) == 1 && states[0].State == "preparing" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no preparation under way: %+v", states)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var progress syncbuf.Buffer
	res := executeWith(t, x, &Request{Language: "slowsh", Code: []byte("true\n"), Progress: &progress})
	expectCompleted(t, res, "warm\ntrue\n")
	if got := progress.String(); !strings.Contains(got, "preparing slowsh's toolchain cache") {
		t.Errorf("progress while waiting: %q", got)
	}
	x.caches.mu.Lock()
	for _, ce := range x.caches.done {
		if !ce.priority {
			t.Error("the preparation a request waited for kept the idle priority")
		}
	}
	x.caches.mu.Unlock()
	if err := <-bg; err != nil {
		t.Fatal(err)
	}
	if st := x.CacheStates(); len(st) != 1 || st[0].State != "ready" {
		t.Errorf("states after: %+v", st)
	}
	// Another data dir of the host: ready, nothing prepared again.
	y := toolcacheExec(t, toolchains)
	if st := y.ToolchainCacheStatus(); len(st) != 1 || st[0].State != "ready" {
		t.Errorf("another data dir: %+v", st)
	}
	var again syncbuf.Buffer
	expectCompleted(t, executeWith(t, y, &Request{Language: "slowsh", Code: []byte("true\n"), Progress: &again}), "warm\ntrue\n")
	if again.String() != "" || len(y.CacheStates()) != 1 {
		t.Errorf("another data dir prepared again: %q %+v", again.String(), y.CacheStates())
	}
}

// TestCacheFailedCompilesWithout: a toolchain cache that cannot be
// prepared fails no request: the compile runs without it (an empty
// directory in its place) and the request hears why.
func TestCacheFailedCompilesWithout(t *testing.T) {
	x := toolcacheExec(t, t.TempDir())
	var progress syncbuf.Buffer
	res := executeWith(t, x, &Request{Language: "failsh", Code: []byte("true\n"), Progress: &progress})
	expectCompleted(t, res, "true\n")
	if got := progress.String(); !strings.Contains(got, "no room") || !strings.Contains(got, "compiling without it") {
		t.Errorf("progress: %q", got)
	}
	if st := x.CacheStates(); len(st) != 1 || st[0].State != "failed" || !strings.Contains(st[0].Error, "exit 3") {
		t.Errorf("states: %+v", st)
	}
}

// quickShell has a quick cache (made at once) beside its whole one (which
// takes a few seconds): the compile says which it saw.
const quickShell = `languages:
  - {name: quicksh, source: main.sh, toolchain: [/bin/bash], cache: {dir: /cache/sh, quick: ["{bin}", -c, "echo quick > /cache/sh/q"], prepare: ["{bin}", -c, "sleep 5; echo whole > /cache/sh/w"]}, compile: ["{bin}", -c, "cat /cache/sh/* > prog"], artifacts: [prog], run: ["{bin}", -c, "cat prog"]}
`

// TestCacheQuickFirst: while a server prepares the caches, a compile
// waits for the quick one, not the whole; the whole starts from the quick
// one's content; once it is ready, compiles use it.
func TestCacheQuickFirst(t *testing.T) {
	old := PrewarmLanguages
	PrewarmLanguages = []string{"quicksh"}
	t.Cleanup(func() { PrewarmLanguages = old })
	langs := filepath.Join(t.TempDir(), "languages.yaml")
	if err := os.WriteFile(langs, []byte(quickShell), 0o644); err != nil {
		t.Fatal(err)
	}
	x, err := New(Config{Languages: langs, DataDir: t.TempDir(), ToolchainCacheDir: t.TempDir(), CompileCacheBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	bg := make(chan error, 1)
	go func() { bg <- x.PrepareCaches(context.Background()) }()
	// A compile while the whole is being prepared (once the preparation is
	// under way): the quick cache only (its file, not the whole's).
	for deadline := time.Now().Add(time.Minute); len(x.CacheStates()) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no preparation under way")
		}
	}
	expectCompleted(t, executeWith(t, x, &Request{Language: "quicksh", Code: []byte("# one\n")}), "quick\n")
	if st := x.CacheStates(); len(st) != 2 || !st[0].Quick || st[0].State != "ready" || st[1].State != "preparing" {
		t.Errorf("states while the whole is prepared: %+v", st)
	}
	if err := <-bg; err != nil {
		t.Fatal(err)
	}
	// The whole, which has the quick one's content too (seeded from it).
	expectCompleted(t, executeWith(t, x, &Request{Language: "quicksh", Code: []byte("# two\n")}), "quick\nwhole\n")
	// Without a server preparing them (the CLI), a compile waits for the
	// whole: there is no quick one to make it wait less.
	y, err := New(Config{Languages: langs, DataDir: t.TempDir(), ToolchainCacheDir: t.TempDir(), CompileCacheBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	expectCompleted(t, executeWith(t, y, &Request{Language: "quicksh", Code: []byte("# three\n")}), "whole\n")
}
