package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// newCacheExec builds an executor whose compile cache is dir (capped at
// max bytes; 0 the default), with the shared toolchain caches and an
// optional user languages file.
func newCacheExec(t *testing.T, dir string, max int64, languages string) *Executor {
	t.Helper()
	x, err := New(Config{DataDir: t.TempDir(), CacheDir: testCache, CompileCacheDir: dir, CompileCacheBytes: max, Languages: languages})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// cProgram is a C program that prints tag, with a compiler warning that
// shows whether the compiler's output reached CompileOutput.
func cProgram(tag string) []byte {
	return []byte(fmt.Sprintf("#warning cache-marker-%s\n#include <stdio.h>\nint main(void) { puts(\"%s\"); return 0; }\n", tag, tag))
}

// compileOnce runs req on x and checks the run printed want; it returns
// the result and the compile output seen live.
func compileOnce(t *testing.T, x *Executor, req Request, want string) (*Result, string) {
	t.Helper()
	var live bytes.Buffer
	req.CompileOutput = &live
	res := executeWith(t, x, &req)
	expectCompleted(t, res, want)
	if res.Compile == nil || res.Compile.Status != StatusCompleted {
		t.Fatalf("compile step: %s", describe(res))
	}
	return res, live.String()
}

// expectRuns checks how many compile sandboxes x has started.
func expectRuns(t *testing.T, x *Executor, want int64) {
	t.Helper()
	if got := x.compileRuns.Load(); got != want {
		t.Fatalf("compile sandboxes run: %d, want %d", got, want)
	}
}

func TestCompileCacheHit(t *testing.T) {
	dir := t.TempDir()
	x := newCacheExec(t, dir, 0, "")
	req := Request{Language: "c", Code: cProgram("hit"), Files: []sandbox.File{{Path: "data/a.txt", Data: []byte("a")}}}
	res, live := compileOnce(t, x, req, "hit\n")
	expectRuns(t, x, 1)
	if res.Compile.CacheHit {
		t.Errorf("first compile is a cache hit")
	}
	if !strings.Contains(live, "cache-marker-hit") || !strings.Contains(res.Compile.Stderr, "cache-marker-hit") {
		t.Errorf("compiler warning missing: live %q, stderr %q", live, res.Compile.Stderr)
	}
	if n, _ := x.compileCache.stats(); n != 1 {
		t.Errorf("cache has %d entries, want 1", n)
	}

	res2, live2 := compileOnce(t, x, req, "hit\n")
	expectRuns(t, x, 1) // no compile sandbox this time
	if !res2.Compile.CacheHit {
		t.Errorf("second compile is not a cache hit: %+v", res2.Compile)
	}
	if live2 != live || res2.Compile.Stderr != res.Compile.Stderr || res2.Compile.DurationMs != res.Compile.DurationMs {
		t.Errorf("a hit's compile step differs: live %q vs %q, stderr %q vs %q, %v vs %v ms",
			live2, live, res2.Compile.Stderr, res.Compile.Stderr, res2.Compile.DurationMs, res.Compile.DurationMs)
	}
	b, _ := json.Marshal(res2)
	if !bytes.Contains(b, []byte(`"cache_hit":true`)) {
		t.Errorf("JSON lacks cache_hit: %s", b)
	}
	b, _ = json.Marshal(res)
	if !bytes.Contains(b, []byte(`"cache_hit":false`)) {
		t.Errorf("JSON lacks cache_hit false: %s", b)
	}

	// What only the run sees is not part of the key: other run arguments,
	// stdin and run limits still hit, and so do the same files in another order.
	req3 := req
	req3.Args = []string{"x"}
	req3.Stdin = strings.NewReader("input")
	req3.Limits = Limits{MemoryBytes: 128 << 20}
	res3, _ := compileOnce(t, x, req3, "hit\n")
	if !res3.Compile.CacheHit {
		t.Errorf("run-only changes missed the cache")
	}
	req4 := req
	req4.Files = []sandbox.File{{Path: "z.txt", Data: []byte("z")}, {Path: "data/a.txt", Data: []byte("a")}}
	req5 := req
	req5.Files = []sandbox.File{{Path: "data/a.txt", Data: []byte("a")}, {Path: "z.txt", Data: []byte("z")}}
	if res, _ := compileOnce(t, x, req4, "hit\n"); res.Compile.CacheHit {
		t.Errorf("an added input file hit the cache")
	}
	if res, _ := compileOnce(t, x, req5, "hit\n"); !res.Compile.CacheHit {
		t.Errorf("the same files in another order missed the cache")
	}
	expectRuns(t, x, 2)
}

// TestCompileCacheMiss changes one compile input at a time: each is a miss.
func TestCompileCacheMiss(t *testing.T) {
	dir := t.TempDir()
	x := newCacheExec(t, dir, 0, "")
	base := Request{Language: "c", Code: cProgram("miss"), Files: []sandbox.File{{Path: "in.txt", Data: []byte("one"), Mode: 0o644}}}
	compileOnce(t, x, base, "miss\n")
	variants := map[string]func(r *Request){
		"code":         func(r *Request) { r.Code = append(append([]byte(nil), r.Code...), "// changed\n"...) },
		"file content": func(r *Request) { r.Files = []sandbox.File{{Path: "in.txt", Data: []byte("two"), Mode: 0o644}} },
		"file name":    func(r *Request) { r.Files = []sandbox.File{{Path: "in2.txt", Data: []byte("one"), Mode: 0o644}} },
		"file mode":    func(r *Request) { r.Files = []sandbox.File{{Path: "in.txt", Data: []byte("one"), Mode: 0o755}} },
		"compile memory": func(r *Request) {
			r.CompileLimits = Limits{MemoryBytes: 300 << 20}
		},
		"compile time": func(r *Request) { r.CompileLimits = Limits{WallTime: 17 * time.Second} },
	}
	runs := int64(1)
	for name, change := range variants {
		req := base
		change(&req)
		res, _ := compileOnce(t, x, req, "miss\n")
		runs++
		if res.Compile.CacheHit {
			t.Errorf("%s: changed, yet a cache hit", name)
		}
		expectRuns(t, x, runs)
	}
	// The same request again still hits.
	if res, _ := compileOnce(t, x, base, "miss\n"); !res.Compile.CacheHit {
		t.Errorf("the unchanged request missed")
	}

	// Another compile argv (a user languages file) on the same cache
	// directory misses; the same argv hits.
	langs := filepath.Join(t.TempDir(), "languages.yaml")
	lang := `languages:
  - name: c
    extensions: [c]
    source: main.c
    toolchain: [/usr/bin/gcc, gcc, cc]
    version: ["{bin}", --version]
    compile: ["{bin}", %s, -std=gnu17, -Wall, -o, main, main.c, -lm]
    artifacts: [main]
    run: [./main]
    compile_limits: {memory_mb: 512, processes: 32, wall_seconds: 30, cpu_seconds: 30, tmp_mb: 256}
`
	for _, c := range []struct {
		flag string
		hit  bool
	}{{"-O0", false}, {"-O2", true}} {
		if err := os.WriteFile(langs, []byte(fmt.Sprintf(lang, c.flag)), 0o644); err != nil {
			t.Fatal(err)
		}
		y := newCacheExec(t, dir, 0, langs)
		res, _ := compileOnce(t, y, base, "miss\n")
		if res.Compile.CacheHit != c.hit {
			t.Errorf("compile flag %s: cache hit %v, want %v", c.flag, res.Compile.CacheHit, c.hit)
		}
	}
}

// TestCompileKeyFields checks that the key takes every field apart: moving
// bytes between neighbouring fields changes it.
func TestCompileKeyFields(t *testing.T) {
	lang := &Language{Name: "c"}
	tc := &Toolchain{Bin: "/usr/bin/gcc", Home: "/usr", Version: "12.2.0"}
	spec := func(change func(s *sandbox.Spec)) *sandbox.Spec {
		s := &sandbox.Spec{Args: []string{"gcc", "-o", "main", "main.c"}, Env: []string{"A=1", "B=2"},
			Files:  []sandbox.File{{Path: "ab", Data: []byte("c")}, {Path: "main.c", Data: []byte("int main;")}},
			Limits: sandbox.Limits{Memory: 1 << 20}.WithDefaults(), Collect: sandbox.Collect{Patterns: []string{"main"}}}
		if change != nil {
			change(s)
		}
		return s
	}
	base := compileKey(lang, tc, spec(nil), "", false)
	if compileKey(lang, tc, spec(nil), "", false) != base {
		t.Fatal("the key is not stable")
	}
	same := map[string]func(s *sandbox.Spec){
		"env order":   func(s *sandbox.Spec) { s.Env = []string{"B=2", "A=1"} },
		"files order": func(s *sandbox.Spec) { s.Files[0], s.Files[1] = s.Files[1], s.Files[0] },
		"mode 0":      func(s *sandbox.Spec) { s.Files[0].Mode = 0o644 },
		"stdin":       func(s *sandbox.Spec) { s.Stdin = strings.NewReader("x") },
	}
	for name, change := range same {
		if compileKey(lang, tc, spec(change), "", false) != base {
			t.Errorf("%s changed the key", name)
		}
	}
	differ := map[string]func(s *sandbox.Spec){
		"path/data boundary": func(s *sandbox.Spec) { s.Files[0] = sandbox.File{Path: "a", Data: []byte("bc")} },
		"argv split":         func(s *sandbox.Spec) { s.Args = []string{"gcc", "-o main", "main.c"} },
		"argv joined":        func(s *sandbox.Spec) { s.Args = []string{"gcc-o", "main", "main.c"} },
		"env":                func(s *sandbox.Spec) { s.Env = []string{"A=1", "B=3"} },
		"env split":          func(s *sandbox.Spec) { s.Env = []string{"A=1B=2"} },
		"file mode":          func(s *sandbox.Spec) { s.Files[0].Mode = 0o755 },
		"file added":         func(s *sandbox.Spec) { s.Files = append(s.Files, sandbox.File{Path: "x"}) },
		"memory":             func(s *sandbox.Spec) { s.Limits.Memory = 2 << 20 },
		"cpus":               func(s *sandbox.Spec) { s.Limits.CPUs = 2 },
		"artifacts":          func(s *sandbox.Spec) { s.Collect.Patterns = []string{"main", "*.o"} },
		"mount":              func(s *sandbox.Spec) { s.Mounts = []sandbox.Mount{{Source: "/opt"}} },
		"mount overlay":      func(s *sandbox.Spec) { s.Mounts = []sandbox.Mount{{Source: "/opt", Overlay: true}} },
	}
	seen := map[cacheKey]string{base: "base"}
	for name, change := range differ {
		k := compileKey(lang, tc, spec(change), "", false)
		if other, dup := seen[k]; dup {
			t.Errorf("%s gives the key of %s", name, other)
		}
		seen[k] = name
	}
	for name, k := range map[string]cacheKey{
		"language":  compileKey(&Language{Name: "cpp"}, tc, spec(nil), "", false),
		"version":   compileKey(lang, &Toolchain{Bin: tc.Bin, Home: tc.Home, Version: "12.2.1"}, spec(nil), "", false),
		"toolchain": compileKey(lang, &Toolchain{Bin: "/opt/gcc/bin/gcc", Home: "/opt/gcc", Version: tc.Version}, spec(nil), "", false),
		"home":      compileKey(lang, &Toolchain{Bin: tc.Bin, Home: "/", Version: tc.Version}, spec(nil), "", false),
		// The same paths inside two images: the image's digest tells them apart.
		"image":       compileKey(lang, &Toolchain{Bin: tc.Bin, Home: tc.Home, Version: tc.Version, Root: "/images/a", ImageDigest: "sha256:" + strings.Repeat("a", 64)}, spec(nil), "", false),
		"other image": compileKey(lang, &Toolchain{Bin: tc.Bin, Home: tc.Home, Version: tc.Version, Root: "/images/a", ImageDigest: "sha256:" + strings.Repeat("b", 64)}, spec(nil), "", false),
		"tenant":      compileKey(lang, tc, spec(nil), "a", false),
		"shared":      compileKey(lang, tc, spec(nil), "", true),
	} {
		if other, dup := seen[k]; dup {
			t.Errorf("%s gives the key of %s", name, other)
		}
		seen[k] = name
	}
}

// TestCompileCacheEviction fills a cache capped at about two and a half
// entries: the least recently used entry goes first.
func TestCompileCacheEviction(t *testing.T) {
	probe := newCacheExec(t, t.TempDir(), 0, "")
	compileOnce(t, probe, Request{Language: "c", Code: cProgram("p")}, "p\n")
	_, size := probe.compileCache.stats()
	if size <= 0 {
		t.Fatalf("entry size %d", size)
	}
	dir := t.TempDir()
	x := newCacheExec(t, dir, size*5/2, "")
	req := func(tag string) Request { return Request{Language: "c", Code: cProgram(tag)} }
	hit := func(tag string) bool {
		t.Helper()
		res, _ := compileOnce(t, x, req(tag), tag+"\n")
		return res.Compile.CacheHit
	}
	if hit("a") || hit("b") {
		t.Fatal("a first compile hit")
	}
	if !hit("a") { // a is now the most recently used
		t.Fatal("a missed")
	}
	if hit("c") { // evicts b, the least recently used
		t.Fatal("c hit")
	}
	if n, total := x.compileCache.stats(); n != 2 || total > size*5/2 {
		t.Errorf("%d entries, %d bytes (cap %d)", n, total, size*5/2)
	}
	if !hit("a") || !hit("c") {
		t.Error("a or c was evicted instead of b")
	}
	runs := x.compileRuns.Load()
	if hit("b") {
		t.Error("b was not evicted")
	}
	expectRuns(t, x, runs+1)
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*"))
	if len(files) != 2 {
		t.Errorf("files on disk: %v, want 2", files)
	}

	// A restart with a smaller cap evicts by last use on disk: b (just
	// compiled) stays, the older ones go.
	time.Sleep(20 * time.Millisecond)
	y := newCacheExec(t, dir, size*3/2, "")
	res, _ := compileOnce(t, y, req("b"), "b\n")
	if !res.Compile.CacheHit {
		t.Errorf("b, the most recently used, was evicted at start-up")
	}
	if n, _ := y.compileCache.stats(); n != 1 {
		t.Errorf("%d entries after the restart, want 1", n)
	}
}

// TestCompileCacheConcurrent submits the same program from 8 goroutines at
// once: one compile sandbox runs, everyone gets the program.
func TestCompileCacheConcurrent(t *testing.T) {
	x := newCacheExec(t, t.TempDir(), 0, "")
	const n = 8
	var wg sync.WaitGroup
	start := make(chan struct{})
	results := make([]*Result, n)
	lives := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			var live bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			results[i], errs[i] = x.Execute(ctx, &Request{Language: "c", Code: cProgram("together"), CompileOutput: &live})
			lives[i] = live.String()
		}()
	}
	close(start)
	wg.Wait()
	expectRuns(t, x, 1)
	misses := 0
	for i, res := range results {
		if errs[i] != nil {
			t.Fatalf("%d: %v", i, errs[i])
		}
		expectCompleted(t, res, "together\n")
		if !res.Compile.CacheHit {
			misses++
		}
		if !strings.Contains(lives[i], "cache-marker-together") {
			t.Errorf("%d: compile output %q", i, lives[i])
		}
	}
	if misses != 1 {
		t.Errorf("%d results say they compiled, want 1", misses)
	}
}

