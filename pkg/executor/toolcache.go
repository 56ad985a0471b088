package executor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// Toolchain caches (Go's build cache of the standard library, Java's
// class-data archive of javac) are made once per host and toolchain by the
// language's trusted prepare command, in a sandbox with the directory
// writable, and then shared read-only: a compile gets a private overlay of
// one. No user code ever runs with one writable.
//
// A request never fails because of one: it waits while one is being
// prepared (the preparation leaves the idle priority it runs at in the
// background, and the request hears how long it has waited: Request.Progress),
// and compiles without it (slower) if preparing it failed.

// DefaultToolchainCacheDir is where a server run by root keeps toolchain
// caches for every data dir of the host (Config.ToolchainCacheDir).
const DefaultToolchainCacheDir = "/var/cache/sandbox-run/toolchains"

// cachePrepareLimits bound a preparation: generous, since a request that
// waited for one that failed compiles without it (nothing fails with it).
var cachePrepareLimits = sandbox.Limits{WallTime: time.Hour, CPUTime: 2 * time.Hour, Memory: 2 << 30, Processes: 256, CPUs: 2,
	FileSize: 1 << 30, TmpSize: 2 << 30, Inodes: 1 << 20}

// cacheSet prepares each toolchain cache once per process; one that
// failed is tried again by the next that needs it.
type cacheSet struct {
	mu   sync.Mutex
	done map[string]*cacheEntry
}

// cacheEntry is one cache's preparation in this process.
type cacheEntry struct {
	ready chan struct{} // closed once dir or err is set
	dir   string
	err   error
	lang  string
	quick bool // the cache of CacheSpec.Quick
	start time.Time

	mu       sync.Mutex
	proc     *sandbox.Process // the preparing run, while it runs
	priority bool             // a request waits for it: not idle
	// waiters wait for it; when the last goes away before it is ready,
	// cancel stops it (what it made stays for the next: fillCache).
	waiters int
	cancel  context.CancelFunc
}

// prioritize says a request waits for the preparation: it leaves the idle
// priority now if it runs, or never takes it if it has yet to start.
func (ce *cacheEntry) prioritize() {
	ce.mu.Lock()
	defer ce.mu.Unlock()
	if ce.priority {
		return
	}
	ce.priority = true
	if ce.proc != nil {
		ce.proc.Prioritize() // a run that just ended is left alone
	}
}

// CacheState is where a toolchain cache stands in this process, for
// /readyz and doctor.
type CacheState struct {
	Language string        `json:"language"`
	Quick    bool          `json:"quick,omitempty"` // the cache of CacheSpec.Quick
	State    string        `json:"state"`           // preparing, ready, failed (or, ToolchainCacheStatus: not prepared)
	Error    string        `json:"error,omitempty"`
	Elapsed  time.Duration `json:"-"` // preparing: for how long
	Dir      string        `json:"dir,omitempty"`
}

// CacheStates are the toolchain caches this process prepared or is
// preparing, by language.
func (x *Executor) CacheStates() []CacheState {
	x.caches.mu.Lock()
	defer x.caches.mu.Unlock()
	var out []CacheState
	for _, ce := range x.caches.done {
		st := CacheState{Language: ce.lang, Quick: ce.quick}
		select {
		case <-ce.ready:
			st.State, st.Dir = "ready", ce.dir
			if ce.err != nil {
				st.State, st.Error, st.Dir = "failed", ce.err.Error(), ""
			}
		default:
			st.State, st.Elapsed = "preparing", time.Since(ce.start)
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b CacheState) int {
		if c := strings.Compare(a.Language, b.Language); c != 0 {
			return c
		}
		if a.Quick == b.Quick {
			return 0
		}
		if a.Quick {
			return -1
		}
		return 1
	})
	return out
}

// toolchainCacheKey names lang's cache for tc: the language and version for people,
// and a hash of everything that makes its content (the toolchain, the
// image, the prepare command and environment), so that caches of one host
// are shared only where they would be the same.
func toolchainCacheKey(lang *Language, tc *Toolchain, argv, env []string) string {
	env = slices.Clone(env)
	slices.Sort(env)
	h := sha256.New()
	json.NewEncoder(h).Encode([]any{lang.Name, tc.Version, tc.Bin, tc.Home, tc.Root, tc.ImageDigest, lang.Cache.Dir, argv, env})
	return lang.Name + "-" + strings.NewReplacer("/", "_", " ", "_").Replace(tc.Version) + "-" + hex.EncodeToString(h.Sum(nil))[:16]
}

