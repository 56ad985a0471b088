package sandbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/monitor"
	"golang.org/x/sys/unix"
)

// Config sets up an Engine. The zero value is a sensible default.
type Config struct {
	// CgroupParent overrides where run cgroups are created: on v2 a
	// directory (absolute, or relative to the cgroup2 mount), on v1 a path
	// relative to each hierarchy's root. Default: the engine's own cgroup.
	CgroupParent string
	// UIDBase is the first host uid given to sandboxes; each concurrent run
	// takes two (its namespace root and its user). Default 2000000000.
	UIDBase int
	// UIDSlots is how many runs get distinct host uids (default 4096).
	UIDSlots int
	// Executable is the binary re-executed as the sandbox's PID 1; it must
	// call Init first. Default: this process's own executable.
	Executable string
	// PoolSize is how many built sandboxes may wait idle for another run
	// (default 2 per CPU, at least 4; negative, NoPool: every sandbox
	// serves one run and nothing is prepared for a next one, for one-shot
	// use such as a CLI, which then calls Close before it exits). A sandbox
	// serves again only when its PID 1 has checked that the run left
	// nothing behind, and each run gets a fresh cgroup, /work, /tmp and
	// /dev/shm, and new mount, IPC and cgroup namespaces. The fresh
	// sandboxes kept for Detachable specs (Prewarm) count too, and are at
	// most half of it: the rest is for the others.
	PoolSize int
	// PoolIdle is how long an idle sandbox is kept (default 30s).
	PoolIdle time.Duration
}

// NoPool as Config.PoolSize makes an engine for one-shot use: no sandbox
// waits idle and no cgroup is prepared ahead for a run that may never come.
const NoPool = -1

// Engine runs sandboxes. It is safe for concurrent use.
type Engine struct {
	cfg       Config
	exeFile   *os.File
	cg        *cgroups
	uids      *uidPool
	pool      *pool
	warm      *warmPool // fresh sandboxes for Detachable specs
	devNull   *os.File  // every run without stdin reads it
	devNullFD int
	// background counts clean-ups of finished runs still going on.
	background sync.WaitGroup
	seccomp    bool
	// coverDir receives PID 1's coverage counters in -cover test builds.
	coverDir *os.File
}

// EnableInitCoverage makes every sandbox's PID 1 write its coverage
// counters into dir, so tests built with -cover count the code that runs
// inside sandboxes too. Pass the value of the -test.gocoverdir flag; an
// empty dir does nothing. It is meant for tests only.
func (e *Engine) EnableInitCoverage(dir string) error {
	if dir == "" {
		return nil
	}
	// PID 1 runs as an unprivileged host uid and reaches the directory
	// through a descriptor, not by path.
	if err := os.Chmod(dir, 0o777); err != nil {
		return err
	}
	f, err := os.OpenFile(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	e.coverDir = f
	return nil
}

// New checks that the host can sandbox (user namespaces, cgroups, seccomp)
// and prepares the engine's parent cgroup.
func New(cfg Config) (*Engine, error) {
	if cfg.UIDBase <= 0 {
		cfg.UIDBase = 2000000000
	}
	if cfg.UIDSlots <= 0 {
		cfg.UIDSlots = 4096
	}
	exe := cfg.Executable
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, &SetupError{Step: "find own executable", Err: err}
		}
	}
	if _, err := seccompFilter(); err != nil {
		return nil, &SetupError{Step: "seccomp", Err: err}
	}
	if err := checkUserNamespaces(); err != nil {
		return nil, err
	}
	// A sandbox cannot drop supplementary groups (setgroups is denied in its
	// user namespace) and would inherit ours; root needs none.
	if err := syscall.Setgroups(nil); err != nil {
		return nil, &SetupError{Step: "drop supplementary groups", Err: err}
	}
	cg, err := detectCgroups(cfg.CgroupParent)
	if err != nil {
		return nil, err
	}
	cg.cleanStale()
	exeFile, err := os.Open(exe)
	if err != nil {
		return nil, &SetupError{Step: "open own executable", Err: err}
	}
	if cfg.PoolSize == 0 {
		cfg.PoolSize = max(4, 2*runtime.NumCPU())
	}
	if cfg.PoolIdle <= 0 {
		cfg.PoolIdle = 30 * time.Second
	}
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, &SetupError{Step: "open /dev/null", Err: err}
	}
	e := &Engine{cfg: cfg, exeFile: exeFile, cg: cg, uids: newUIDPool(cfg.UIDSlots), devNull: devNull, devNullFD: int(devNull.Fd()), seccomp: true}
	e.parkDetached()
	e.pool = newPool(e, cfg.PoolSize, cfg.PoolIdle)
	e.warm = newWarmPool(e, cfg.PoolSize/2)
	return e, nil
}