// slowCompiler is a languages.yaml whose C compile sleeps first, so that
// identical requests overlap.
const slowCompiler = `languages:
  - name: slowc
    extensions: [slowc]
    source: main.c
    toolchain: [/usr/bin/gcc]
    version: ["{bin}", --version]
    compile: [/bin/sh, -c, 'sleep 1.5 && exec "$0" -o main main.c', "{bin}"]
    artifacts: [main]
    run: [./main]
`

func TestCompileCacheWaiters(t *testing.T) {
	langs := filepath.Join(t.TempDir(), "languages.yaml")
	if err := os.WriteFile(langs, []byte(slowCompiler), 0o644); err != nil {
		t.Fatal(err)
	}
	code := []byte("#include <stdio.h>\nint main(void) { puts(\"slow\"); return 0; }\n")

	t.Run("waiter canceled", func(t *testing.T) {
		x := newCacheExec(t, t.TempDir(), 0, langs)
		leader := make(chan *Result)
		go func() {
			res, _ := x.Execute(context.Background(), &Request{Language: "slowc", Code: code})
			leader <- res
		}()
		waitFlight(t, x)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		began := time.Now()
		res, err := x.Execute(ctx, &Request{Language: "slowc", Code: code})
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(began); took > time.Second {
			t.Errorf("a canceled waiter returned after %v", took)
		}
		if res.Status != StatusCompileError || res.Compile == nil || res.Compile.Status != StatusCompileError || res.Compile.LimitReason != string(sandbox.LimitCanceled) {
			t.Errorf("canceled waiter: %s", describe(res))
		}
		expectCompleted(t, <-leader, "slow\n")
		expectRuns(t, x, 1)
	})

	t.Run("leader canceled", func(t *testing.T) {
		x := newCacheExec(t, t.TempDir(), 0, langs)
		ctx, cancel := context.WithCancel(context.Background())
		leader := make(chan *Result)
		go func() {
			res, _ := x.Execute(ctx, &Request{Language: "slowc", Code: code})
			leader <- res
		}()
		waitFlight(t, x)
		waiter := make(chan *Result)
		go func() {
			res, _ := x.Execute(context.Background(), &Request{Language: "slowc", Code: code})
			waiter <- res
		}()
		time.Sleep(300 * time.Millisecond)
		cancel()
		if res := <-leader; res.Status == StatusCompleted {
			t.Errorf("the canceled leader completed: %s", describe(res))
		}
		res := <-waiter
		expectCompleted(t, res, "slow\n")
		if res.Compile.CacheHit {
			t.Errorf("the waiter of a canceled leader says cache hit")
		}
		expectRuns(t, x, 2)
		// Its success was stored.
		if res := executeWith(t, x, &Request{Language: "slowc", Code: code}); !res.Compile.CacheHit {
			t.Errorf("after the waiter's compile: %s", describe(res))
		}
	})
}

