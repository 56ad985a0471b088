// Package executor turns "language + code + files" into sandboxed runs: it
// owns the language table (languages.yaml), toolchain discovery, the
// compile → run pipeline, input and output files, and sessions.
//
// It knows nothing of HTTP; pkg/api and the CLI translate to and from its
// Request and Result.
package executor

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/egress"
	"github.com/sandbox-run/sandbox-run/pkg/images"
	"github.com/sandbox-run/sandbox-run/pkg/images/layer"
	"github.com/sandbox-run/sandbox-run/pkg/intercept/carry"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
	"github.com/sandbox-run/sandbox-run/pkg/sessions"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// Request is one execution.
type Request struct {
	Language string
	Version  string // optional; must match the toolchain's version prefix
	Code     []byte
	Stdin    io.Reader
	Files    []sandbox.File
	Args     []string
	Env      map[string]string

	// Limits: zero values take the language's and then the global default.
	Limits        Limits
	CompileLimits Limits

	// OutputFiles selects the files returned (patterns relative to /work);
	// empty returns every file the program created or changed.
	OutputFiles []string
	// SessionID keeps /work between executions with the same id.
	SessionID string
	// Interpreter runs the code as a cell of the session's interpreter
	// (kernel.go): state persists from cell to cell; the Result has the
	// cell's value and display outputs.
	Interpreter bool

	// TestCases, when set, run the program once per case (after one
	// compile) instead of once with Stdin and Args; Compare ("exact",
	// "lines" or "float", default "lines") and FloatTolerance judge the
	// outputs.
	TestCases      []TestCase
	Compare        string
	FloatTolerance float64

	// Progress, if set, hears in lines of text what the request waits for
	// before its program runs (a toolchain cache being prepared), every
	// few seconds.
	Progress io.Writer
	// Stdout and Stderr receive the program's output live; CompileOutput
	// receives the compiler's.
	Stdout, Stderr io.Writer
	CompileOutput  io.Writer

	// Entrypoint, when set, loads the code as a module and calls a class's
	// method or a function instead of running it as a script (python and
	// javascript); Result.ReturnValue or Result.Exception tell how it went.
	Entrypoint *Entrypoint
	// MaxResponseBytes is the response budget: the JSON form of the
	// result's outputs (stdout, stderr, the compile step's output, every
	// test case's, output files) takes at most this many bytes together;
	// what does not fit is cut and flagged (Result.ResponseTruncated). Zero
	// takes Config.MaxResponseBytes.
	MaxResponseBytes int64
	// budget is what the request's runs draw their output from.
	budget *sandbox.Budget

	// AutoTimeout sets the wall-time limit from the durations of recent
	// successful runs of the same tenant, language and entry point (see
	// AutoTimeoutFactor) when Limits.WallTime is zero.
	AutoTimeout bool

	// Trace, when set, is filled in with what the executor decided (the
	// toolchain, limits and mounts of each step), for a person to read.
	Trace *Trace

	// Image, when set, is an OCI image reference (pkg/images.ParseRef)
	// whose root filesystem the run uses instead of the host's, with the
	// language's toolchain found inside it. It is pulled into
	// Config.Images when the store does not have it. "" runs on the host's
	// toolchains (or the image of the language's entry, Language.Image).
	Image string

	// picked is what Prepare found, for Execute.
	picked *picked

	// Network, when set, is the run's allow-list (pkg/egress entries, the
	// server's maximum already applied): the run gets a network device
	// whose traffic reaches only what it allows (Result.Network says what
	// it tried). Empty: no network but the sandbox's own loopback.
	Network []string
	// NetworkBudgets bound the bytes the run may move with what an entry
	// of Network allows, by the entry as written (egress.Config.Budgets).
	NetworkBudgets map[string]int64
	// Secrets are secrets the run uses without seeing them (a network is
	// needed): placeholders in its environment, the values put in their
	// place by its egress, which carries its HTTP and HTTPS requests
	// (Result.Network.Requests lists them).
	Secrets []Secret

	// Isolation is the wall the run is behind: "" or IsolationNative
	// (the engine), IsolationGVisor (Config.GVisor: gVisor's kernel as
	// well, for the run step; its compile step is the engine's).
	Isolation string

	// Tenant is who the run is for (the API key's id; "" for a keyless
	// server and the CLI). Tenants never see each other's compile cache
	// entries (unless Config.SharedCompileCache) nor shape each other's
	// automatic timeouts.
	Tenant string
}

// Limits a request may set.
type Limits struct {
	WallTime    time.Duration
	CPUTime     time.Duration
	MemoryBytes int64
	Processes   int
	OutputBytes int64
	FileSize    int64
}