// Prewarm builds sandboxes for spec ahead of time, so that up to n runs
// like it (same mounts, hostname and rlimits) start without building one,
// and keeps n ready as runs take them. Specs with writable or overlay
// mounts cannot be prepared, but Detachable ones can: their sandboxes
// serve one run each, and Start takes a fresh one, never one a run has
// used (see warmPool; Mount.Late lets specs that differ in a mount's
// source share them).
func (e *Engine) Prewarm(spec *Spec, n int) error {
	if err := validateSpec(spec); err != nil {
		return err
	}
	p := &Process{spec: spec, limits: spec.Limits.WithDefaults(), e: e}
	cfg, err := p.initConfig()
	if err != nil {
		return err
	}
	if cfg.Detachable {
		return e.warm.prewarm(cfg, p.limits, n)
	}
	key := poolKey(cfg)
	if key != "" && n > 0 {
		e.pool.mu.Lock()
		e.pool.targets[key] = prewarmTarget{cfg: cfg, n: n}
		e.pool.mu.Unlock()
	}
	return e.pool.prewarm(cfg, n)
}

// Drain destroys the idle sandboxes (runs going on are not affected) and
// waits for the clean-up of finished runs.
func (e *Engine) Drain() {
	e.pool.drain(false)
	e.warm.drain(false)
	e.Quiesce()
}

// Close destroys the idle sandboxes, those built ahead for Detachable
// specs included, and keeps no more, and waits until the sandboxes,
// cgroups and mounts of finished runs are removed; runs may go on, each
// sandbox then serving one run. Detached and adopted runs are left alone.
func (e *Engine) Close() error {
	e.pool.drain(true)
	e.warm.drain(true)
	e.Quiesce()
	e.cg.closeOptional()
	return nil
}

// CloseDefault closes the engine Default made, if it made one: a command
// that used it calls this before it exits, so that nothing of its
// sandboxes remains.
func CloseDefault() {
	defaultMu.Lock()
	made := defaultMade
	defaultMu.Unlock()
	if made {
		if e, err := Default(); err == nil {
			e.Close()
		}
	}
}

func checkUserNamespaces() error {
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && strings.TrimSpace(string(b)) == "0" {
		return &SetupError{Step: "user namespaces", Err: errors.New("disabled: /proc/sys/user/max_user_namespaces is 0")}
	}
	if os.Geteuid() != 0 {
		return &SetupError{Step: "privileges", Err: errors.New("the engine must run as root to map sandbox uids and manage cgroups (the sandboxed code never runs as root)")}
	}
	return nil
}

// Cgroups describes the cgroup setup the engine uses.
func (e *Engine) Cgroups() CgroupInfo { return e.cg.info() }

var (
	defaultOnce   sync.Once
	defaultEngine *Engine
	defaultErr    error
	defaultMu     sync.Mutex
	defaultMade   bool
)

// Default returns a process-wide Engine built with the zero Config.
func Default() (*Engine, error) {
	defaultOnce.Do(func() {
		defaultEngine, defaultErr = New(Config{})
		defaultMu.Lock()
		defaultMade = true
		defaultMu.Unlock()
	})
	return defaultEngine, defaultErr
}

// Run runs spec with the default engine.
func Run(ctx context.Context, spec *Spec) (*Result, error) {
	e, err := Default()
	if err != nil {
		return nil, err
	}
	return e.Run(ctx, spec)
}

// Run starts spec and waits for it to end.
func (e *Engine) Run(ctx context.Context, spec *Spec) (*Result, error) {
	p, err := e.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	return p.Wait()
}

// initCaps are the capabilities PID 1 needs, within its user namespace only,
// to build the sandbox; it drops them all before the program starts.
var initCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_SETUID, unix.CAP_SETGID,
	unix.CAP_SETPCAP, unix.CAP_CHOWN, unix.CAP_FOWNER, unix.CAP_DAC_OVERRIDE, unix.CAP_KILL,
	unix.CAP_SYS_RESOURCE}

// cpuKillMargin is how far ahead of the CPU-time limit the watchdog kills,
// per CPU the tree may be running on.
const cpuKillMargin = 2 * time.Millisecond

// runSeq numbers runs across every Engine of the process, so that engines
// sharing a parent cgroup never pick the same run cgroup name.
var runSeq atomic.Uint64

// setupTimeout bounds PID 1's work before the program starts.
const setupTimeout = 30 * time.Second