// waitFlight waits until a compile is in flight in x's cache: the leader
// of the requests that follow (a fixed pause is not enough on a busy
// machine, where the leader may not have started yet).
func waitFlight(t *testing.T, x *Executor) {
	t.Helper()
	c := x.compileCache
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		c.mu.Lock()
		n := len(c.flights)
		c.mu.Unlock()
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no compile in flight after a minute")
		}
	}
}

func TestCompileCacheFailuresNotCached(t *testing.T) {
	x := newCacheExec(t, t.TempDir(), 0, "")
	for range 2 {
		res := executeWith(t, x, &Request{Language: "c", Code: []byte("int main(void) { return nope; }\n")})
		if res.Status != StatusCompileError || res.Compile.CacheHit {
			t.Fatalf("want a compile error, not from the cache: %s", describe(res))
		}
	}
	expectRuns(t, x, 2)
	if n, _ := x.compileCache.stats(); n != 0 {
		t.Errorf("%d entries after failed compiles", n)
	}
}

func TestCompileCacheDisabled(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cc")
	x := newCacheExec(t, dir, -1, "")
	for range 2 {
		if res, _ := compileOnce(t, x, Request{Language: "c", Code: cProgram("off")}, "off\n"); res.Compile.CacheHit {
			t.Error("a cache hit with the cache off")
		}
	}
	expectRuns(t, x, 2)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("cache directory made with the cache off: %v", err)
	}
}