// prepareCache returns the host directory of lang's toolchain cache,
// filling it on first use. In the background (idle) the preparation runs
// only on CPU time nothing else wants; a request (not idle) that comes to
// need it takes it out of the idle priority and waits, telling progress
// every few seconds, until it is ready or ctx ends. The preparation goes
// on when the request that started it goes away.
//
// quick prepares CacheSpec.Quick's cache instead of Prepare's; seed, if
// set, is a complete cache a new preparation starts from (Quick's, for
// Prepare's: Go's cache is content-addressed, what is there is not made
// again).
func (x *Executor) prepareCache(ctx context.Context, lang *Language, tc *Toolchain, vars map[string]string, quick, idle bool, seed string, progress io.Writer) (string, error) {
	prepare := lang.Cache.Prepare
	if quick {
		prepare = lang.Cache.Quick
	}
	argv, env := expandAll(prepare, vars), environment(lang, tc, vars, nil)
	key := toolchainCacheKey(lang, tc, argv, env)
	x.caches.mu.Lock()
	if x.caches.done == nil {
		x.caches.done = map[string]*cacheEntry{}
	}
	ce, ok := x.caches.done[key]
	if ok {
		select {
		case <-ce.ready:
			ok = ce.err == nil // a failed fill is tried again
		default:
		}
	}
	fill := !ok
	var fillCtx context.Context
	if fill {
		ce = &cacheEntry{ready: make(chan struct{}), lang: lang.Name, quick: quick, start: time.Now(), priority: !idle}
		fillCtx, ce.cancel = context.WithCancel(context.Background())
		x.caches.done[key] = ce
	}
	ce.mu.Lock()
	ce.waiters++
	ce.mu.Unlock()
	x.caches.mu.Unlock()
	// The preparation is its waiters': it goes on when the one that
	// started it goes away, and stops when they all have.
	defer func() {
		ce.mu.Lock()
		defer ce.mu.Unlock()
		if ce.waiters--; ce.waiters == 0 {
			ce.cancel()
		}
	}()
	if fill {
		go func() {
			ce.dir, ce.err = x.fillCache(fillCtx, key, ce, lang, tc, argv, env, seed)
			close(ce.ready)
		}()
	}
	select {
	case <-ce.ready:
		return ce.dir, ce.err
	default:
	}
	if !idle {
		ce.prioritize()
	}
	tick := time.NewTicker(cacheProgressEvery)
	defer tick.Stop()
	for {
		select {
		case <-ce.ready:
			if errors.Is(ce.err, context.Canceled) && ctx.Err() == nil {
				// Its waiters all went away just before this one came: prepare
				// again (from where it stopped).
				return x.prepareCache(ctx, lang, tc, vars, quick, idle, seed, progress)
			}
			return ce.dir, ce.err
		case <-ctx.Done():
			return "", ctx.Err()
		case <-tick.C:
			if progress != nil {
				what := CacheName(lang.Name)
				if quick {
					what += " for the common packages"
				}
				fmt.Fprintf(progress, "preparing %s (once per host and toolchain): %ds\n", what, int(time.Since(ce.start).Seconds()))
			}
		}
	}
}

// cacheProgressEvery is how often a request waiting for a toolchain cache
// hears how long it has waited (tests shorten it).
var cacheProgressEvery = 5 * time.Second

// CacheName is a language's toolchain cache as people call it.
func CacheName(lang string) string {
	if lang == "go" {
		return "Go's build cache"
	}
	return lang + "'s toolchain cache"
}

// fillCache fills key's cache directory by running the language's
// prepare command, once per key at a time across processes (a CLI beside
// a server, servers of other data dirs). What a fill that was cut short
// made (a server stopped after a few seconds, as the first minute of CI
// does many times) stays in the partial directory, and the next fill goes
// on from it instead of starting again: Go's build cache is
// content-addressed, and the others rewrite what they make. A fill whose
// command failed starts afresh.
func (x *Executor) fillCache(ctx context.Context, key string, ce *cacheEntry, lang *Language, tc *Toolchain, argv, env []string, seed string) (_ string, err error) {
	base := x.toolchainCacheDir
	dir := filepath.Join(base, key)
	complete := func() bool {
		_, err := os.Stat(filepath.Join(dir, ".complete"))
		return err == nil
	}
	if complete() {
		return dir, nil
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", err
	}
	unlock, err := lockPath(ctx, filepath.Join(base, "."+key+".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if complete() {
		return dir, nil // another process filled it meanwhile
	}
	partial := filepath.Join(base, "."+key+".partial")
	if err := os.Mkdir(partial, 0o777); err == nil && seed != "" {
		// A new preparation starts from the seed's content (a failed copy
		// only costs time: the command makes what is missing).
		if err := os.CopyFS(partial, os.DirFS(seed)); err == nil {
			os.Remove(filepath.Join(partial, ".complete"))
		}
	} else if err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	// The sandbox's namespace root owns nothing on the host, and each run
	// has host uids of its own: let this one write, and change what an
	// earlier, cut fill made.
	if err := chmodTree(partial, 0o777, 0o666); err != nil {
		return "", err
	}
	if x.cacheProgress != nil {
		start := time.Now()
		x.cacheProgress(CacheEvent{Language: lang.Name, Dir: dir})
		defer func() {
			x.cacheProgress(CacheEvent{Language: lang.Name, Dir: dir, Done: true, Err: err, Elapsed: time.Since(start)})
		}()
	}
	spec := &sandbox.Spec{
		Args:   argv,
		Env:    env,
		Mounts: append(x.mounts(tc), sandbox.Mount{Source: partial, Target: lang.Cache.Dir, Writable: true}),
		Root:   tc.Root,
		Limits: cachePrepareLimits,
	}
	ce.mu.Lock()
	spec.Limits.Idle = !ce.priority
	ce.mu.Unlock()
	p, err := x.engine.Start(ctx, spec)
	if err != nil {
		return "", err
	}
	ce.mu.Lock()
	ce.proc = p
	if ce.priority && spec.Limits.Idle {
		p.Prioritize() // a request came while it started
	}
	ce.mu.Unlock()
	res, err := p.Wait()
	ce.mu.Lock()
	ce.proc = nil
	ce.mu.Unlock()
	if err != nil {
		return "", err
	}
	if ctx.Err() != nil {
		return "", ctx.Err() // cut short: what it made stays for the next
	}
	if res.ExitCode != 0 || res.Limit != sandbox.LimitNone {
		os.RemoveAll(partial) // failed: the next one starts afresh
		why := fmt.Sprintf("exit %d", res.ExitCode)
		if res.Signal != "" {
			why += " " + res.Signal
		}
		if res.Limit != sandbox.LimitNone {
			why += fmt.Sprintf(" %s limit", res.Limit)
		}
		if last := lastLine(res.Stderr); last != "" {
			why += ": " + last
		}
		return "", fmt.Errorf("preparing %s failed (%s)", CacheName(lang.Name), why)
	}
	// Complete, it is read only, by everyone.
	if err := chmodTree(partial, 0, 0); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(partial, ".complete"), nil, 0o644); err != nil {
		return "", err
	}
	os.RemoveAll(dir) // an incomplete one (none is made so, but an older build's may be there)
	if err := os.Rename(partial, dir); err != nil {
		return "", err
	}
	return dir, nil
}