// Process is a started run.
type Process struct {
	spec   *Spec
	limits Limits
	ctx    context.Context
	e      *Engine
	c      *container
	cg     *runCgroup
	// fs holds /work, /tmp and /dev/shm; fsKept says they are the container's
	// last run's, still mounted in the sandbox and emptied (container.keepFS);
	// keepFS that this run's are kept so for the next.
	fs             *runFS
	fsKept, keepFS bool

	stdinW   *os.File
	outDone  sync.WaitGroup
	stdout   Capture
	stderr   Capture
	result   Capture // descriptor 3 (Spec.ResultPipe)
	limitHit atomic.Pointer[Limit]
	ended    atomic.Bool
	// over says the run's cgroup may serve another run (finish): a limit
	// or a cancel that comes later (a timer that fired as the program
	// ended, the request's context canceled once it was answered) kills
	// nothing. killMu orders the two.
	killMu      sync.Mutex
	over        bool
	prioritized bool // out of the idle priority it started with (Prioritize)
	dialed      bool // the host connected into the run's network (DialTCP)
	setupCPU    time.Duration
	children    *cpuTimes // CPU time of the run's processes, from PID 1
	// gone is PID 1's word that every process of the run is reaped. A
	// run whose processes are gone answers before PID 1's verdict on the
	// sandbox, which the container's next run reads first (container.settle).
	gone bool
	// cgClean: the run's cgroup counted no OOM kill and no refused fork;
	// keepCg: it is to be recycled for the container's next run, not
	// removed with the rest of the run (finish).
	cgClean, keepCg bool
	cleanup         []func()

	// PID 1's first event on the run ("started", or why not), read once
	// by Wait or Detach, whichever comes first (awaitStart).
	startOnce sync.Once
	startEv   initEvent
	startOK   bool
	// exited: Wait has the end of the program (under killMu). detached:
	// Detach handed the run on (under killMu); detach is closed then.
	// watchMu is held by Wait while its watchers (wall time, CPU time,
	// context) run: Detach takes it to know they have stopped.
	exited, detached bool
	detach           chan struct{}
	watchMu          sync.Mutex
	// frozen: Freeze froze the sandbox and Thaw did not thaw it since.
	frozen atomic.Bool
}