// Config sets up an Executor.
type Config struct {
	// Languages is a user languages.yaml that replaces or adds entries.
	Languages string
	// DataDir holds sessions and the data dir's caches (default /var/lib/sandbox-run).
	DataDir string
	// CacheDir holds the data dir's caches (default DataDir/cache).
	CacheDir string
	// ToolchainCacheDir holds prepared toolchain caches (Go's build cache),
	// shared by every data dir that uses it (each cache is keyed by
	// everything that makes its content). Default: DefaultToolchainCacheDir
	// when run by root, else CacheDir/toolchains.
	ToolchainCacheDir string
	// Defaults are the run limits for what neither a request nor its
	// language sets (zero fields: the sandbox's defaults); CompileDefaults
	// the same for compile steps.
	Defaults, CompileDefaults Limits
	// Engine runs the sandboxes (default sandbox.Default()).
	Engine *sandbox.Engine
	// NoEngine builds an executor that runs nothing (a cluster's API
	// node): its languages and checks only; Execute fails.
	NoEngine bool
	// CompileCacheDir holds the compile cache (default
	// CacheDir/compile-cache); CompileCacheBytes caps its size (0: the
	// default DefaultCompileCacheBytes; negative: no compile cache).
	CompileCacheDir   string
	CompileCacheBytes int64
	// SharedCompileCache lets every tenant use every other tenant's
	// compile cache entries and identical compiles in flight. Without it
	// (the default) the tenant is part of the cache key: a cache hit, or
	// its speed, would otherwise tell one tenant what another compiled.
	SharedCompileCache bool
	// MaxWallTime caps automatic timeouts (Request.AutoTimeout); zero: the
	// default timeout caps them.
	MaxWallTime time.Duration
	// MaxResponseBytes is the response budget of requests that set none
	// (Request.MaxResponseBytes); zero: DefaultMaxResponseBytes.
	MaxResponseBytes int64
	// CacheProgress, if set, hears when a toolchain cache (Go's build
	// cache: ~70 s of CPU and ~170 MB) starts being filled and when it is done:
	// the slow first compile on a host. It is called at most twice per
	// cache and process, from the goroutine that fills it.
	CacheProgress func(CacheEvent)
	// Images is the store of the OCI images runs may use (Request.Image,
	// Language.Image); nil opens DataDir/images when the first run asks
	// for an image, reaching registries through ImageRegistry (nil: only
	// local sources; pkg/images/registry.Fetch, which the executor does
	// not link: it knows nothing of HTTP). ImageCaps and UnpackLimits bound what a pull fetches
	// and what an image's layers unpack to in all.
	Images        *images.Store
	ImageRegistry images.Fetcher
	ImageCaps     images.Caps
	UnpackLimits  layer.Limits
	// Network bounds runs with network access (Request.Network).
	Network NetworkConfig
	// GVisor runs the runs that ask for gVisor (Request.Isolation); nil:
	// they are refused, saying GVisorErr.
	GVisor    Isolator
	GVisorErr error
	// Intercept makes what carries the connections of a run or live
	// sandbox with secrets (pkg/intercept's New: an HTTP and HTTPS proxy,
	// which the executor does not link); nil: secrets are refused.
	Intercept func(carry.Config) carry.Carrier
}

// The isolation backends (Request.Isolation).
const (
	IsolationNative = "native"
	IsolationGVisor = "gvisor"
)

// Isolator runs a sandbox spec and returns its result, as the engine does
// (sandbox.Engine.Run), behind its own wall: pkg/gvisor's Runner.
type Isolator interface {
	Run(ctx context.Context, spec *sandbox.Spec) (*sandbox.Result, error)
}

// CacheEvent is one step of filling a toolchain cache.
type CacheEvent struct {
	Language string // the language's name ("go")
	Dir      string // the cache's host directory
	Done     bool   // false when filling starts, true when it ended
	Err      error  // why it failed (Done only)
	Elapsed  time.Duration
}

// Executor runs executions. It is safe for concurrent use.
type Executor struct {
	reg               *Registry
	engine            *sandbox.Engine
	dataDir           string
	cacheDir          string
	toolchainCacheDir string
	defaults          Limits
	compileDefaults   Limits
	caches            cacheSet
	compileCache      *compileCache // nil when disabled
	sharedCache       bool          // compile cache entries shared by all tenants
	compileRuns       atomic.Int64  // compile sandboxes started (for tests)
	runnerDir         string        // the entry point runners, mounted at RunnerTarget
	runnerErr         error         // why they could not be installed
	durations         durationStats // recent successful runs, for AutoTimeout
	maxWallTime       time.Duration
	maxResponse       int64
	cacheProgress     func(CacheEvent)
	preparingCaches   atomic.Int32 // PrepareCaches at work (in the background)
	imageStore        lazyStore
	imageCaps         images.Caps
	unpackLimits      layer.Limits
	imageTCs          imageToolchains
	kernels           kernels
	net               NetworkConfig
	// intercept makes what carries the connections of runs with secrets
	// (Config.Intercept).
	intercept func(carry.Config) carry.Carrier
	// roots are the certificates HTTPS servers are verified against for
	// runs with secrets (upstreamRoots), read once.
	rootsOnce  sync.Once
	roots      *x509.CertPool
	rootsErr   error
	gvisor     Isolator
	gvisorErr  error
	resolvOnce sync.Once // the sandboxes' resolv.conf, written once
	resolvPath string
	resolvErr  error
}

