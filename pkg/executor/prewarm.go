package executor

import (
	"context"
	"errors"
	"fmt"

	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// PrewarmLanguages are the languages Prewarm prepares sandboxes for: the
// core eight. Preparing every language of the pack would run some fifty
// version checks (JVMs, Octave) and fill the pool with sandboxes of rarely
// used languages, at every start of the server.
var PrewarmLanguages = []string{"python", "javascript", "go", "rust", "java", "bash", "c", "cpp"}

// Prewarm has the engine build n sandboxes ahead for each of
// PrewarmLanguages' run step (of its default version), and one for its
// compile step when that can be pooled, so that the first requests find
// them ready. Languages whose toolchain is missing are skipped; the errors
// of the others are joined.
func (x *Executor) Prewarm(n int) error {
	if x.engine == nil {
		return nil // it runs nothing
	}
	var errs []error
	// The other versions (pyenv's Pythons, ...) are asked for by number and
	// would hold idle sandboxes for little.
	for _, name := range PrewarmLanguages {
		lang, tc, err := x.reg.Resolve(name, "")
		if err != nil {
			continue
		}
		if lang.Image != "" {
			// An entry's image is prewarmed once it is in the store: never
			// pulled at start.
			if tc = x.storedImageToolchain(lang); tc == nil {
				continue
			}
		}
		vars := map[string]string{"bin": tc.Bin, "home": tc.Home}
		run := &sandbox.Spec{Args: []string{"true"}, Mounts: x.mounts(tc), Root: tc.Root, Limits: x.runLimits(&Request{}, lang, vars)}
		if err := x.engine.Prewarm(run, n); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", lang.Name, err))
		}
		if lang.Compiled() && lang.Cache == nil {
			compile := &sandbox.Spec{Args: []string{"true"}, Mounts: x.mounts(tc), Root: tc.Root, Limits: x.limits(Limits{}, lang.CompileLimits, x.compileDefaults)}
			if err := x.engine.Prewarm(compile, 1); err != nil {
				errs = append(errs, fmt.Errorf("%s compile: %w", lang.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// PrepareCaches fills the toolchain caches (Go's build cache) of
// PrewarmLanguages that have one and are installed, as their first compile
// would: a server calls it in the background at start so that no request
// waits for it; the quick cache first where the language has one, which
// compiles wait for meanwhile instead of the whole. It runs at the
// scheduler's idle priority (Limits.Idle): requests meanwhile get the CPUs
// first (and one that comes to need it takes it out of the idle
// priority). A cache already complete on the host costs a stat.
// Config.CacheProgress hears about each one filled; the errors are joined.
func (x *Executor) PrepareCaches(ctx context.Context) error {
	x.preparingCaches.Add(1)
	defer x.preparingCaches.Add(-1)
	var errs []error
	for _, name := range PrewarmLanguages {
		lang, tc, err := x.reg.Resolve(name, "")
		if err != nil || lang.Cache == nil {
			continue
		}
		vars := x.cacheVars(lang, tc)
		seed := ""
		if lang.Cache.Quick != nil {
			// The quick one first: compiles meanwhile wait for it alone.
			dir, err := x.prepareCache(ctx, lang, tc, vars, true, true, "", nil)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s (quick): %w", lang.Name, err))
			}
			seed = dir
		}
		if _, err := x.prepareCache(ctx, lang, tc, vars, false, true, seed, nil); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", lang.Name, err))
		}
	}
	return errors.Join(errs...)
}

// OnCacheProgress sets Config.CacheProgress on an executor built without
// it (a server's: runner.NewExecutor). Call it before the first execution.
func (x *Executor) OnCacheProgress(fn func(CacheEvent)) { x.cacheProgress = fn }

// Engine is the sandbox engine the executor runs on.
func (x *Executor) Engine() *sandbox.Engine { return x.engine }