// Start builds the sandbox, or takes a prepared one, and starts the
// program. The run is bounded by its limits and by ctx; Wait must be
// called to release its resources.
func (e *Engine) Start(ctx context.Context, spec *Spec) (_ *Process, err error) {
	if err := validateSpec(spec); err != nil {
		return nil, err
	}
	p := &Process{spec: spec, limits: spec.Limits.WithDefaults(), ctx: ctx, e: e, detach: make(chan struct{})}
	defer func() {
		if err != nil {
			p.release()
			if p.c != nil {
				p.discard()
			}
		}
	}()
	cfg, err := p.initConfig()
	if err != nil {
		return nil, err
	}
	key := poolKey(cfg)
	if p.c = e.pool.take(key, spec.Tenant); p.c == nil && cfg.Detachable {
		warmKey := configKey(cfg)
		p.c = e.warm.take(warmKey)
		// A sandbox taken is replaced once this Start is done: building
		// one meanwhile would slow it down.
		defer e.warm.refill(warmKey)
	}
	if p.c == nil {
		if p.c, err = e.startContainer(cfg, key); err != nil {
			return nil, err
		}
	}
	p.c.runs++
	p.c.served, p.c.tenant = true, spec.Tenant
	p.c.verdictDue = true // this run's, once it is over
	if spec.Network != nil {
		// A sandbox with a network serves this run alone (poolKey).
		tun, err := attachTUN(p.c.cmd.Process.Pid, spec.Network)
		if err != nil {
			return nil, &SetupError{Step: "network", Err: err}
		}
		detach, err := spec.Network.Attach(tun)
		if err != nil {
			tun.Close()
			return nil, &SetupError{Step: "network", Err: err}
		}
		p.cleanup = append(p.cleanup, detach)
	}

	// The run's filesystems are made while its cgroup is: both are on the
	// path of every run, and they do not depend on each other. The last
	// run of the container has usually made them ahead.
	fsDone := make(chan error, 1)
	go func() {
		var err error
		defer func() { fsDone <- err }()
		fs, kept := p.c.takeFS(p.limits, spec.Tenant)
		if kept && spec.FilesFrom != "" {
			// Mounted in the sandbox already: the run's are overlays.
			fs.close()
			fs, kept = nil, false
		}
		if fs == nil {
			if fs, err = newRunFS(p.limits, p.c.hostRoot, p.c.hostUser); err != nil {
				return
			}
		}
		p.fs, p.fsKept = fs, kept
		if spec.FilesFrom != "" {
			if err = fs.cowFrom(spec.FilesFrom, p.c.cmd.Process.Pid); err != nil {
				err = &SetupError{Step: "files", Err: err}
				return
			}
		}
		if err = fs.work.writeFiles(spec.Files, p.c.hostUser); err != nil {
			err = &SetupError{Step: "input files", Err: err}
		}
	}()
	// A random name: the program sees it, and a counter would tell it how
	// many runs came before.
	name := fmt.Sprintf("run-%016x", rand.Uint64())
	p.cg, err = p.c.cg.createRun(name, p.limits, spec.Tenant)
	fsErr := <-fsDone
	if p.fs != nil {
		p.cleanup = append(p.cleanup, func() {
			if !p.keepFS {
				p.fs.close()
			}
		})
	}
	if err != nil {
		return nil, &SetupError{Step: "cgroup", Err: err}
	}
	p.cg.spare = p.c.cmd.Process.Pid
	p.cleanup = append(p.cleanup, func() {
		switch {
		case p.detached:
			p.cg.forget() // the run goes on: whoever adopts it removes it
		case !p.keepCg:
			p.cg.remove()
		}
	})
	if err = fsErr; err != nil {
		return nil, err
	}

	// The child ends are plain descriptors, handed to PID 1 and closed; the
	// parent ends are non-blocking files that Go's poller serves.
	var parentEnds []*os.File
	var childEnds []int
	defer func() {
		for _, fd := range childEnds {
			unix.Close(fd)
		}
	}()
	p.cleanup = append(p.cleanup, func() { closeAll(parentEnds) })
	pipe := func(name string, parentWrites bool) *os.File {
		var fds [2]int
		if err != nil {
			return nil
		}
		if err = unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
			return nil
		}
		parent, child := fds[0], fds[1]
		if parentWrites {
			parent, child = child, parent
		}
		childEnds = append(childEnds, child)
		// The program's user owns its pipes, so that it can reopen them
		// (/dev/stdin, /proc/self/fd/1) as it could on a host.
		if err = unix.Fchown(child, p.c.hostUser, p.c.hostUser); err != nil {
			unix.Close(parent)
			return nil
		}
		if err = unix.SetNonblock(parent, true); err != nil {
			unix.Close(parent)
			return nil
		}
		f := os.NewFile(uintptr(parent), name)
		parentEnds = append(parentEnds, f)
		return f
	}
	outR := pipe("stdout", false)
	errR := pipe("stderr", false)
	var resR *os.File
	if spec.ResultPipe {
		resR = pipe("result", false)
	}
	stdinFD := e.devNullFD
	if spec.Stdin != nil {
		if p.stdinW = pipe("stdin", true); err == nil {
			stdinFD = childEnds[len(childEnds)-1]
		}
	}
	if err != nil {
		return nil, &SetupError{Step: "pipes", Err: err}
	}
	late, err := cloneLate(cfg.Mounts)
	if err != nil {
		return nil, &SetupError{Step: "mount", Err: err}
	}
	defer closeFDs(late)
	fds := []int{stdinFD, childEnds[0], childEnds[1], p.fs.work.mnt, p.fs.tmp.mnt, p.fs.shm.mnt}
	if p.fsKept {
		// PID 1 has them mounted: their places in the message hold nothing.
		fds[runFDWork], fds[runFDTmp], fds[runFDShm] = e.devNullFD, e.devNullFD, e.devNullFD
	}
	if spec.ResultPipe {
		fds = append(fds, childEnds[2])
	}
	fds = append(fds, late...)
	if p.cg.v2 {
		fds = append(fds, p.cg.fd)
	} else {
		fds = append(fds, p.cg.handover...)
	}
	req := &runRequest{Args: spec.Args, Env: spec.Env, Dir: cmp.Or(spec.Dir, "/work"), Processes: p.limits.Processes, ResultPipe: spec.ResultPipe, KeepFS: p.fsKept, Late: len(late)}
	if err = p.c.ctl.send(req, fds...); err != nil {
		p.c.kill()
		return nil, &SetupError{Step: "start run", Err: err}
	}
	runtime.KeepAlive(e.devNull)
	// PID 1 now holds the mounts: ours go, the roots stay for reading.
	for _, w := range []*workFS{p.fs.work, p.fs.tmp, p.fs.shm} {
		if w.mnt >= 0 {
			unix.Close(w.mnt)
			w.mnt = -1
		}
	}
	p.outDone.Add(2)
	p.stdout = Capture{Max: p.limits.OutputBytes, Live: spec.Stdout, Budget: spec.Budget, Stream: spec.Stream, Exceeded: p.outputExceeded}
	p.stderr = Capture{Max: p.limits.OutputBytes, Live: spec.Stderr, Budget: spec.Budget, Stream: spec.Stream, Exceeded: p.outputExceeded}
	go readInto(&p.stdout, outR, &p.outDone)
	go readInto(&p.stderr, errR, &p.outDone)
	if resR != nil {
		p.outDone.Add(1)
		p.result = Capture{Max: p.limits.OutputBytes, Budget: spec.Budget, Live: spec.ResultOut, Stream: spec.Stream, Exceeded: p.outputExceeded}
		go readInto(&p.result, resR, &p.outDone)
	}
	return p, nil
}

// discard destroys the container of a run that failed to start.
func (p *Process) discard() {
	p.e.destroyLater(p.c)
}

func (p *Process) initConfig() (*initConfig, error) {
	spec, l := p.spec, p.limits
	cfg := &initConfig{
		Hostname: cmp.Or(spec.Hostname, "sandbox"),
		FileSize: l.FileSize,
		NoFile:   l.OpenFiles,
		Stack:    l.Stack,
		CPUSecs:  CPUBackstop(l.CPUTime),
		Seccomp:  p.e.seccomp,
		CgroupV2: p.e.cg.v2,
		Network:  spec.Network != nil,
		PTY:      spec.PTY,
		Home:     spec.Home,

		Detachable: spec.Detachable,
	}
	if spec.Root != "" {
		targets := make([]string, 0, len(spec.Mounts))
		for _, m := range spec.Mounts {
			targets = append(targets, path.Clean(cmp.Or(m.Target, m.Source)))
		}
		if spec.Home != "" {
			// The link to /work goes where the root may have a directory
			// of its own (an image's /home): beside its entries.
			targets = append(targets, spec.Home)
		}
		root, err := rootMounts(spec.Root, targets)
		if err != nil {
			return nil, &SetupError{Step: "root", Err: err}
		}
		cfg.Mounts = root
	}
	for _, m := range spec.Mounts {
		mc := mountConfig{Source: m.Source, Target: m.Target, Writable: m.Writable, Overlay: m.Overlay, Optional: m.Optional,
			Late: m.Late && spec.Detachable}
		if mc.Target == "" {
			mc.Target = m.Source
		}
		cfg.Mounts = append(cfg.Mounts, mc)
	}
	return cfg, nil
}

