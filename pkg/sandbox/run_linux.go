package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
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
}

// Engine runs sandboxes. It is safe for concurrent use.
type Engine struct {
	cfg     Config
	exeFile *os.File
	cg      *cgroups
	uids    *uidPool
	seccomp bool
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
	return &Engine{cfg: cfg, exeFile: exeFile, cg: cg, uids: newUIDPool(cfg.UIDSlots), seccomp: true}, nil
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
)

// Default returns a process-wide Engine built with the zero Config.
func Default() (*Engine, error) {
	defaultOnce.Do(func() { defaultEngine, defaultErr = New(Config{}) })
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
	unix.CAP_SETPCAP, unix.CAP_CHOWN, unix.CAP_FOWNER, unix.CAP_DAC_OVERRIDE}

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
	slot   int
	cg     *runCgroup
	work   *workFS
	cmd    *exec.Cmd

	stdinW   *os.File
	events   chan initEvent
	exited   chan struct{}
	outDone  sync.WaitGroup
	stdout   capture
	stderr   capture
	limitHit atomic.Pointer[Limit]
	initCPU  time.Duration
	exit     initEvent // PID 1's report of how the program ended
	cleanup  []func()
}

// Start builds the sandbox and starts the program. The run is bounded by
// its limits and by ctx; Wait must be called to release its resources.
func (e *Engine) Start(ctx context.Context, spec *Spec) (_ *Process, err error) {
	if err := validateSpec(spec); err != nil {
		return nil, err
	}
	p := &Process{spec: spec, limits: spec.Limits.WithDefaults(), ctx: ctx, e: e, events: make(chan initEvent, 4), exited: make(chan struct{})}
	defer func() {
		if err != nil {
			p.release()
		}
	}()
	if p.slot, err = e.uids.get(); err != nil {
		return nil, err
	}
	p.cleanup = append(p.cleanup, func() { e.uids.put(p.slot) })
	hostRoot := e.cfg.UIDBase + 2*p.slot
	hostUser := hostRoot + 1

	name := fmt.Sprintf("run-%d-%d", os.Getpid(), runSeq.Add(1))
	if p.cg, err = e.cg.create(name, p.limits); err != nil {
		return nil, &SetupError{Step: "cgroup", Err: err}
	}
	p.cleanup = append(p.cleanup, func() { p.cg.remove() })
	if p.work, err = newWorkFS(p.limits.WorkSize, p.limits.Inodes, hostUser); err != nil {
		return nil, &SetupError{Step: "work dir", Err: err}
	}
	p.cleanup = append(p.cleanup, p.work.close)
	if err = p.work.writeFiles(spec.Files, hostUser); err != nil {
		return nil, &SetupError{Step: "input files", Err: err}
	}

	var parentEnds, childEnds []*os.File
	pipe := func() (r, w *os.File) {
		if err == nil {
			r, w, err = os.Pipe()
		}
		return
	}
	cfgR, cfgW := pipe()
	statR, statW := pipe()
	outR, outW := pipe()
	errR, errW := pipe()
	var stdinR *os.File
	if spec.Stdin != nil {
		stdinR, p.stdinW = pipe()
	} else if err == nil {
		stdinR, err = os.Open(os.DevNull)
	}
	parentEnds = append(parentEnds, cfgW, statR, outR, errR, p.stdinW)
	childEnds = append(childEnds, cfgR, statW, outW, errW, stdinR)
	defer closeAll(childEnds)
	p.cleanup = append(p.cleanup, func() { closeAll(parentEnds) })
	if err != nil {
		return nil, &SetupError{Step: "pipes", Err: err}
	}
	workMount := os.NewFile(uintptr(p.work.mnt), "work")
	p.work.mnt = -1
	childEnds = append(childEnds, workMount)
	// The binary is executed through a descriptor the engine holds, so a
	// replaced or unreadable path on disk does not matter.
	extra := []*os.File{cfgR, statW, workMount, e.exeFile}
	initEnv := []string{"GOMAXPROCS=1"}
	if e.coverDir != nil {
		extra = append(extra, e.coverDir)
		initEnv = append(initEnv, "GOCOVERDIR=/proc/self/fd/"+strconv.Itoa(fdCover))
	}
	cfg := p.initConfig()
	p.cmd = &exec.Cmd{
		Path:       "/proc/self/fd/" + strconv.Itoa(fdExe),
		Args:       []string{initArg0},
		Env:        initEnv,
		Stdin:      stdinR,
		Stdout:     outW,
		Stderr:     errW,
		ExtraFiles: extra,
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNS |
				syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: innerRoot, HostID: hostRoot, Size: 1}, {ContainerID: innerUser, HostID: hostUser, Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: innerRoot, HostID: hostRoot, Size: 1}, {ContainerID: innerUser, HostID: hostUser, Size: 1}},
			// PID 1 keeps the host's uid 0 (unmapped inside) until it has
			// opened the bind sources; ambient capabilities carry its
			// namespace capabilities across the exec meanwhile.
			AmbientCaps: initCaps,
			Pdeathsig:   syscall.SIGKILL,
		},
	}
	if p.cg.v2 {
		p.cmd.SysProcAttr.UseCgroupFD = true
		p.cmd.SysProcAttr.CgroupFD = p.cg.fd
	}

	// Pdeathsig fires when the thread that forked dies, so the fork and the
	// wait share one locked thread that lives as long as the run.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := p.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.cmd.Wait()
		close(p.exited)
	}()
	if err = <-started; err != nil {
		return nil, &SetupError{Step: "start init", Err: err}
	}
	closeAll(childEnds)
	childEnds = nil

	// PID 1 builds the root while (on cgroup v1) the host moves it into the
	// run's cgroup, which can wait several milliseconds for the kernel; it
	// starts the program only after "go".
	if err = json.NewEncoder(cfgW).Encode(cfg); err == nil {
		err = p.cg.join(p.cmd.Process.Pid)
	}
	if err == nil {
		_, err = cfgW.WriteString("go\n")
	}
	if err != nil {
		p.killInit()
		<-p.exited
		return nil, &SetupError{Step: "start init", Err: err}
	}
	cfgW.Close()
	go p.readEvents(statR)
	p.outDone.Add(2)
	p.stdout = capture{max: p.limits.OutputBytes, live: spec.Stdout}
	p.stderr = capture{max: p.limits.OutputBytes, live: spec.Stderr}
	go p.stdout.run(outR, &p.outDone, p.outputExceeded)
	go p.stderr.run(errR, &p.outDone, p.outputExceeded)
	return p, nil
}