// New builds an Executor. It fails when the host cannot sandbox.
func New(cfg Config) (*Executor, error) {
	reg, err := NewRegistry(cfg.Languages)
	if err != nil {
		return nil, err
	}
	if cfg.DataDir == "" {
		cfg.DataDir = DefaultDataDir
	}
	e := cfg.Engine
	if e == nil && !cfg.NoEngine {
		if e, err = sandbox.Default(); err != nil {
			return nil, err
		}
	}
	if cfg.CacheDir == "" {
		cfg.CacheDir = filepath.Join(cfg.DataDir, "cache")
	}
	if cfg.CompileCacheDir == "" {
		cfg.CompileCacheDir = filepath.Join(cfg.CacheDir, "compile-cache")
	}
	x := &Executor{reg: reg, engine: e, dataDir: cfg.DataDir, cacheDir: cfg.CacheDir, toolchainCacheDir: toolchainCacheDir(cfg.ToolchainCacheDir, cfg.CacheDir),
		defaults: cfg.Defaults, compileDefaults: cfg.CompileDefaults,
		compileCache: newCompileCache(cfg.CompileCacheDir, cfg.CompileCacheBytes),
		sharedCache:  cfg.SharedCompileCache,
		maxWallTime:  cfg.MaxWallTime, maxResponse: cmp.Or(max(cfg.MaxResponseBytes, 0), DefaultMaxResponseBytes),
		cacheProgress: cfg.CacheProgress,
		imageStore:    lazyStore{store: cfg.Images, dir: filepath.Join(cfg.DataDir, "images"), fetch: cfg.ImageRegistry}, imageCaps: cfg.ImageCaps, unpackLimits: cfg.UnpackLimits,
		net: cfg.Network, gvisor: cfg.GVisor, gvisorErr: cfg.GVisorErr, intercept: cfg.Intercept}
	// The entry point runners are part of every sandbox's read-only image;
	// without them only entry point requests fail (error_setup).
	x.runnerDir, x.runnerErr = installRunners(cfg.CacheDir)
	return x, nil
}

// Close lets go of what the executor keeps besides its engine (gVisor's
// sandboxes booted ahead); the engine is its owner's to close.
func (x *Executor) Close() error {
	if c, ok := x.gvisor.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// ErrNoEngine is Execute on an executor built with NoEngine.
var ErrNoEngine = errors.New("this node runs no sandboxes")

// DefaultDataDir is where sessions and caches live unless configured.
const DefaultDataDir = "/var/lib/sandbox-run"

// Registry returns the executor's languages.
func (x *Executor) Registry() *Registry { return x.reg }

// UnsupportedLanguageError names a language that is not known or not here.
type UnsupportedLanguageError struct {
	Language string
	Known    []string
	Reason   string
}

func (e *UnsupportedLanguageError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("language %.64q is not available: %s", e.Language, e.Reason)
	}
	name := e.Language
	if len(name) > 64 {
		name = name[:64] + "..."
	}
	return fmt.Sprintf("Unsupported language: '%s' (supported: %s)", name, strings.Join(e.Known, ", "))
}

// InvalidRequestError is a request the executor refuses before running.
type InvalidRequestError = wire.InvalidError

func invalid(format string, a ...any) error {
	return &InvalidRequestError{Msg: fmt.Sprintf(format, a...)}
}

// Input bounds.
const (
	MaxFiles        = 1000
	MaxFileBytes    = wire.MaxFileBytes
	MaxTotalBytes   = wire.MaxTotalBytes
	MaxArgs         = 256
	MaxArgBytes     = 64 << 10
	maxSessionBytes = wire.MaxSessionBytes
)

// Execute runs one request: compile (for compiled languages) in its own
// sandbox, then run in a fresh one. A returned error means the request was
// invalid (InvalidRequestError, UnsupportedLanguageError, ImageError);
// everything that happened in a sandbox, including set-up failures (an
// image that could not be pulled or unpacked among them), is in the Result.
func (x *Executor) Execute(ctx context.Context, req *Request) (*Result, error) {
	if x.engine == nil {
		return nil, ErrNoEngine
	}
	r := *req
	if r.MaxResponseBytes <= 0 {
		r.MaxResponseBytes = x.maxResponse
	}
	r.budget = sandbox.NewBudget(r.MaxResponseBytes)
	res, err := x.execute(ctx, &r)
	if res != nil {
		cut := wire.FitBudget(res, r.MaxResponseBytes)
		res.ResponseTruncated = cut || r.budget.Exceeded()
	}
	return res, err
}