// emptyCacheDir is an empty directory a compile gets instead of a
// toolchain cache that could not be prepared: an overlay of it, where the
// compiler makes what it needs (slower: nothing is kept).
func (x *Executor) emptyCacheDir() (string, error) {
	dir := filepath.Join(x.cacheDir, "empty")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	return dir, nil
}

// toolchainCacheDir is where caches go: dir when set; else the host's
// DefaultToolchainCacheDir when it can be made and written (root); else
// cacheDir/toolchains.
func toolchainCacheDir(dir, cacheDir string) string {
	if dir != "" {
		return dir
	}
	if os.Geteuid() == 0 {
		if err := os.MkdirAll(DefaultToolchainCacheDir, 0o755); err == nil {
			return DefaultToolchainCacheDir
		}
	}
	return filepath.Join(cacheDir, "toolchains")
}

// cacheVars are the variables of a toolchain cache's prepare command, as a
// compile with the language's default limits has them.
func (x *Executor) cacheVars(lang *Language, tc *Toolchain) map[string]string {
	limits := x.limits(Limits{}, lang.CompileLimits, x.compileDefaults)
	return map[string]string{"bin": tc.Bin, "home": tc.Home, "memory_mb": itoa(limits.Memory >> 20),
		"memory_bytes": itoa(limits.Memory), "cpus": itoa(int64(math.Ceil(limits.CPUs)))}
}

// ToolchainCacheStatus says, for each installed language of
// PrewarmLanguages with a toolchain cache, whether its cache is ready on
// this host (its directory), being prepared by this process, or not
// prepared yet (the first compile waits for it): for doctor.
func (x *Executor) ToolchainCacheStatus() []CacheState {
	inProcess := map[string]CacheState{}
	for _, st := range x.CacheStates() {
		inProcess[st.Language] = st
	}
	var out []CacheState
	for _, name := range PrewarmLanguages {
		lang, tc, err := x.reg.Resolve(name, "")
		if err != nil || lang.Cache == nil {
			continue
		}
		vars := x.cacheVars(lang, tc)
		dir := filepath.Join(x.toolchainCacheDir, toolchainCacheKey(lang, tc, expandAll(lang.Cache.Prepare, vars), environment(lang, tc, vars, nil)))
		st := CacheState{Language: lang.Name, State: "not prepared", Dir: dir}
		if _, err := os.Stat(filepath.Join(dir, ".complete")); err == nil {
			st.State = "ready"
		} else if p, ok := inProcess[lang.Name]; ok {
			st = p
		}
		out = append(out, st)
	}
	return out
}

// fullCacheReady says whether lang's (full) toolchain cache is ready: known
// so in this process, or complete on the host.
func (x *Executor) fullCacheReady(lang *Language, tc *Toolchain, vars map[string]string) bool {
	key := toolchainCacheKey(lang, tc, expandAll(lang.Cache.Prepare, vars), environment(lang, tc, vars, nil))
	x.caches.mu.Lock()
	ce, ok := x.caches.done[key]
	x.caches.mu.Unlock()
	if ok {
		select {
		case <-ce.ready:
			if ce.err == nil {
				return true
			}
		default:
		}
	}
	_, err := os.Stat(filepath.Join(x.toolchainCacheDir, key, ".complete"))
	return err == nil
}
