package executor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestCompileCachePerTenant: a tenant's compile never answers another
// tenant's request, neither from the cache (a hit, or its speed, would tell
// B that A compiled the same program) nor as an identical compile in
// flight; each tenant still hits its own entries.
func TestCompileCachePerTenant(t *testing.T) {
	x := newCacheExec(t, t.TempDir(), 0, "")
	req := Request{Language: "c", Code: cProgram("tenant"), Tenant: "alice"}
	if res, _ := compileOnce(t, x, req, "tenant\n"); res.Compile.CacheHit {
		t.Fatalf("alice's first compile is a cache hit")
	}
	if res, _ := compileOnce(t, x, req, "tenant\n"); !res.Compile.CacheHit {
		t.Fatalf("alice's second compile missed her own cache")
	}
	expectRuns(t, x, 1)
	for _, tenant := range []string{"bob", ""} {
		other := req
		other.Tenant = tenant
		if res, _ := compileOnce(t, x, other, "tenant\n"); res.Compile.CacheHit {
			t.Errorf("tenant %q got alice's compile from the cache", tenant)
		}
	}
	expectRuns(t, x, 3)
	bob := req
	bob.Tenant = "bob"
	if res, _ := compileOnce(t, x, bob, "tenant\n"); !res.Compile.CacheHit {
		t.Errorf("bob's second compile missed his own cache")
	}
	expectRuns(t, x, 3)
}

// TestCompileCachePerTenantInFlight: identical compiles of two tenants at
// the same time both compile. Whichever starts first, neither may take the
// other's outcome (as a waiter, or from the entry the first one stored).
func TestCompileCachePerTenantInFlight(t *testing.T) {
	langs := filepath.Join(t.TempDir(), "languages.yaml")
	if err := os.WriteFile(langs, []byte(slowCompiler), 0o644); err != nil {
		t.Fatal(err)
	}
	code := []byte("#include <stdio.h>\nint main(void) { puts(\"slow\"); return 0; }\n")
	x := newCacheExec(t, t.TempDir(), 0, langs)
	results := make(chan *Result, 2)
	for i, tenant := range []string{"alice", "bob"} {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			res, err := x.Execute(ctx, &Request{Language: "slowc", Code: code, Tenant: tenant})
			if err != nil {
				res = &Result{Error: err.Error()}
			}
			results <- res
		}()
		if i == 0 {
			time.Sleep(300 * time.Millisecond) // alice's compile is (most likely) in flight
		}
	}
	for range 2 {
		res := <-results
		expectCompleted(t, res, "slow\n")
		if res.Compile == nil || res.Compile.CacheHit {
			t.Errorf("a tenant took the other's compile: %s", describe(res))
		}
	}
	expectRuns(t, x, 2)
}

// TestCompileCacheShared: with Config.SharedCompileCache every tenant
// uses every other's entries.
func TestCompileCacheShared(t *testing.T) {
	x, err := New(Config{DataDir: t.TempDir(), CacheDir: testCache, CompileCacheDir: t.TempDir(), SharedCompileCache: true})
	if err != nil {
		t.Fatal(err)
	}
	req := Request{Language: "c", Code: cProgram("shared"), Tenant: "alice"}
	compileOnce(t, x, req, "shared\n")
	for _, tenant := range []string{"bob", ""} {
		other := req
		other.Tenant = tenant
		if res, _ := compileOnce(t, x, other, "shared\n"); !res.Compile.CacheHit {
			t.Errorf("tenant %q missed the shared cache", tenant)
		}
	}
	expectRuns(t, x, 1)
}

// TestAutoTimeoutPerTenant: one tenant's quick runs do not shorten another
// tenant's automatic timeout: the other gets the default until it has a
// history of its own.
func TestAutoTimeoutPerTenant(t *testing.T) {
	x := testExecutor(t, 20*time.Second)
	fast := "import time\ntime.sleep(0.05)\n"
	for range AutoTimeoutMinSamples + 2 {
		res := executeWith(t, x, &Request{Language: "python", Code: []byte(fast), Tenant: "quick"})
		expectCompleted(t, res, "")
	}
	if _, ok := x.AutoTimeout("quick", "python", nil); !ok {
		t.Fatalf("the quick tenant has no automatic timeout after %d runs", AutoTimeoutMinSamples+2)
	}
	for _, tenant := range []string{"slow", ""} {
		if d, ok := x.AutoTimeout(tenant, "python", nil); ok {
			t.Errorf("tenant %q has the quick tenant's automatic timeout %v", tenant, d)
		}
	}
	// The slow tenant's 2.5 s program runs under the default timeout (30 s),
	// not the quick tenant's (about 1.2 s).
	res := executeWith(t, x, &Request{Language: "python", Code: []byte("import time\ntime.sleep(2.5)\nprint('done')\n"),
		AutoTimeout: true, Tenant: "slow"})
	if res.AutoTimeoutSeconds != 30 {
		t.Errorf("slow tenant: auto timeout %v, want the default 30", res.AutoTimeoutSeconds)
	}
	expectCompleted(t, res, "done\n")
}

// TestAutoTimeoutMemoryBound: the statistics keep at most
// maxDurationTenants tenants of maxDurationKeys keys each, forgetting the
// least recently used.
func TestAutoTimeoutMemoryBound(t *testing.T) {
	var s durationStats
	record := func(tenant, key string) {
		for range AutoTimeoutMinSamples {
			s.record(tenant, key, 100*time.Millisecond)
		}
	}
	has := func(tenant, key string) bool { return s.autoTimeout(tenant, key, time.Minute) > 0 }
	record("t0", "k")
	record("t1", "k")
	for i := 2; i <= maxDurationTenants; i++ { // one more tenant than the bound
		if i == maxDurationTenants/2 {
			s.autoTimeout("t0", "k", time.Minute) // t0 is used again: t1 is the oldest
		}
		record(fmt.Sprint("t", i), "k")
	}
	if len(s.tenants) != maxDurationTenants {
		t.Errorf("%d tenants kept, want %d", len(s.tenants), maxDurationTenants)
	}
	if !has("t0", "k") || has("t1", "k") || !has(fmt.Sprint("t", maxDurationTenants), "k") {
		t.Errorf("not the least recently used tenant forgotten: t0 %v t1 %v", has("t0", "k"), has("t1", "k"))
	}
	for i := 0; i <= maxDurationKeys; i++ {
		record("t0", fmt.Sprint("k", i))
	}
	if n := len(s.tenants["t0"].Value.(*tenantDurations).runs); n != maxDurationKeys {
		t.Errorf("%d keys kept for one tenant, want %d", n, maxDurationKeys)
	}
	if has("t0", "k") || !has("t0", fmt.Sprint("k", maxDurationKeys)) {
		t.Errorf("not the least recently used key forgotten")
	}
}