func (x *Executor) execute(ctx context.Context, req *Request) (*Result, error) {
	if err := x.validateImage(req); err != nil {
		return nil, err
	}
	if err := validateRequest(req); err != nil {
		return nil, err
	}
	if err := validateBatch(req); err != nil {
		return nil, err
	}
	// Its image, if any, is held until the run ends: never evicted meanwhile.
	pick := x.hold(ctx, req)
	defer pick.done()
	lang, tc, err := pick.lang, pick.tc, pick.err
	var imgErr *ImageError
	var unsupported *UnsupportedLanguageError
	switch {
	case errors.As(err, &imgErr), errors.As(err, &unsupported):
		return nil, err
	case err != nil && pick.ref == "":
		return nil, err
	case err != nil:
		// The image exists but could not be had: a registry out of reach,
		// a layer refused while unpacking, a full disk.
		canonical, _ := images.ParseRef(pick.ref) // valid: resolveImage checked it
		return &Result{ExecutionID: newID(), Language: req.Language, Image: canonical.String(), OutputFiles: OutputFiles{},
			Outcome: Outcome{Status: StatusSetupError, ExitCode: -1, Stderr: err.Error()}, Error: err.Error()}, nil
	}
	if err := validateEntrypoint(req, lang); err != nil {
		return nil, err
	}
	if err := x.validateIsolation(req); err != nil {
		return nil, err
	}
	res := &Result{ExecutionID: newID(), Language: lang.Name, Version: tc.Version, OutputFiles: OutputFiles{},
		Image: tc.ImageRef, ImageDigest: tc.ImageDigest}
	if req.Isolation == IsolationGVisor {
		res.Isolation = IsolationGVisor
	}
	if req.Interpreter {
		if req.SessionID == "" {
			return nil, invalid("a cell needs its interpreter session (session_id)")
		}
		return x.runCell(ctx, req, lang, tc, res)
	}
	durationKey := entryKey(lang.Name, req.Entrypoint)
	if req.AutoTimeout && req.Limits.WallTime == 0 {
		if t := x.durations.autoTimeout(req.Tenant, durationKey, x.autoCeiling(lang)); t > 0 {
			auto := *req
			auto.Limits.WallTime = t
			req = &auto
		}
		res.AutoTimeoutSeconds = math.Round(x.limits(req.Limits, lang.Limits, x.defaults).WallTime.Seconds()*1000) / 1000
	}
	mainName := lang.mainName(req.Code)
	vars := map[string]string{"bin": tc.Bin, "home": tc.Home, "main": mainName}
	source := expand(lang.Source, vars)
	vars["source"] = source

	var session []sandbox.File
	if req.SessionID != "" {
		unlock := lockSession(req.SessionID)
		defer unlock()
		if session, err = x.loadSession(req.SessionID); err != nil {
			return nil, err
		}
	}
	inputs := mergeFiles(session, req.Files, []sandbox.File{{Path: source, Data: req.Code, Mode: 0o644}})
	if err := checkTree(inputs); err != nil {
		return nil, err
	}

	tr := req.Trace
	if tr == nil {
		tr = new(Trace)
	}
	*tr = Trace{Toolchain: tc.Bin, Home: tc.Home, Source: source, Inputs: len(inputs)}
	runFiles := inputs
	// The program's own files (its source, the compiler's artefacts) come
	// back only when a pattern names them exactly.
	own := []string{source}
	if lang.Compiled() {
		artifacts, step, ok := x.compile(ctx, lang, tc, req, vars, inputs, tr)
		res.Compile = step
		// The compiler's output (captured once, maybe for another request
		// or from the cache) counts in this request's budget.
		req.budget.Take(int64(len(step.Stdout) + len(step.Stderr)))
		if !ok {
			res.Status = StatusCompileError
			if step.Status == StatusSetupError {
				res.Status, res.Error = StatusSetupError, step.Stderr
			}
			return res, nil
		}
		runFiles = mergeFiles(inputs, artifacts)
		for _, a := range artifacts {
			own = append(own, a.Path)
		}
	}
	if len(req.TestCases) > 0 {
		return x.runBatch(ctx, lang, tc, req, vars, runFiles, res)
	}

	limits := x.runLimits(req, lang, vars)
	spec := &sandbox.Spec{
		Args:   append(expandAll(lang.Run, vars), req.Args...),
		Env:    environment(lang, tc, vars, req.Env),
		Stdin:  req.Stdin,
		Stdout: req.Stdout,
		Stderr: req.Stderr,
		Mounts: x.mounts(tc),
		Root:   tc.Root,
		Files:  runFiles,
		Limits: limits,
		Budget: req.budget,
		Tenant: req.Tenant,
	}
	tr.RunLimits, tr.Mounts = limits, spec.Mounts
	if len(req.OutputFiles) > 0 {
		spec.Collect.Patterns = req.OutputFiles
	} else {
		spec.Collect.All = true
	}
	if req.SessionID != "" {
		// Every file is kept in the session, whatever the budget: the
		// response then skips what does not fit (FitBudget).
		spec.Collect.All = true
		spec.Collect.MaxTotalBytes = maxSessionBytes
		spec.Budget = nil
	}
	if req.Entrypoint != nil {
		if err := x.entrySpec(spec, lang, tc, source, req); err != nil {
			res.Status, res.ExitCode, res.Error = StatusSetupError, -1, err.Error()
			return res, nil
		}
	}
	if len(req.Network) > 0 {
		var proxy carry.Carrier
		if len(req.Secrets) > 0 {
			var done func()
			if proxy, _, done, err = x.useSecrets(spec, req.Secrets, limits.WallTime); err != nil {
				return nil, err
			}
			defer done()
		}
		report, err := x.network(ctx, spec, req.Network, req.NetworkBudgets, proxy)
		if err != nil {
			return nil, err
		}
		defer func() { res.Network = report() }()
	}
	out, err := x.isolator(req).Run(ctx, spec)
	if errors.Is(err, sandbox.ErrBusy) {
		return nil, err // too many runs at once: the caller may retry
	}
	if err != nil {
		res.Status, res.Error = StatusSetupError, err.Error()
		return res, nil
	}
	res.Outcome = outcomeOf(out)
	res.StdoutTruncated, res.StderrTruncated = out.StdoutTruncated, out.StderrTruncated
	if req.Entrypoint != nil {
		dropCallFile(out)
		applyOutcome(res, out)
	}
	if res.Status == StatusCompleted {
		x.durations.record(req.Tenant, durationKey, out.WallTime)
	}
	if req.SessionID != "" {
		if err := x.saveSession(req.SessionID, out.Files); err != nil {
			res.Error = "session not saved: " + err.Error()
		}
	}
	res.OutputFiles, res.SkippedFiles = selectOutputs(out, runFiles, req.OutputFiles, own)
	return res, nil
}