// rootEtcOwn are the files of /etc the sandbox writes itself (writeEtc),
// whatever a Root has there.
var rootEtcOwn = map[string]bool{"passwd": true, "group": true, "hosts": true}

// rootSkip are the entries of a Root that the sandbox has of its own.
var rootSkip = map[string]bool{"dev": true, "proc": true, "sys": true, "tmp": true, "work": true}

// rootMounts lists the mounts that make the directory root the sandbox's
// root (Spec.Root). A directory of root that holds one of targets (the
// spec's own mounts, which come on top; clean paths) is not bound whole, which would
// leave no place to mount them in its read-only tree, but entry by entry
// as /etc is; an entry at a target itself is left to that mount.
func rootMounts(root string, targets []string) ([]mountConfig, error) {
	var out []mountConfig
	holds := func(dir string) (under, at bool) {
		for _, t := range targets {
			at = at || t == dir
			under = under || strings.HasPrefix(t, dir+"/")
		}
		return under, at
	}
	var add func(dir, inside string, skip map[string]bool) error
	add = func(dir, inside string, skip map[string]bool) error {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			name := e.Name()
			src, target := filepath.Join(dir, name), path.Join(inside, name)
			under, at := holds(target)
			switch {
			case skip[name] || at:
			case e.Type()&fs.ModeSymlink != 0:
				// Never a link where the sandbox mounts or writes: the
				// root is built before pivot_root, where a link would
				// lead to the host's tree.
				if under || target == "/etc" {
					continue
				}
				link, err := os.Readlink(src)
				if err != nil {
					return err
				}
				out = append(out, mountConfig{Target: target, Link: link})
			case target == "/etc" && e.IsDir():
				if err := add(src, target, rootEtcOwn); err != nil {
					return err
				}
			case under && e.IsDir():
				if err := add(src, target, nil); err != nil {
					return err
				}
			case under:
				// A file where a mount goes below it: the mount wins.
			case e.IsDir() || e.Type().IsRegular():
				out = append(out, mountConfig{Source: src, Target: target})
			}
		}
		return nil
	}
	if err := add(root, "/", rootSkip); err != nil {
		return nil, err
	}
	return out, nil
}

func validateSpec(spec *Spec) error {
	if spec == nil || len(spec.Args) == 0 || spec.Args[0] == "" {
		return errors.New("sandbox: empty command")
	}
	if h := spec.Home; h != "" {
		top, _, _ := strings.Cut(strings.TrimPrefix(h, "/"), "/")
		if !path.IsAbs(h) || path.Clean(h) != h || !strings.Contains(h[1:], "/") || slices.Contains([]string{"work", "tmp", "dev", "proc", "etc", "sys"}, top) {
			return fmt.Errorf("sandbox: home %q: want a clean absolute path of two levels or more, outside /work, /tmp, /dev, /proc, /etc and /sys", h)
		}
	}
	for _, s := range append(append([]string{spec.Dir, spec.Hostname}, spec.Args...), spec.Env...) {
		if strings.ContainsRune(s, 0) {
			return fmt.Errorf("sandbox: NUL byte in %.40q", s)
		}
	}
	for _, e := range spec.Env {
		if !strings.Contains(e, "=") {
			return fmt.Errorf("sandbox: environment entry %q has no '='", e)
		}
	}
	if spec.FilesFrom != "" && (!filepath.IsAbs(spec.FilesFrom) || filepath.Clean(spec.FilesFrom) == "/") {
		return fmt.Errorf("sandbox: files from %q: want an absolute path, not /", spec.FilesFrom)
	}
	if spec.Root != "" && (!filepath.IsAbs(spec.Root) || filepath.Clean(spec.Root) == "/") {
		return fmt.Errorf("sandbox: root %q must be an absolute path and not /", spec.Root)
	}
	if spec.Network != nil {
		if err := spec.Network.validate(); err != nil {
			return err
		}
	}
	for _, m := range spec.Mounts {
		t := m.Target
		if t == "" {
			t = m.Source
		}
		if !filepath.IsAbs(m.Source) || !filepath.IsAbs(t) || filepath.Clean(t) == "/" {
			return fmt.Errorf("sandbox: mount %q -> %q: paths must be absolute and not /", m.Source, t)
		}
		switch filepath.Clean(t) {
		case "/work", "/tmp", "/proc", "/dev":
			return fmt.Errorf("sandbox: mount target %s is reserved", t)
		}
		if m.Late && (m.Writable || m.Overlay || m.Optional) {
			return fmt.Errorf("sandbox: mount %q: a Late mount cannot be Writable, Overlay or Optional", m.Source)
		}
	}
	return nil
}

