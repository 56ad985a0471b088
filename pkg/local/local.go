// Package local is the run service's backend on this host: pkg/executor
// (languages, compile and run steps, sessions, images) behind the
// runner.Backend interface, speaking the wire types, with its failures
// classified into runner.Error once. Wiring (cmd/, internal/) builds it;
// nothing above the run service links it, so no transport links the
// executor.
package local

import (
	"context"
	"errors"
	"log/slog"
	"sort"

	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/images"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// Executor is what the backend needs of pkg/executor (its *Executor, or a
// test's fake).
type Executor interface {
	Execute(ctx context.Context, req *executor.Request) (*executor.Result, error)
	Registry() *executor.Registry
}

// Backend is x as a runner.Backend. It passes on, where x has them, the
// sessions' side (runner.SessionExecutor), interpreters' ends and image
// preparation.
type Backend struct{ x Executor }

var _ runner.Backend = Backend{}

// New is x as the run service's backend.
func New(x Executor) runner.Backend {
	b := Backend{x}
	if sx, ok := x.(runner.SessionExecutor); ok { // the executor's sessions' side
		return sessionBackend{b, sx}
	}
	return b
}

// Executor is the executor under b.
func (b Backend) Executor() Executor { return b.x }

// Generation counts the refreshes of the executor's toolchains (found again
// when the host changes).
func (b Backend) Generation() int64 {
	if reg := b.x.Registry(); reg != nil {
		return reg.Generation()
	}
	return 0
}

// ToolchainCaches are where the executor's toolchain caches stand (for
// /readyz): those it prepared or is preparing.
func (b Backend) ToolchainCaches() []wire.ToolchainCache {
	x, ok := b.x.(interface{ CacheStates() []executor.CacheState })
	if !ok {
		return nil
	}
	var out []wire.ToolchainCache
	for _, st := range x.CacheStates() {
		out = append(out, wire.ToolchainCache{Language: st.Language, Quick: st.Quick, State: st.State, Error: st.Error, ElapsedSeconds: st.Elapsed.Seconds()})
	}
	return out
}

// Execute runs r on the executor: the request Prepare made, if it did.
func (b Backend) Execute(ctx context.Context, r *runner.Run) (*wire.Result, error) {
	xr, _ := r.Prepared.(*executor.Request)
	if xr == nil {
		xr = Request(r)
	}
	if r.Local != nil {
		r.Local(xr)
	}
	res, err := b.x.Execute(ctx, xr)
	if err != nil {
		return nil, classify(err)
	}
	return res, nil
}

// Prepare maps r onto the executor's request once and has the executor
// find its language and pull its image (or find it in the store) ahead of
// the run; Execute runs that request.
func (b Backend) Prepare(ctx context.Context, r *runner.Run) {
	xr := Request(r)
	if p, ok := b.x.(interface {
		Prepare(context.Context, *executor.Request)
	}); ok {
		p.Prepare(ctx, xr)
	}
	r.Prepared = xr
}

// Validate makes the executor's checks that would otherwise wait for the
// run's start.
func (b Backend) Validate(r *runner.Run) error {
	if v, ok := b.x.(interface{ Validate(*executor.Request) error }); ok {
		if err := v.Validate(Request(r)); err != nil {
			return &runner.Error{Kind: runner.Invalid, Msg: err.Error(), Err: err}
		}
	}
	return nil
}

// EndInterpreter ends a session's interpreter, where the executor keeps
// interpreters.
func (b Backend) EndInterpreter(id string) {
	if x, ok := b.x.(interface{ EndInterpreter(string) }); ok {
		x.EndInterpreter(id)
	}
}

// Languages are the executor's languages, installed or not.
func (b Backend) Languages() []runner.Language {
	reg := b.x.Registry()
	if reg == nil {
		return nil
	}
	var out []runner.Language
	for _, name := range reg.LanguageNames() {
		if l, ok := b.Lookup(name); ok {
			out = append(out, l)
		}
	}
	return out
}

// Lookup finds a language by name or alias.
func (b Backend) Lookup(name string) (runner.Language, bool) {
	reg := b.x.Registry()
	if reg == nil {
		return runner.Language{}, false
	}
	l, ok := reg.Lookup(name)
	if !ok {
		return runner.Language{}, false
	}
	lang := language(reg, l)
	if _, _, err := reg.Resolve(name, ""); err != nil {
		lang.Err = err
	} else {
		lang.Available = true
	}
	return lang, true
}

// Resolve finds the installed version of a language.
func (b Backend) Resolve(name, version string) (runner.Language, runner.Version, error) {
	reg := b.x.Registry()
	if reg == nil {
		return runner.Language{}, runner.Version{}, &runner.Error{Kind: runner.Invalid, Msg: "this executor knows no languages"}
	}
	l, tc, err := reg.Resolve(name, version)
	if err != nil {
		return runner.Language{}, runner.Version{}, &runner.Error{Kind: runner.Invalid, Msg: err.Error(), Err: err}
	}
	lang := language(reg, l)
	lang.Available = true
	return lang, versionOf(l, tc.Version, true), nil
}

// language is entry l of a language, with the language's installed
// versions.
func language(reg *executor.Registry, l *executor.Language) runner.Language {
	out := runner.Language{Name: l.Name, Aliases: nonNil(l.Aliases), Extensions: nonNil(l.Extensions), Source: l.Source,
		Compiled: l.Compiled(), Interpreter: executor.SupportsInterpreter(l.Name)}
	for _, e := range reg.Entries(l.Name) {
		if tc := reg.Toolchain(e); tc.Err == nil {
			out.Versions = append(out.Versions, versionOf(e, tc.Version, e == l))
		}
	}
	return out
}

func versionOf(l *executor.Language, version string, isDefault bool) runner.Version {
	return runner.Version{Version: version, Default: isDefault, Compiled: l.Compiled(), Aliases: nonNil(l.Aliases),
		MemoryMB: l.Limits.MemoryMB, Processes: l.Limits.Processes}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// classify is an executor's error as the run service's.
func classify(err error) error {
	var unsupported *executor.UnsupportedLanguageError
	var invalid *executor.InvalidRequestError
	var image *executor.ImageError
	switch {
	case errors.Is(err, sandbox.ErrBusy):
		return &runner.Error{Kind: runner.Busy, Msg: "every sandbox slot is busy: too many executions at once on this host; retry later", Err: err}
	case errors.As(err, &unsupported) || errors.As(err, &invalid) || errors.As(err, &image):
		return &runner.Error{Kind: runner.Invalid, Msg: err.Error(), Err: err}
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return &runner.Error{Kind: runner.Canceled, Msg: "execution canceled", Err: err}
	}
	return &runner.Error{Kind: runner.Internal, Msg: "execution failed: " + err.Error(), Err: err}
}

// Request maps a run onto the executor. Limits the request leaves out stay
// zero: the executor fills them from the language, then from the server's
// defaults (see EngineConfigs).
func Request(r *runner.Run) *executor.Request {
	req := r.Request
	x := &executor.Request{
		Language:    req.Language,
		Version:     req.Version,
		Image:       req.Image,
		Code:        []byte(req.Code),
		Args:        req.Args,
		Env:         req.Env,
		OutputFiles: req.OutputFiles,
		Limits: executor.Limits{
			WallTime:    seconds(req.TimeoutSeconds),
			CPUTime:     seconds(req.CPUTimeSeconds),
			MemoryBytes: req.MaxMemoryMB << 20,
			Processes:   req.MaxProcesses,
			OutputBytes: req.MaxOutputBytes,
			FileSize:    req.MaxFileSizeBytes,
		},
		CompileLimits:  executor.Limits{WallTime: seconds(req.CompileTimeoutSeconds), MemoryBytes: r.CompileMemoryBytes},
		SessionID:      req.SessionID,
		Interpreter:    req.Interpreter,
		TestCases:      req.TestCases,
		Compare:        req.Compare,
		FloatTolerance: req.FloatTolerance,
		Entrypoint:     req.Entrypoint,
		// Zero: the server's max_response_bytes (NewExecutor).
		MaxResponseBytes: req.MaxResponseBytes,
		Tenant:           r.Tenant,
		Stdin:            r.Stdin,
		Stdout:           r.Stdout,
		Stderr:           r.Stderr,
		CompileOutput:    r.CompileOutput,
		Progress:         r.Progress,
	}
	if req.Network != nil {
		x.Network, x.NetworkBudgets = req.Network.Allow, req.Network.Budgets
	}
	for _, sec := range r.Secrets {
		xs := executor.Secret{Name: sec.Name, Value: sec.Value, Hosts: sec.Hosts}
		if h := sec.Header; h != nil {
			xs.HeaderName, xs.HeaderFormat = h.Name, h.Format
		}
		x.Secrets = append(x.Secrets, xs)
	}
	x.Isolation = req.Isolation
	if req.TimeoutAuto {
		// A session's timeout, filled in where the request gave none, gives
		// way to "auto" too.
		x.AutoTimeout, x.Limits.WallTime = true, 0
	}
	if x.Stdin == nil {
		x.Stdin = runner.Input(req)
	}
	names := make([]string, 0, len(req.Files))
	for name := range req.Files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		x.Files = append(x.Files, sandbox.File{Path: name, Data: req.Files[name]})
	}
	return x
}

// sessionBackend is a Backend whose executor keeps sessions.
type sessionBackend struct {
	Backend
	runner.SessionExecutor
}

var _ runner.SessionExecutor = sessionBackend{}

// errNoImages: the executor keeps no image store.
var errNoImages = errors.New("this server's executor keeps no images")

// Images is the executor's image store (the admin API's).
func (b Backend) Images() (*images.Store, error) {
	if x, ok := b.x.(interface{ Images() (*images.Store, error) }); ok {
		return x.Images()
	}
	return nil, errNoImages
}

// PullImage fetches ref into the image store within the configured caps.
func (b Backend) PullImage(ctx context.Context, ref string) (*images.Image, error) {
	if x, ok := b.x.(interface {
		PullImage(context.Context, string) (*images.Image, error)
	}); ok {
		return x.PullImage(ctx, ref)
	}
	return nil, errNoImages
}

// SetImageLogger has the image store say what it evicts in l.
func (b Backend) SetImageLogger(l *slog.Logger) {
	if x, ok := b.x.(interface{ SetImageLogger(*slog.Logger) }); ok {
		x.SetImageLogger(l)
	}
}

// Prewarm prepares n sandboxes ahead, where the executor has an engine.
func (b Backend) Prewarm(n int) error {
	if x, ok := b.x.(interface{ Prewarm(int) error }); ok {
		return x.Prewarm(n)
	}
	return nil
}

// Trace is a Run.Local that has the executor fill t with what it decided
// (the CLI's --verbose).
func Trace(t *executor.Trace) func(any) {
	return func(x any) {
		if xr, ok := x.(*executor.Request); ok {
			xr.Trace = t
		}
	}
}