// resolve finds the language and its toolchain.
func (x *Executor) resolve(name, version string) (*Language, *Toolchain, error) {
	return x.reg.Resolve(name, version)
}

// Validate checks a request as Execute would before running it, so that a
// request queued for later is refused now.
func (x *Executor) Validate(req *Request) error {
	if err := x.validateImage(req); err != nil {
		return err
	}
	var lang *Language
	if req.Image != "" {
		// The toolchain is looked for in the image when the run starts.
		entries := x.reg.Entries(req.Language)
		if len(entries) == 0 {
			return &UnsupportedLanguageError{Language: req.Language, Known: x.reg.Names()}
		}
		lang = preferred(entries)
	} else {
		l, _, err := x.resolve(req.Language, req.Version)
		if err != nil {
			return err
		}
		lang = l
	}
	if err := validateRequest(req); err != nil {
		return err
	}
	if err := x.validateIsolation(req); err != nil {
		return err
	}
	if err := validateBatch(req); err != nil {
		return err
	}
	return validateEntrypoint(req, lang)
}

// validateIsolation refuses a run its isolation cannot have: gVisor on a
// host without it.
func (x *Executor) validateIsolation(req *Request) error {
	switch req.Isolation {
	case "", IsolationNative:
		return nil
	case IsolationGVisor:
	default:
		return invalid("isolation %q: use %q or %q", req.Isolation, IsolationNative, IsolationGVisor)
	}
	switch {
	case x.gvisor == nil:
		why := "runsc is not installed (scripts/install-gvisor.sh builds it)"
		if x.gvisorErr != nil {
			why = x.gvisorErr.Error()
		}
		return invalid("isolation gvisor: this server cannot run gVisor: %s", why)
	}
	return nil
}

// isolator is what runs req's run steps.
func (x *Executor) isolator(req *Request) Isolator {
	if req.Isolation == IsolationGVisor && x.gvisor != nil {
		return x.gvisor
	}
	return x.engine
}