func (p *Process) initConfig() *initConfig {
	spec, l := p.spec, p.limits
	cfg := &initConfig{
		Args:     spec.Args,
		Env:      spec.Env,
		Dir:      spec.Dir,
		Hostname: spec.Hostname,
		TmpSize:  l.TmpSize,
		Inodes:   l.Inodes,
		FileSize: l.FileSize,
		NoFile:   l.OpenFiles,
		Stack:    l.Stack,
		CPUSecs:  int64(l.CPUTime/time.Second) + 2,
		Seccomp:  p.e.seccomp,
	}
	if cfg.Dir == "" {
		cfg.Dir = "/work"
	}
	if cfg.Hostname == "" {
		cfg.Hostname = "sandbox"
	}
	for _, m := range spec.Mounts {
		mc := mountConfig{Source: m.Source, Target: m.Target, Writable: m.Writable, Overlay: m.Overlay, Optional: m.Optional}
		if mc.Target == "" {
			mc.Target = m.Source
		}
		cfg.Mounts = append(cfg.Mounts, mc)
	}
	return cfg
}

func validateSpec(spec *Spec) error {
	if spec == nil || len(spec.Args) == 0 || spec.Args[0] == "" {
		return errors.New("sandbox: empty command")
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
	}
	return nil
}

func (p *Process) readEvents(r io.ReadCloser) {
	defer close(p.events)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var ev initEvent
		if json.Unmarshal(sc.Bytes(), &ev) == nil {
			p.events <- ev
		}
	}
}

// hit records the first limit that ends the run and kills it.
func (p *Process) hit(l Limit) {
	p.limitHit.CompareAndSwap(nil, &l)
	p.killInit()
	p.cg.kill()
}

func (p *Process) outputExceeded() { p.hit(LimitOutput) }

func (p *Process) killInit() {
	if p.cmd != nil && p.cmd.Process != nil {
		p.cmd.Process.Signal(syscall.SIGKILL)
	}
}

// Kill ends the run at once; Wait reports it as canceled.
func (p *Process) Kill() { p.hit(LimitCanceled) }