// hit records the first limit that ends the run and kills the run's
// processes; PID 1 then reports the end and cleans up. A detached run is
// no longer this Process's to end.
func (p *Process) hit(l Limit) {
	p.killMu.Lock()
	if p.detached {
		p.killMu.Unlock()
		return
	}
	p.limitHit.CompareAndSwap(nil, &l)
	if !p.over {
		p.cg.kill()
		if p.frozen.Load() {
			p.freezer().thawKilled()
		}
	}
	p.killMu.Unlock()
	// A PID 1 that does not report the end promptly is not trusted again.
	time.AfterFunc(stuckTimeout, func() {
		if !p.ended.Load() {
			p.c.kill()
		}
	})
}

// stuckTimeout is how long PID 1 may take to report the end of a run that
// was killed.
const stuckTimeout = 10 * time.Second

func (p *Process) outputExceeded() { p.hit(LimitOutput) }

// Kill ends the run at once; Wait reports it as canceled.
func (p *Process) Kill() { p.hit(LimitCanceled) }

// Prioritize takes a run started with Limits.Idle out of the scheduler's
// idle priority for the rest of its life: someone now waits for it (work
// begun in the background that a request came to need). A run that is not
// idle, or is over, is left alone.
func (p *Process) Prioritize() error {
	p.killMu.Lock()
	defer p.killMu.Unlock()
	if p.over || p.detached || !p.limits.Idle || p.prioritized {
		return nil
	}
	p.prioritized = true
	if p.cg.v2 {
		return setIdle(p.cg.fd, false)
	}
	// v1: the priority is the sandbox's cpu cgroup's (startRunV1), which
	// the sandbox's next run sets again as its limits say.
	cpu, ok := p.c.cg.dfd["cpu"]
	if !ok {
		return nil
	}
	if err := setIdle(cpu, false); err != nil {
		return err
	}
	p.c.cg.idle = false
	return nil
}

// Wait waits for the run to end, cleans the sandbox and returns the result.
// A SetupError means the program never started. Once the run is detached
// (Detach), Wait returns ErrDetached at once and leaves the run alone.
func (p *Process) Wait() (_ *Result, err error) {
	defer func() {
		p.ended.Store(true)
		if err != ErrDetached {
			p.finish()
		}
	}()
	if p.isDetached() {
		return nil, ErrDetached
	}
	if p.stdinW != nil {
		go func() {
			io.Copy(p.stdinW, p.spec.Stdin)
			p.stdinW.Close()
		}()
	}
	ev, ok := p.awaitStart()
	if !ok || ev.Event != "started" {
		p.outDone.Wait()
		if ok && ev.Event == "error" {
			p.awaitReset()
			return nil, &SetupError{Step: ev.Step, Err: errors.New(ev.Error)}
		}
		return nil, &SetupError{Step: "init", Err: fmt.Errorf("sandbox init ended before the program started: %v", p.c.state())}
	}
	start := time.Now()
	p.watchMu.Lock()
	if p.isDetached() {
		p.watchMu.Unlock()
		return nil, ErrDetached
	}
	if p.limitHit.Load() != nil {
		p.cg.kill() // the kill came before the program was in its cgroup
	}
	p.setupCPU = time.Duration(ev.SetupCPU) * time.Microsecond
	stopWatch := make(chan struct{})
	wall := time.AfterFunc(p.limits.WallTime, func() { p.hit(LimitWallTime) })
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		p.watchCPU(stopWatch)
	}()
	go func() {
		if testHookCancelWatch != nil {
			testHookCancelWatch(p)
		}
		select {
		case <-p.ctx.Done():
			p.hit(LimitCanceled)
		case <-stopWatch:
		}
	}()
	exit := initEvent{ExitCode: -1, Signal: int(syscall.SIGKILL)}
	detached := false
	select {
	case ev, ok = <-p.c.events:
		p.killMu.Lock()
		p.exited, detached = !p.detached, p.detached
		p.killMu.Unlock()
	case <-p.detach:
		detached = true
	}
	end := time.Now()
	wall.Stop()
	close(stopWatch)
	<-watchDone // it reads the cgroup that is removed below
	p.watchMu.Unlock()
	if detached {
		return nil, ErrDetached
	}
	if ok && ev.Event == "exited" {
		exit = ev
		// PID 1 ended and reaped what the program left running before it
		// reported the exit: the run is over.
		p.children, p.gone = ev.Children, ev.Children != nil
	}
	// The output ends when the last process of the run does.
	if ok && !p.gone {
		p.awaitReset()
	}
	p.outDone.Wait()

	res := &Result{ExitCode: exit.ExitCode, WallTime: end.Sub(start)}
	if exit.Wall > 0 {
		// PID 1's own measure: the host may read both events late.
		res.WallTime = time.Duration(exit.Wall) * time.Microsecond
	}
	if exit.Signal != 0 {
		res.Signal = unix.SignalName(syscall.Signal(exit.Signal))
	}
	// v1 reads the run's CPU time from the sandbox's cgroup only when PID
	// 1 could not count it exactly (see below).
	usage, err := p.cg.usage(p.children == nil)
	if err != nil {
		return nil, &SetupError{Step: "read cgroup usage", Err: err}
	}
	switch {
	case p.children != nil && !p.cg.v2:
		// Exact: every process of the run, reaped by PID 1.
		res.UserTime = time.Duration(p.children.User) * time.Microsecond
		res.SysTime = time.Duration(p.children.Sys) * time.Microsecond
		res.CPUTime = res.UserTime + res.SysTime
	default:
		// v1 without PID 1's word counts from the sandbox's cgroup, where
		// PID 1 spent its set-up (almost all system time).
		res.CPUTime = max(usage.CPU-p.setupCPU, 0)
		res.SysTime = min(max(usage.Sys-p.setupCPU, 0), res.CPUTime)
		res.UserTime = res.CPUTime - res.SysTime
	}
	res.PeakMemory = usage.PeakMemory
	p.cgClean = usage.OOMKills == 0 && usage.PidsMax == 0
	res.Stdout, res.StdoutTruncated = p.stdout.Bytes()
	res.Stderr, res.StderrTruncated = p.stderr.Bytes()
	res.ResultData, res.ResultTruncated = p.result.Bytes()
	res.Limit = p.whichLimit(res, usage)
	// Every process of the run must be gone before the work dir is read:
	// PID 1 said so, or it died, and then the cgroup must be emptied.
	if !p.gone {
		p.cg.kill()
		if err := p.cg.remove(); err != nil {
			return nil, &SetupError{Step: "remove cgroup", Err: err}
		}
	}
	res.Files, res.SkippedFiles = p.fs.work.collect(p.spec.Collect, p.spec.Budget)
	return res, nil
}