func validateRequest(req *Request) error {
	if err := checkSecrets(req); err != nil {
		return err
	}
	if len(req.Network) > 0 {
		if len(req.TestCases) > 0 {
			return invalid("network is not available with test_cases: give each case its own request")
		}
		if _, err := egress.ParsePolicy(req.Network); err != nil {
			return invalid("network.allow: %v", err)
		}
	}
	if err := checkBudgets(req.Network, req.NetworkBudgets); err != nil {
		return err
	}
	if len(req.Files) > MaxFiles {
		return invalid("too many files: %d (at most %d)", len(req.Files), MaxFiles)
	}
	total := int64(len(req.Code))
	for _, f := range req.Files {
		if _, err := sandbox.ValidatePath(f.Path); err != nil {
			return invalid("invalid file name: %v", err)
		}
		if len(f.Data) > MaxFileBytes {
			return invalid("file %s is %d bytes (at most %d)", f.Path, len(f.Data), MaxFileBytes)
		}
		total += int64(len(f.Data))
	}
	if total > MaxTotalBytes {
		return invalid("code and files total %d bytes (at most %d)", total, MaxTotalBytes)
	}
	if len(req.Args) > MaxArgs {
		return invalid("too many arguments: %d (at most %d)", len(req.Args), MaxArgs)
	}
	n := 0
	for _, a := range req.Args {
		n += len(a)
		if strings.ContainsRune(a, 0) {
			return invalid("argument contains a NUL byte")
		}
	}
	if n > MaxArgBytes {
		return invalid("arguments total %d bytes (at most %d)", n, MaxArgBytes)
	}
	for k, v := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return invalid("invalid environment variable %q", k)
		}
	}
	for _, p := range req.OutputFiles {
		if err := sandbox.ValidatePattern(p); err != nil || strings.Contains(p, "..") {
			return invalid("invalid output file pattern %q", p)
		}
	}
	if req.SessionID != "" && !validSessionID(req.SessionID) {
		return invalid("invalid session id %q: use 1-64 letters, digits, '-', '_' or '.'", req.SessionID)
	}
	l := req.Limits
	if l.WallTime < 0 || l.CPUTime < 0 || l.MemoryBytes < 0 || l.Processes < 0 || l.OutputBytes < 0 || l.FileSize < 0 {
		return invalid("limits must not be negative")
	}
	return nil
}

// limits merges request limits over language overrides over defaults.
// limits layers a step's limits: the request's, then the language's, then
// (for runs, not compiles) the executor's defaults, then the sandbox's. CPU
// time not set anywhere follows the wall-clock limit.
func (x *Executor) limits(req Limits, lang LimitOverrides, defaults Limits) sandbox.Limits {
	pick := func(vals ...int64) int64 {
		for _, v := range vals {
			if v > 0 {
				return v
			}
		}
		return 0
	}
	wall := pick(int64(req.WallTime), int64(lang.WallSeconds*float64(time.Second)), int64(defaults.WallTime))
	l := sandbox.Limits{
		WallTime:    time.Duration(wall),
		CPUTime:     time.Duration(pick(int64(req.CPUTime), int64(lang.CPUSeconds*float64(time.Second)), int64(defaults.CPUTime), wall)),
		Memory:      pick(req.MemoryBytes, lang.MemoryMB<<20, defaults.MemoryBytes),
		Processes:   int(pick(int64(req.Processes), int64(lang.Processes), int64(defaults.Processes))),
		OutputBytes: pick(req.OutputBytes, defaults.OutputBytes),
		FileSize:    pick(req.FileSize, defaults.FileSize),
		CPUs:        lang.CPUs,
		TmpSize:     lang.TmpMB << 20,
	}
	return l.WithDefaults()
}

// runLimits are the limits of the run step, which also become the
// variables {memory_mb}, {memory_bytes}, {processes} and {cpus} of the run
// command and the language's environment.
func (x *Executor) runLimits(req *Request, lang *Language, vars map[string]string) sandbox.Limits {
	limits := x.limits(req.Limits, lang.Limits, x.defaults)
	vars["memory_mb"] = itoa(limits.Memory >> 20)
	vars["memory_bytes"] = itoa(limits.Memory)
	vars["processes"] = itoa(int64(limits.Processes))
	vars["cpus"] = itoa(int64(math.Ceil(limits.CPUs)))
	return limits
}

func (x *Executor) mounts(tc *Toolchain) []sandbox.Mount {
	var m []sandbox.Mount
	if tc.Root == "" {
		// In an image, the image has its own.
		m = append(m, sandbox.SystemMounts...)
	}
	if x.runnerDir != "" {
		// The entry point runners: mounted for every run, so that script and
		// entry point runs share prepared sandboxes.
		m = append(m, sandbox.Mount{Source: x.runnerDir, Target: RunnerTarget})
	}
	for _, p := range tc.Mounts {
		m = append(m, sandbox.Mount{Source: p.Source, Target: p.Target})
	}
	return m
}