// TestCompileCacheRestart serves a compile from disk to a new executor.
func TestCompileCacheRestart(t *testing.T) {
	dir := t.TempDir()
	x := newCacheExec(t, dir, 0, "")
	compileOnce(t, x, Request{Language: "c", Code: cProgram("restart")}, "restart\n")
	y := newCacheExec(t, dir, 0, "")
	res, live := compileOnce(t, y, Request{Language: "c", Code: cProgram("restart")}, "restart\n")
	if !res.Compile.CacheHit || !strings.Contains(live, "cache-marker-restart") {
		t.Errorf("after a restart: hit %v, compile output %q", res.Compile.CacheHit, live)
	}
	expectRuns(t, y, 0)
}

// TestCompileCacheCorrupt damages entries in every way a crash or a disk
// might: none is served, each is removed and compiled again.
func TestCompileCacheCorrupt(t *testing.T) {
	damage := map[string]func(t *testing.T, p string){
		"flipped byte": func(t *testing.T, p string) {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0x40
			os.WriteFile(p, b, 0o600)
		},
		"truncated": func(t *testing.T, p string) { os.Truncate(p, 100) },
		"empty":     func(t *testing.T, p string) { os.Truncate(p, 0) },
		"checksum": func(t *testing.T, p string) {
			b, _ := os.ReadFile(p)
			b[len(b)-1] ^= 1
			os.WriteFile(p, b, 0o600)
		},
		"other entry": func(t *testing.T, p string) {
			// A valid entry of another key under this name.
			b, _ := os.ReadFile(p)
			b[len(cacheMagic)] ^= 1
			os.WriteFile(p, b, 0o600)
		},
	}
	for name, broken := range damage {
		for _, restart := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s restart=%v", name, restart), func(t *testing.T) {
				dir := t.TempDir()
				x := newCacheExec(t, dir, 0, "")
				req := Request{Language: "c", Code: cProgram("corrupt")}
				compileOnce(t, x, req, "corrupt\n")
				files, _ := filepath.Glob(filepath.Join(dir, "*", "*"))
				if len(files) != 1 {
					t.Fatalf("entries on disk: %v", files)
				}
				broken(t, files[0])
				if restart {
					x = newCacheExec(t, dir, 0, "")
				}
				before := x.compileRuns.Load()
				res, _ := compileOnce(t, x, req, "corrupt\n")
				if res.Compile.CacheHit {
					t.Fatalf("a damaged entry was served")
				}
				expectRuns(t, x, before+1)
				// The entry was written again, whole.
				if res, _ := compileOnce(t, x, req, "corrupt\n"); !res.Compile.CacheHit {
					t.Errorf("no entry after the recompile")
				}
				files, _ = filepath.Glob(filepath.Join(dir, "*", "*"))
				if len(files) != 1 {
					t.Fatalf("entries on disk: %v", files)
				}
				key, ok := parseKey(filepath.Base(files[0]))
				if !ok {
					t.Fatalf("entry name %s", files[0])
				}
				if rec, err := x.compileCache.read(key); err != nil || len(rec.Files) != 1 {
					t.Errorf("entry after the recompile: %v", err)
				}
			})
		}
	}

	t.Run("leftovers", func(t *testing.T) {
		dir := t.TempDir()
		sub := filepath.Join(dir, "ab")
		os.MkdirAll(sub, 0o700)
		old := time.Now().Add(-time.Hour)
		for name, when := range map[string]time.Time{".tmp-old": old, ".tmp-new": time.Now(), "not-a-key": time.Now(), strings.Repeat("ab", 32): time.Now()} {
			p := filepath.Join(sub, name)
			os.WriteFile(p, []byte("junk"), 0o600)
			os.Chtimes(p, when, when)
		}
		x := newCacheExec(t, dir, 0, "")
		compileOnce(t, x, Request{Language: "c", Code: cProgram("left")}, "left\n")
		left, _ := os.ReadDir(sub)
		var names []string
		for _, d := range left {
			names = append(names, d.Name())
		}
		if len(names) != 1 || names[0] != ".tmp-new" {
			t.Errorf("left in the cache: %v, want only the recent temporary file", names)
		}
	})
}