// awaitStart reads PID 1's first event on the run, once: "started", or
// why the program did not start; false when PID 1 is gone.
func (p *Process) awaitStart() (initEvent, bool) {
	p.startOnce.Do(func() {
		// A PID 1 stuck in set-up (it never should be) must not hang
		// the caller.
		setupTimer := time.AfterFunc(setupTimeout, p.c.kill)
		p.startEv, p.startOK = p.c.next()
		setupTimer.Stop()
	})
	return p.startEv, p.startOK
}

// isDetached says whether Detach handed the run on.
func (p *Process) isDetached() bool {
	p.killMu.Lock()
	defer p.killMu.Unlock()
	return p.detached
}

// awaitReset waits for PID 1's word that the run's processes are gone and
// whether the sandbox is clean.
func (p *Process) awaitReset() {
	ev, ok := p.c.awaitReset()
	p.c.takeVerdict(ev, ok)
	if ok {
		p.gone = ev.Clean || ev.Children != nil
		if p.children == nil {
			p.children = ev.Children
		}
	}
}

func (p *Process) whichLimit(res *Result, u monitor.Usage) Limit {
	f := LimitFacts{Result: res, Limits: p.limits, OOMKilled: u.OOMKills > 0, PidsRefused: u.PidsMax > 0,
		DiskFull: func() bool { return p.fs.work.full() || p.fs.tmp.full() || p.fs.shm.full() },
		Largest:  func() int64 { return max(p.fs.work.largest(), p.fs.tmp.largest(), p.fs.shm.largest()) }}
	if l := p.limitHit.Load(); l != nil {
		f.Hit = *l
	}
	return WhichLimit(f)
}

// watchCPU enforces the CPU-time limit without polling: it sleeps for the
// least wall time in which the tree could use up what is left of its CPU
// time, checks, and repeats, so the kill lands within a millisecond or so
// of the limit however many threads burn.
func (p *Process) watchCPU(stop <-chan struct{}) {
	parallel := float64(runtime.NumCPU())
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		used, err := p.cg.cpu()
		if err != nil {
			return
		}
		left := p.limits.CPUTime - (used - p.setupCPU)
		// The cgroup's counter lags each running CPU by up to a scheduler
		// tick and the kill takes a moment to land: ending the run a little
		// early keeps it within 10 ms of the limit on a busy host too.
		if left <= time.Duration(parallel)*cpuKillMargin {
			p.hit(LimitCPUTime)
			return
		}
		// Wake when, at full speed on every CPU, the tree would be at the
		// kill point: a late wake-up then still kills in time.
		t.Reset(max(time.Duration(float64(left)/parallel)-cpuKillMargin, 200*time.Microsecond))
	}
}