// environment is the program's whole environment: a fixed base, the
// image's (in an image; but for HOME, USER and TMPDIR, which are the
// sandbox's), the language's, then the request's.
func environment(lang *Language, tc *Toolchain, vars map[string]string, extra map[string]string) []string {
	env := map[string]string{
		"PATH":   "/usr/local/bin:/usr/bin:/bin",
		"HOME":   "/tmp",
		"LANG":   "C.UTF-8",
		"USER":   "sandbox",
		"TMPDIR": "/tmp",
	}
	for _, kv := range tc.ImageEnv {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" && k != "HOME" && k != "USER" && k != "TMPDIR" {
			env[k] = v
		}
	}
	if tc.Home != "" && strings.HasPrefix(tc.Bin, tc.Home) && tc.Root == "" {
		env["PATH"] = path.Dir(tc.Bin) + ":" + env["PATH"]
	}
	for k, v := range lang.Env {
		env[k] = expand(v, vars)
	}
	for k, v := range extra {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// compile runs the compile step and returns the artefacts for the run.
func (x *Executor) compile(ctx context.Context, lang *Language, tc *Toolchain, req *Request, vars map[string]string, inputs []sandbox.File, tr *Trace) ([]sandbox.File, *StepResult, bool) {
	limits := x.limits(req.CompileLimits, lang.CompileLimits, x.compileDefaults)
	tr.CompileLimits = &limits
	vars["memory_mb"] = itoa(limits.Memory >> 20)
	vars["memory_bytes"] = itoa(limits.Memory)
	vars["cpus"] = itoa(int64(math.Ceil(limits.CPUs)))
	mounts := x.mounts(tc)
	if lang.Cache != nil {
		// A cache being prepared is waited for; one that could not be is
		// done without: a request never fails because of it.
		// While a server prepares the caches (at its start), a compile
		// whose language has a quick cache waits for that one rather than
		// the whole (Go: ~10 s for the common packages against a minute
		// for all of std); once the whole is ready, compiles use it.
		quick := lang.Cache.Quick != nil && x.preparingCaches.Load() > 0 && !x.fullCacheReady(lang, tc, vars)
		dir, err := x.prepareCache(ctx, lang, tc, vars, quick, false, "", req.Progress)
		if ctx.Err() != nil {
			return nil, &StepResult{Outcome: Outcome{Status: StatusSetupError, Stderr: "canceled while " + CacheName(lang.Name) + " was being prepared", ExitCode: -1}}, false
		}
		if err != nil {
			if req.Progress != nil {
				fmt.Fprintf(req.Progress, "%v: compiling without it (slower)\n", err)
			}
			if dir, err = x.emptyCacheDir(); err != nil {
				return nil, &StepResult{Outcome: Outcome{Status: StatusSetupError, Stderr: "toolchain cache: " + err.Error(), ExitCode: -1}}, false
			}
		} else {
			tr.CompileCacheDir = dir
		}
		mounts = append(mounts, sandbox.Mount{Source: dir, Target: lang.Cache.Dir, Overlay: true})
	}
	spec := &sandbox.Spec{
		Args:    expandAll(lang.Compile, vars),
		Env:     environment(lang, tc, vars, nil),
		Mounts:  mounts,
		Root:    tc.Root,
		Files:   inputs,
		Limits:  limits,
		Collect: sandbox.Collect{Patterns: expandAll(lang.Artifacts, vars), MaxFileBytes: maxCompileArtifactBytes, MaxTotalBytes: maxCompileArtifactTotal},
		Tenant:  req.Tenant,
	}
	run := func() (*compiled, bool) { return x.runCompile(ctx, x.isolator(req), spec, req.CompileOutput) }
	var rec *compiled
	hit := false
	if x.compileCache == nil {
		rec, _ = run()
	} else {
		key := compileKey(lang, tc, spec, req.Tenant, x.sharedCache)
		rec, hit = x.compileCache.cachedCompile(ctx, key, req.CompileOutput, run)
	}
	step := rec.step(hit)
	if step.Status != StatusCompleted {
		return nil, step, false
	}
	return rec.files(), step, true
}

// runCompile runs a compile sandbox on iso (the run's wall: the engine or
// gVisor), its output live to w. It reports whether the outcome is the
// compiler's own, to be shared with identical requests (whatever their
// wall: the artefacts are the same): not when the run was canceled or
// could not be set up.
func (x *Executor) runCompile(ctx context.Context, iso Isolator, spec *sandbox.Spec, w io.Writer) (*compiled, bool) {
	x.compileRuns.Add(1)
	sp := *spec
	if w != nil {
		sp.Stdout, sp.Stderr = w, w
	}
	out, err := iso.Run(ctx, &sp)
	if err != nil {
		return &compiled{Outcome: Outcome{Status: StatusSetupError, ExitCode: -1}, Stderr: []byte(err.Error())}, false
	}
	o := outcomeOf(out)
	o.Stdout, o.StdoutEncoding, o.Stderr, o.StderrEncoding = "", "", "", ""
	o.Status = compileStatus(o.Status)
	rec := &compiled{Outcome: o, Stdout: out.Stdout, Stderr: out.Stderr}
	if o.Status == StatusCompleted {
		if len(out.Files) == 0 {
			rec.Outcome.Status = StatusCompileError
			rec.Stderr = append(append([]byte(nil), out.Stderr...), "\nsandbox-run: the compiler produced no artifacts"...)
		}
		for _, f := range out.Files {
			rec.Files = append(rec.Files, cachedFile{Path: f.Path, Mode: uint32(f.Mode), Data: f.Data})
		}
	}
	return rec, out.Limit != sandbox.LimitCanceled && ctx.Err() == nil
}

// compileStatus is a compile step's own status for what statusOf says of
// its sandbox: a compiler that failed (non-zero exit, a signal, a limit
// other than time, a cancellation) is error_compile, never error_runtime;
// a compile timeout stays timeout.
func compileStatus(s Status) Status {
	if s == StatusRuntimeError {
		return StatusCompileError
	}
	return s
}

func statusOf(out *sandbox.Result) Status {
	switch {
	case out.Limit == sandbox.LimitWallTime || out.Limit == sandbox.LimitCPUTime:
		return StatusTimeout
	case out.ExitCode == 0 && out.Limit == sandbox.LimitNone:
		return StatusCompleted
	}
	return StatusRuntimeError
}

func outcomeOf(out *sandbox.Result) Outcome {
	o := Outcome{Status: statusOf(out), ExitCode: out.ExitCode, Signal: out.Signal, LimitReason: string(out.Limit),
		DurationMs: ms(out.WallTime), CPUTimeMs: ms(out.CPUTime), MemoryUsedMB: mb(out.PeakMemory)}
	o.Stdout, o.StdoutEncoding = wire.EncodeOutput(out.Stdout)
	o.Stderr, o.StderrEncoding = wire.EncodeOutput(out.Stderr)
	return o
}

// selectOutputs returns the files the request's patterns match
// (sandbox.MatchPattern: "**" spans directories), or else every file the
// program created or changed: inputs are never echoed back unchanged. The
// program's own files (own: its source and the compiler's artefacts) come
// back only when a pattern names one exactly, never through a wildcard.
func selectOutputs(out *sandbox.Result, inputs []sandbox.File, patterns []string, own []string) (OutputFiles, []Skipped) {
	given := make(map[string][]byte, len(inputs))
	for _, f := range inputs {
		given[path.Clean(f.Path)] = f.Data
	}
	named := map[string]bool{}
	for _, pat := range patterns {
		named[path.Clean(pat)] = true
	}
	isOwn := map[string]bool{}
	for _, p := range own {
		isOwn[path.Clean(p)] = true
	}
	matched := map[string]bool{}
	wanted := func(p string) bool {
		if len(patterns) == 0 {
			return true
		}
		ok := false
		for _, pat := range patterns {
			if sandbox.MatchPattern(pat, p) {
				matched[pat], ok = true, true
			}
		}
		return ok
	}
	files := OutputFiles{}
	for _, f := range out.Files {
		if !wanted(f.Path) {
			continue
		}
		if len(patterns) > 0 && isOwn[f.Path] && !named[f.Path] {
			continue
		}
		if old, ok := given[f.Path]; ok && len(patterns) == 0 && bytes.Equal(old, f.Data) {
			continue
		}
		files[f.Path] = FileData(f.Data)
	}
	var skipped []Skipped
	for _, s := range out.SkippedFiles {
		if s.Reason != "not found" && wanted(s.Path) {
			skipped = append(skipped, Skipped{Path: s.Path, Reason: s.Reason})
		}
	}
	for _, pat := range patterns {
		if !matched[pat] && !strings.ContainsAny(pat, "*?[") {
			skipped = append(skipped, Skipped{Path: pat, Reason: "not found"})
		}
	}
	return files, skipped
}

// checkTree refuses file lists where one path is a directory of another.
func checkTree(files []sandbox.File) error {
	paths := make(map[string]bool, len(files))
	for _, f := range files {
		paths[path.Clean(f.Path)] = true
	}
	for p := range paths {
		for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
			if paths[dir] {
				return invalid("file %s is also used as the directory of %s", dir, p)
			}
		}
	}
	return nil
}

// mergeFiles joins file lists; a later list's file replaces an earlier one
// of the same path.
func mergeFiles(lists ...[]sandbox.File) []sandbox.File {
	idx := map[string]int{}
	var out []sandbox.File
	for _, l := range lists {
		for _, f := range l {
			p := path.Clean(f.Path)
			if i, ok := idx[p]; ok {
				out[i] = f
				continue
			}
			idx[p] = len(out)
			out = append(out, f)
		}
	}
	return out
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e4) / 100 }
func mb(n int64) float64         { return math.Round(float64(n)/(1<<20)*100) / 100 }

func newID() string {
	var b [12]byte
	rand.Read(b[:])
	return "exec_" + hex.EncodeToString(b[:])
}

// ErrNoSession is returned for an unknown session id where one must exist.
var ErrNoSession = sessions.ErrNoSession