// TestCompileCacheSpeedup measures a cold compile against a cache hit for
// hello world in C++, Go, Rust and Java, through Execute.
func TestCompileCacheSpeedup(t *testing.T) {
	if testing.Short() {
		t.Skip("measurement")
	}
	for _, l := range []langSpec{{"cpp", "cpp", true}, {"go", "go", true}, {"rust", "rs", true}, {"java", "java", true}} {
		t.Run(l.name, func(t *testing.T) {
			x := newCacheExec(t, t.TempDir(), 0, "")
			code := program(t, l, "hello")
			timed := func() (time.Duration, *Result) {
				began := time.Now()
				res := executeWith(t, x, &Request{Language: l.name, Code: code})
				took := time.Since(began)
				expectCompleted(t, res, "hello, world\n")
				return took, res
			}
			// The toolchain's own cache (Go's std build, javac's class
			// archive) is prepared by another program first: cold means a
			// compile cache miss, not a first use.
			warm := executeWith(t, x, &Request{Language: l.name, Code: program(t, l, "exit3")})
			if warm.Compile == nil || warm.Compile.Status != StatusCompleted {
				t.Fatalf("warm-up: %s", describe(warm))
			}
			cold, res := timed()
			if res.Compile.CacheHit {
				t.Fatal("cold compile hit")
			}
			compileMs := res.Compile.DurationMs
			hit := time.Duration(1 << 62)
			for range 5 {
				d, res := timed()
				if !res.Compile.CacheHit {
					t.Fatal("no cache hit")
				}
				hit = min(hit, d)
			}
			t.Logf("%s hello world through Execute: cold %.0f ms (compile sandbox %.0f ms), cache hit %.0f ms (best of 5): %.1fx faster",
				l.name, ms(cold), compileMs, ms(hit), float64(cold)/float64(hit))
			if hit*2 > cold {
				t.Errorf("a cache hit (%v) is not under half of a cold compile (%v)", hit, cold)
			}
		})
	}
}