// Wait waits for the run to end, removes the sandbox and returns the result.
// A SetupError means the program never started.
func (p *Process) Wait() (*Result, error) {
	defer p.release()
	if p.stdinW != nil {
		go func() {
			io.Copy(p.stdinW, p.spec.Stdin)
			p.stdinW.Close()
		}()
	}
	// A PID 1 stuck in set-up (it never should be) must not hang the caller.
	setupTimer := time.AfterFunc(setupTimeout, p.killInit)
	ev, ok := <-p.events
	setupTimer.Stop()
	start := time.Now()
	stopWatch := make(chan struct{})
	if ok && ev.Event == "started" {
		p.initCPU = time.Duration(ev.InitCPU) * time.Microsecond
		if !p.cg.v2 { // v1: PID 1 was charged to the run's cgroup only after "go"
			p.initCPU -= time.Duration(ev.InitCPUAtGo) * time.Microsecond
		}
		wall := time.AfterFunc(p.limits.WallTime, func() { p.hit(LimitWallTime) })
		defer wall.Stop()
		go p.watchCPU(stopWatch)
		go func() {
			select {
			case <-p.ctx.Done():
				p.hit(LimitCanceled)
			case <-stopWatch:
			}
		}()
	} else if p.limitHit.Load() == nil {
		<-p.exited
		p.outDone.Wait()
		if ok && ev.Event == "error" {
			return nil, &SetupError{Step: ev.Step, Err: errors.New(ev.Error)}
		}
		return nil, &SetupError{Step: "init", Err: fmt.Errorf("sandbox init ended before the program started: %v", p.cmd.ProcessState)}
	}
	// Otherwise a limit (its output) ended the program before PID 1 could
	// report the start: it ran, and the result says so.

	<-p.exited
	end := time.Now()
	close(stopWatch)
	exit := initEvent{ExitCode: -1, Signal: int(syscall.SIGKILL)}
	for ev := range p.events {
		if ev.Event == "exited" {
			exit = ev
		}
	}
	p.outDone.Wait()

	p.exit = exit
	res := &Result{ExitCode: exit.ExitCode, WallTime: end.Sub(start)}
	if exit.Signal != 0 {
		res.Signal = unix.SignalName(syscall.Signal(exit.Signal))
	}
	usage, err := p.cg.usage()
	if err != nil {
		return nil, &SetupError{Step: "read cgroup usage", Err: err}
	}
	// PID 1's own set-up time is almost all system time.
	res.CPUTime = max(usage.CPU-p.initCPU, 0)
	res.SysTime = min(max(usage.Sys-p.initCPU, 0), res.CPUTime)
	res.UserTime = res.CPUTime - res.SysTime
	res.PeakMemory = usage.PeakMemory
	res.Stdout, res.StdoutTruncated = p.stdout.buf.Bytes(), p.stdout.truncated
	res.Stderr, res.StderrTruncated = p.stderr.buf.Bytes(), p.stderr.truncated
	res.Limit = p.whichLimit(res, usage)
	// Every process is gone (init's exit killed the namespace); the cgroup
	// must be empty before the work dir is read.
	p.cg.kill()
	if err := p.cg.remove(); err != nil {
		return nil, &SetupError{Step: "remove cgroup", Err: err}
	}
	res.Files, res.SkippedFiles = p.work.collect(p.spec.Collect)
	return res, nil
}

func (p *Process) whichLimit(res *Result, u monitor.Usage) Limit {
	if l := p.limitHit.Load(); l != nil {
		if (*l == LimitWallTime || *l == LimitCPUTime) && u.PidsMax > 0 {
			return LimitProcesses // a fork bomb spins until the clock ends it
		}
		return *l
	}
	if res.CPUTime >= p.limits.CPUTime {
		return LimitCPUTime
	}
	failed := res.ExitCode != 0
	switch {
	case u.OOMKills > 0 && failed:
		return LimitMemory
	case res.Signal == "SIGSYS":
		return LimitSeccomp
	case res.Signal == "SIGXFSZ" || res.ExitCode == 128+int(unix.SIGXFSZ):
		return LimitFileSize
	case res.Signal == "SIGXCPU":
		return LimitCPUTime
	case u.PidsMax > 0:
		return LimitProcesses
	case failed && (p.work.full() || p.exit.ScratchFull):
		return LimitDisk
	case failed && max(p.work.largest(), p.exit.ScratchLargest) >= p.limits.FileSize:
		// Programs that ignore SIGXFSZ (CPython does) see EFBIG instead.
		return LimitFileSize
	}
	return LimitNone
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
		left := p.limits.CPUTime - (used - p.initCPU)
		// The cgroup's counter lags each running CPU by up to a scheduler
		// tick and the kill takes a moment to land: ending the run a little
		// early keeps it within 10 ms of the limit on a busy host too.
		if left <= time.Duration(parallel)*cpuKillMargin {
			p.hit(LimitCPUTime)
			return
		}
		t.Reset(max(time.Duration(float64(left)/parallel), 200*time.Microsecond))
	}
}

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

// capture keeps up to max bytes of a stream, passes them on live, and
// drains the rest so the program never blocks on a full pipe.
type capture struct {
	buf       bytes.Buffer
	max       int64
	truncated bool
	live      io.Writer
}

func (c *capture) run(r io.Reader, done *sync.WaitGroup, exceeded func()) {
	defer done.Done()
	b := make([]byte, 64<<10)
	for {
		n, err := r.Read(b)
		if n > 0 {
			keep := min(int64(n), c.max-int64(c.buf.Len()))
			if keep > 0 {
				c.buf.Write(b[:keep])
				if c.live != nil {
					c.live.Write(b[:keep])
				}
			}
			if keep < int64(n) && !c.truncated {
				c.truncated = true
				exceeded()
			}
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
}

func newUIDPool(n int) *uidPool {
	// Start at a random slot so two engines on one host rarely collide.
	off := rand.IntN(n)
	free := make([]int, n)
	for i := range free {
		free[i] = (off + n - 1 - i) % n
	}
	return &uidPool{free: free}
}

func (u *uidPool) get() (int, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.free) == 0 {
		return 0, ErrBusy
	}
	s := u.free[len(u.free)-1]
	u.free = u.free[:len(u.free)-1]
	return s, nil
}

func (u *uidPool) put(s int) {
	u.mu.Lock()
	u.free = append(u.free, s)
	u.mu.Unlock()
}

// SignalNumber returns the number of a signal named like Result.Signal
// ("SIGKILL"), or 0.
func SignalNumber(name string) int { return int(unix.SignalNum(name)) }