// finish ends a run that was waited for: its container goes back to the
// pool when the run left it clean, and the run's cgroup and mounts are
// freed in the background, after the caller has its result (then the
// container too, when it may not serve again).
func (p *Process) finish() {
	p.killMu.Lock()
	p.over = true
	dialed := p.dialed
	p.killMu.Unlock()
	// The container may be taken (or destroyed) as soon as it is back in
	// the pool: its destroy waits for this run's clean-up.
	p.c.cleaning.Add(1)
	// A verdict on its way: the container waits for it in the pool, and
	// whoever takes it reads it first (pool.take). A run the host dialed
	// into had sockets of the host's in its namespace: its sandbox retires.
	fit := p.gone && !dialed && (p.c.verdictDue || !p.c.unfit) && p.e.pool.wants(p.c)
	if fit && p.fs != nil {
		// The run's filesystems stay mounted in the sandbox for the next
		// run of its tenant, emptied now, before anyone can take it: no
		// mount, unmount or RCU wait on the next run's path. A run that
		// left them otherwise than a wipe undoes retires its sandbox.
		if p.keepFS = p.fs.wipe(p.c.hostRoot, p.c.hostUser); p.keepFS {
			p.c.keepFS(p.fs, p.spec.Tenant)
		} else {
			fit = false
		}
	}
	reused := fit && p.e.pool.put(p.c)
	p.e.background.Add(1)
	go func() {
		defer p.e.background.Done()
		if testHookRelease != nil {
			testHookRelease()
		}
		// The cgroup is looked at after the run's filesystems are gone
		// (or emptied): files the program made there are charged to it
		// until then.
		p.keepCg = reused && p.gone && p.cgClean
		p.release()
		if p.keepCg && !p.c.cg.recycle(p.cg, p.spec.Tenant) {
			p.cg.remove()
		}
		p.c.cleaning.Done()
		if !reused {
			p.c.destroy()
			return
		}
		p.c.cg.prepareNext(p.limits)
		p.c.prepareFS(p.limits)
	}()
}

// testHookRelease, when set (by tests), runs before a finished run's
// clean-up: a slow clean-up racing the pool.
var testHookRelease func()

// testHookCancelWatch, when set (by tests), runs before a run's watch on
// its context starts: a watcher scheduled late.
var testHookCancelWatch func(*Process)

// Quiesce waits until the cgroups and mounts of finished runs are freed
// (not those of detached or adopted runs, whose holders end them).
func (e *Engine) Quiesce() { e.background.Wait() }

func (p *Process) release() {
	for i := len(p.cleanup) - 1; i >= 0; i-- {
		p.cleanup[i]()
	}
	p.cleanup = nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}

// readBuffers are the 64 KiB buffers output is read through, in large
// chunks; reused, since every run needs two.
var readBuffers = sync.Pool{New: func() any { return new([64 << 10]byte) }}

// readInto reads r into c until r ends (its writers closed), in large
// chunks.
func readInto(c *Capture, r io.Reader, done *sync.WaitGroup) {
	defer done.Done()
	buf := readBuffers.Get().(*[64 << 10]byte)
	defer readBuffers.Put(buf)
	b := buf[:]
	for {
		n, err := r.Read(b)
		if n > 0 {
			c.Write(b[:n])
		}
		if err != nil {
			return
		}
	}
}

// uidPool hands out host uid slots so concurrent runs never share a uid.
type uidPool struct {
	mu   sync.Mutex
	free []int
	// releasing counts slots whose sandboxes are being destroyed (PID 1
	// may take a moment to exit): a run that finds none free waits for
	// them rather than failing while they are about to come back.
	releasing int
	freed     chan struct{} // closed and replaced at every put
	// held counts, for each slot held so, the detached and adopted runs
	// that have it (hold): it is free again when the last has ended.
	held map[int]int
	// parked are held slots of sandboxes waiting to be adopted.
	parked map[int]bool
}

// uidWait bounds how long get waits for a slot being released.
const uidWait = 5 * time.Second

func newUIDPool(n int) *uidPool {
	// Start at a random slot so two engines on one host rarely collide.
	off := rand.IntN(n)
	free := make([]int, n)
	for i := range free {
		free[i] = (off + n - 1 - i) % n
	}
	return &uidPool{free: free, freed: make(chan struct{}), held: make(map[int]int)}
}

func (u *uidPool) get() (int, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	var deadline <-chan time.Time
	for len(u.free) == 0 {
		if u.releasing == 0 {
			return 0, ErrBusy
		}
		if deadline == nil {
			t := time.NewTimer(uidWait)
			defer t.Stop()
			deadline = t.C
		}
		freed := u.freed
		u.mu.Unlock()
		select {
		case <-freed:
			u.mu.Lock()
		case <-deadline:
			u.mu.Lock()
			if len(u.free) == 0 {
				return 0, ErrBusy
			}
		}
	}
	s := u.free[len(u.free)-1]
	u.free = u.free[:len(u.free)-1]
	return s, nil
}

// release says that slot s is on its way back (its sandbox is being
// destroyed); put ends that.
func (u *uidPool) release() {
	u.mu.Lock()
	u.releasing++
	u.mu.Unlock()
}

func (u *uidPool) put(s int) {
	u.mu.Lock()
	u.free = append(u.free, s)
	u.releasing--
	close(u.freed)
	u.freed = make(chan struct{})
	u.mu.Unlock()
}

// SignalNumber returns the number of a signal named like Result.Signal
// ("SIGKILL"), or 0.
func SignalNumber(name string) int { return int(unix.SignalNum(name)) }
