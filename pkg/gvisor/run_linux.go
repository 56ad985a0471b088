package gvisor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
	"golang.org/x/sys/unix"
)

// Runner runs specs under gVisor. Safe for concurrent use.
type Runner struct {
	cfg  Config
	cg   cgroups
	pool pool
	// state is runsc's --root and runs the bundles' directory: this
	// process's own (a pid's), so that the next process on the data dir
	// can clear what one that died left (New).
	state, runs string
	// closing counts the sandboxes being removed after their runs.
	closing sync.WaitGroup
}

// New is a Runner, once runsc is found and its directories made.
func New(cfg Config) (*Runner, error) {
	bin, err := Find(cfg.Runsc)
	if err != nil {
		return nil, err
	}
	cfg.Runsc = bin
	if cfg.Platform == "" {
		cfg.Platform = "systrap"
	}
	if cfg.Dir == "" {
		return nil, errors.New("gvisor: no directory for the runs")
	}
	cg, err := newCgroups(cfg.CgroupParent)
	if err != nil {
		return nil, err
	}
	pid := strconv.Itoa(os.Getpid())
	g := &Runner{cfg: cfg, cg: cg, state: filepath.Join(cfg.Dir, "state", pid), runs: filepath.Join(cfg.Dir, "runs", pid)}
	g.clearStale()
	return g, nil
}

// Close lets go of what runsc left in the runner's directory (the empty
// network namespace it keeps mounted there for --network=none), and of
// the runs' parent cgroup when no other runner's runs are in it.
func (g *Runner) Close() error {
	g.pool.close(g)
	g.closing.Wait()
	err := unmountNetns(g.state)
	os.Remove(g.state)
	os.Remove(g.runs)
	g.cg.removeParent()
	return err
}

// unmountNetns unmounts the empty network namespace runsc keeps mounted
// in its root dir for --network=none: as often as it is mounted there
// (sandboxes booted at once each mount it).
func unmountNetns(root string) error {
	for i := 0; i < 1000; i++ {
		err := syscall.Unmount(filepath.Join(root, "null-netns"), syscall.MNT_DETACH)
		if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOENT) {
			return nil // not mounted (any more)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// clearStale removes what runners of processes that are gone left in the
// directory (a server killed): their containers (sandboxes booted ahead
// run on without their process), their bundles with /work mounted in
// them, runsc's state, and their cgroups.
func (g *Runner) clearStale() {
	for _, area := range []string{"state", "runs"} {
		entries, _ := os.ReadDir(filepath.Join(g.cfg.Dir, area))
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) == nil {
				continue
			}
			dir := filepath.Join(g.cfg.Dir, area, e.Name())
			if area == "state" {
				out, _ := exec.Command(g.cfg.Runsc, "--root", dir, "list", "--quiet").Output()
				for _, id := range strings.Fields(string(out)) {
					exec.Command(g.cfg.Runsc, "--root", dir, "kill", "--all", id, "KILL").Run()
					exec.Command(g.cfg.Runsc, "--root", dir, "delete", "--force", id).Run()
				}
				unmountNetns(dir)
			} else {
				boxes, _ := os.ReadDir(dir)
				for _, b := range boxes {
					syscall.Unmount(filepath.Join(dir, b.Name(), "work"), syscall.MNT_DETACH)
					sandbox.RemoveNetns(filepath.Join(dir, b.Name(), "netns"))
				}
				g.cg.clearStale(pid)
			}
			os.RemoveAll(dir)
		}
	}
}

// Runsc is the binary the runner runs.
func (g *Runner) Runsc() string { return g.cfg.Runsc }

// Run runs spec under gVisor and returns its result, with the same
// meaning of every field, limit and status as sandbox.Engine.Run. Spec
// fields that need the native engine (PTY, Detachable) are refused. A
// Spec.Network is tun0 in a network namespace the run's sandbox is made
// in, whose addresses and routes runsc copies into gVisor's own network
// stack (--network=sandbox); its host end is attached as the engine's is. A sandbox booted ahead for specs
// like it (Config.Pool) runs it when there is one; else one is booted.
func (g *Runner) Run(ctx context.Context, spec *sandbox.Spec) (*sandbox.Result, error) {
	switch {
	case spec.PTY || spec.Detachable || spec.FilesFrom != "":
		return nil, errors.New("gvisor: this run needs the native engine (a terminal, detachable, or files from a directory)")
	case (spec.Stream || spec.ResultOut != nil || spec.ResultPipe) && !shimRuns(spec):
		return nil, errors.New("gvisor: a streamed run or a result pipe needs the shim (this process did not call gvisor.ShimMain, or the run's root is an image's)")
	case len(spec.Args) == 0:
		return nil, errors.New("gvisor: no program")
	}
	l := spec.Limits.WithDefaults()
	if b := g.pool.take(g, spec, l); b != nil {
		return g.runPooled(ctx, b, spec, l)
	}
	if shimRuns(spec) {
		// The shim starts the program here too, so that it runs as it
		// does in a sandbox booted ahead (not as PID 1; its end said
		// exactly).
		b, err := g.boot(spec, l, "")
		if err != nil {
			return nil, &sandbox.SetupError{Step: "runsc", Err: err}
		}
		return g.runPooled(ctx, b, spec, l)
	}
	b, err := g.newBox(spec, l, spec.Files, false)
	if err != nil {
		return nil, err
	}
	defer b.close(g)
	if err := b.attach(spec); err != nil {
		return nil, err
	}
	start := time.Now()
	w := g.watch(ctx, b, l, 0)
	stdout, stderr := w.captures(spec, l)
	cmd := exec.Command(g.cfg.Runsc, g.runArgs(b, "run", "--bundle", b.bundle, b.id)...)
	cmd.Dir = b.bundle
	cmd.Stdin = spec.Stdin
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	waited, err := startHeld(cmd)
	if err != nil {
		w.stop()
		return nil, &sandbox.SetupError{Step: "runsc", Err: err}
	}
	werr := <-waited
	// runsc run exits as a shell says a status: 128 plus the signal that
	// ended the program (so a program's own exit(130) reads as SIGINT
	// here; a sandbox booted ahead says which it was).
	exit, sig := 0, syscall.Signal(0)
	var ee *exec.ExitError
	switch {
	case errors.As(werr, &ee):
		exit = ee.ExitCode()
		if st, ok := ee.Sys().(syscall.WaitStatus); ok && st.Signaled() {
			sig = st.Signal() // runsc itself
		} else if exit > 128 && exit < 160 {
			sig = syscall.Signal(exit - 128)
		}
	case werr != nil:
		w.stop()
		return nil, &sandbox.SetupError{Step: "runsc", Err: werr}
	}
	limit := w.stop()
	b.detachNetwork()
	return g.result(b, spec, l, limit, exit, sig, time.Since(start), 0, stdout, stderr), nil
}

// watcher ends a run at its limits: its wall time, its CPU time, its
// output, its caller's context.
type watcher struct {
	mu    sync.Mutex
	limit sandbox.Limit
	done  chan struct{}
	ended chan struct{}
	kill  func(sandbox.Limit)
}

// watch watches b's run (its CPU time counted from cpuBase) until stop.
func (g *Runner) watch(ctx context.Context, b *box, l sandbox.Limits, cpuBase time.Duration) *watcher {
	w := &watcher{done: make(chan struct{}), ended: make(chan struct{})}
	kill := func(why sandbox.Limit) {
		w.mu.Lock()
		if w.limit == "" {
			w.limit = why
		}
		w.mu.Unlock()
		// At once: gVisor's own processes, from their cgroup (runsc
		// kill would start a process first, while the run burns on).
		b.cg.killAll()
		g.kill(b.id)
	}
	w.kill = kill
	go func() {
		defer close(w.ended)
		wall := time.NewTimer(l.WallTime)
		defer wall.Stop()
		// The CPU time is checked when the run could have used up what
		// is left of it at the soonest (all the host's CPUs burning), as
		// the engine does: the kill lands within a millisecond or so of
		// the limit, and nothing polls a run that sleeps.
		parallel := time.Duration(runtime.NumCPU())
		check := time.NewTimer(0)
		defer check.Stop()
		for {
			select {
			case <-w.done:
				return
			case <-ctx.Done():
				kill(sandbox.LimitCanceled)
				return
			case <-wall.C:
				kill(sandbox.LimitWallTime)
				return
			case <-check.C:
				used := b.cg.cpu() - cpuBase
				if used >= l.CPUTime {
					kill(sandbox.LimitCPUTime)
					return
				}
				check.Reset(max((l.CPUTime-used)/parallel, time.Millisecond))
			}
		}
	}()
	return w
}

// captures are what the run keeps of its stdout and stderr: past the
// output limit, the run is ended.
func (w *watcher) captures(spec *sandbox.Spec, l sandbox.Limits) (stdout, stderr *sandbox.Capture) {
	over := func() { w.kill(sandbox.LimitOutput) }
	return &sandbox.Capture{Max: l.OutputBytes, Live: spec.Stdout, Budget: spec.Budget, Stream: spec.Stream, Exceeded: over},
		&sandbox.Capture{Max: l.OutputBytes, Live: spec.Stderr, Budget: spec.Budget, Stream: spec.Stream, Exceeded: over}
}

// stop stops watching and says which limit ended the run, if one did.
func (w *watcher) stop() sandbox.Limit {
	close(w.done)
	<-w.ended
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.limit
}

// result is the result of b's run whose program exited with exit, or was
// ended by signal sig (not 0), limit if one ended it.
func (g *Runner) result(b *box, spec *sandbox.Spec, l sandbox.Limits, limit sandbox.Limit, exit int, sig syscall.Signal, wall, cpuBase time.Duration, stdout, stderr *sandbox.Capture) *sandbox.Result {
	res := &sandbox.Result{WallTime: wall, ExitCode: exit}
	res.CPUTime = max(b.cg.cpu()-cpuBase, 0)
	res.UserTime, res.SysTime = b.cg.userSys()
	// The cgroup's peak counts the kernel's pages of gVisor's own beside
	// the program's: it is never more than the limit the program had.
	res.PeakMemory = min(b.cg.peak(), l.Memory)
	if sig != 0 {
		res.ExitCode, res.Signal = -1, signalName(sig)
	}
	res.Limit = sandbox.WhichLimit(sandbox.LimitFacts{Hit: limit, Result: res, Limits: l,
		OOMKilled: b.cg.oomKilled(), PidsRefused: b.cg.pidsRefused(),
		DiskFull: func() bool { return b.work.Full() || b.tmp.Full() || b.shm.Full() },
		Largest:  func() int64 { return max(b.work.Largest(), b.tmp.Largest(), b.shm.Largest()) }})
	res.Stdout, res.StdoutTruncated = stdout.Bytes()
	res.Stderr, res.StderrTruncated = stderr.Bytes()
	res.Files, res.SkippedFiles = b.work.Collect(spec.Collect, spec.Budget)
	return res
}

// runArgs is runsc's arguments to run b: its global flags (b's network:
// the namespace it was made in, or none), then args.
func (g *Runner) runArgs(b *box, args ...string) []string {
	network := "none"
	if b.netns != "" {
		network = "sandbox"
	}
	return append([]string{"--root", g.state, "--platform", g.cfg.Platform, "--network", network}, args...)
}

// attach hands the host's end of b's tun0 to spec's network (the
// egress that serves it), when it has one.
func (b *box) attach(spec *sandbox.Spec) error {
	if b.tun == nil || spec.Network == nil {
		return nil
	}
	tun := b.tun
	b.tun = nil
	detach, err := spec.Network.Attach(tun)
	if err != nil {
		return &sandbox.SetupError{Step: "network", Err: err}
	}
	b.detach = detach
	return nil
}

// detachNetwork stops serving b's network once its run is over, so that
// what the egress reports is all it did.
func (b *box) detachNetwork() {
	if b.detach != nil {
		b.detach()
		b.detach = nil
	}
}

// box is one sandbox's bundle, /work and cgroup, and when booted ahead
// the container's stdio (our ends) and the runsc wait that hears its end.
type box struct {
	id, bundle, key string
	work, tmp, shm  *sandbox.Work
	overlays        []*sandbox.Overlay
	cg              *runCgroup
	in, out, err    *os.File
	status, result  *os.File // the shim's report, the result pipe (runs the shim starts)
	booted          time.Time
	// netns keeps the network namespace of a run with a network (its
	// sandbox is made in it); tun is the host's end of its tun0 until
	// the run's network is attached, detach what ends that.
	netns  string
	tun    *os.File
	detach func()
	// live is a live sandbox's directory (makeBox).
	live string
}

// newBox makes a sandbox's bundle for spec: its /work with files, its
// cgroup with l's limits, its config.json (the program spec's, or the
// shim for a sandbox booted ahead).
func (g *Runner) newBox(spec *sandbox.Spec, l sandbox.Limits, files []sandbox.File, shim bool) (_ *box, err error) {
	return g.makeBox(spec, l, files, shim, false)
}

// makeBox is newBox, or with live a live sandbox's box (StartLive): its
// bundle, runsc state and /work, /tmp and /dev/shm mounted in a directory
// of its own under liveDir, to outlive this process.
func (g *Runner) makeBox(spec *sandbox.Spec, l sandbox.Limits, files []sandbox.File, shim, live bool) (_ *box, err error) {
	b := &box{id: fmt.Sprintf("sr%d-%s", os.Getpid(), randomHex(6))}
	b.bundle = filepath.Join(g.runs, b.id)
	dirs := []string{g.state, g.runs}
	if live {
		b.id = "srl-" + randomHex(8)
		b.live = filepath.Join(g.liveDir(), b.id)
		b.bundle = filepath.Join(b.live, "bundle")
		dirs = []string{filepath.Join(b.live, "state")}
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, &sandbox.SetupError{Step: "bundle", Err: err}
		}
	}
	if err := sandbox.WriteEtc(filepath.Join(b.bundle, "rootfs", "etc")); err != nil {
		return nil, &sandbox.SetupError{Step: "bundle", Err: err}
	}
	defer func() {
		if err != nil {
			b.close(g)
		}
	}()
	if h := spec.Home; h != "" && spec.Root == "" {
		// The sandbox's home is a link to /work, as the engine makes it.
		link := filepath.Join(b.bundle, "rootfs", h)
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			return nil, &sandbox.SetupError{Step: "bundle", Err: err}
		}
		if err := os.Symlink("/work", link); err != nil {
			return nil, &sandbox.SetupError{Step: "bundle", Err: err}
		}
	}
	at := func(name string) string { // where a live box's tmpfs is mounted
		if b.live == "" {
			return ""
		}
		return filepath.Join(b.live, name)
	}
	if b.work, err = sandbox.NewWork(at("work"), l, uid, files); err != nil {
		return nil, err
	}
	// /tmp and /dev/shm are the host's tmpfs too, as the engine's are:
	// bounded, and read afterwards for a disk filled up.
	scratch := l
	scratch.WorkSize = l.TmpSize
	for i, w := range []**sandbox.Work{&b.tmp, &b.shm} {
		if *w, err = sandbox.NewWork(at(liveTrees[i+1]), scratch, uid, nil); err != nil {
			return nil, err
		}
	}
	if b.cg, err = g.cg.create(b.id, l); err != nil {
		return nil, &sandbox.SetupError{Step: "cgroup", Err: err}
	}
	// A mount's Overlay: the engine's private writable view, made on the
	// host, bounded as /work is.
	sources := make([]string, len(spec.Mounts))
	for i, m := range spec.Mounts {
		sources[i] = m.Source
		if !m.Overlay {
			continue
		}
		o, err := sandbox.NewOverlay(m.Source, l.WorkSize, uid)
		if err != nil {
			return nil, err
		}
		b.overlays = append(b.overlays, o)
		sources[i] = o.Dir()
	}
	if spec.Network != nil {
		b.netns = filepath.Join(b.bundle, "netns")
		if b.tun, err = sandbox.NewNetns(b.netns, spec.Network); err != nil {
			b.netns = ""
			return nil, &sandbox.SetupError{Step: "network", Err: err}
		}
	}
	s := spec
	if shim {
		exe, err := os.Executable()
		if err != nil {
			return nil, &sandbox.SetupError{Step: "bundle", Err: err}
		}
		cp := *spec
		cp.Args, cp.Env, cp.Dir = []string{shimPath}, []string{EnvShim + "=1"}, "/"
		cp.Mounts = append(append([]sandbox.Mount{}, spec.Mounts...), sandbox.Mount{Source: exe, Target: shimPath})
		s = &cp
	}
	conf, err := ociSpec(bundleSpec{spec: s, sources: sources, shim: shim, limits: l, bundle: b.bundle,
		scratch:     map[string]string{"/work": b.work.Dir(), "/tmp": b.tmp.Dir(), "/dev/shm": b.shm.Dir()},
		cgroupsPath: g.cg.path(b.id), netns: b.netns})
	if err != nil {
		return nil, &sandbox.SetupError{Step: "bundle", Err: err}
	}
	if err := os.WriteFile(filepath.Join(b.bundle, "config.json"), conf, 0o600); err != nil {
		return nil, &sandbox.SetupError{Step: "bundle", Err: err}
	}
	return b, nil
}

// close removes what b's run left: the container, the cgroup, /work and
// the bundle.
func (b *box) close(g *Runner) {
	if b.live != "" {
		exec.Command(g.cfg.Runsc, "--root", filepath.Join(b.live, "state"), "delete", "--force", b.id).Run()
	} else {
		g.delete(b.id)
	}
	for _, f := range []*os.File{b.in, b.out, b.err, b.status, b.result} {
		if f != nil {
			f.Close()
		}
	}
	if b.cg != nil {
		b.cg.remove()
	}
	for _, w := range []*sandbox.Work{b.work, b.tmp, b.shm} {
		if w != nil {
			w.Close()
		}
	}
	for _, o := range b.overlays {
		o.Close()
	}
	b.detachNetwork()
	if b.tun != nil {
		b.tun.Close()
	}
	if b.netns != "" {
		sandbox.RemoveNetns(b.netns)
	}
	if b.live != "" {
		removeLiveDir(b.live)
		return
	}
	os.RemoveAll(b.bundle)
}

// shimRuns says whether the shim can start spec's program: this process
// called ShimMain, and the run's root is the host's system (the shim is
// this binary, linked against the host's libraries; an image's root has
// its own).
func shimRuns(spec *sandbox.Spec) bool { return shimReady.Load() && spec.Root == "" }

// startHeld starts cmd, whose SysProcAttr asks for Pdeathsig, and
// returns what its Wait returns when it ends. Pdeathsig fires when the
// thread that forked ends, not the process, and the Go runtime ends
// threads (one that a goroutine leaves locked: the engine's namespace
// work does), which would kill cmd mid-run: the fork and the wait share
// a locked thread that lives as long as cmd (as the engine's PID 1 does).
func startHeld(cmd *exec.Cmd) (<-chan error, error) {
	started, waited := make(chan error, 1), make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		waited <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return waited, nil
}

// kill ends run id's every process.
func (g *Runner) kill(id string) {
	exec.Command(g.cfg.Runsc, "--root", g.state, "kill", "--all", id, "KILL").Run()
}

// delete removes run id's container state (it is usually gone already).
func (g *Runner) delete(id string) {
	exec.Command(g.cfg.Runsc, "--root", g.state, "delete", "--force", id).Run()
}

// signalName is the name the engine gives signal s ("SIGKILL").
func signalName(s syscall.Signal) string {
	if n := unix.SignalName(s); n != "" {
		return n
	}
	return fmt.Sprintf("signal %d", int(s))
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// bundleSpec is what a run's OCI configuration is made of.
type bundleSpec struct {
	spec *sandbox.Spec
	// sources are the spec's mounts' sources (an overlay's: its view; the
	// first of a shim's extra mounts past them: their own).
	sources []string
	shim    bool // the program is the shim, gVisor's root
	limits  sandbox.Limits
	bundle  string
	scratch map[string]string // /work, /tmp, /dev/shm: their host directories
	// cgroupsPath is the run's cgroup; netns the network namespace it is
	// made in ("": a new one, empty).
	cgroupsPath, netns string
}

// ociSpec is the OCI runtime configuration of a run.
func ociSpec(bs bundleSpec) ([]byte, error) {
	spec, sources, shim, l, bundle, scratch := bs.spec, bs.sources, bs.shim, bs.limits, bs.bundle, bs.scratch
	type mount struct {
		Destination string   `json:"destination"`
		Type        string   `json:"type"`
		Source      string   `json:"source"`
		Options     []string `json:"options,omitempty"`
	}
	mounts := []mount{{"/proc", "proc", "proc", []string{"nosuid", "nodev", "noexec"}}}
	for i, m := range spec.Mounts {
		target := m.Target
		if target == "" {
			target = m.Source
		}
		source := m.Source
		if i < len(sources) {
			source = sources[i]
		}
		if _, err := os.Stat(source); err != nil {
			if m.Optional {
				continue
			}
			return nil, fmt.Errorf("mount %s: %w", m.Source, err)
		}
		opts := []string{"rbind", "ro", "nosuid", "nodev"}
		if m.Writable || m.Overlay {
			opts[1] = "rw"
		}
		mounts = append(mounts, mount{target, "bind", source, opts})
	}
	for _, dir := range []string{"/work", "/tmp", "/dev/shm"} {
		mounts = append(mounts, mount{dir, "bind", scratch[dir], []string{"rbind", "rw", "nosuid", "nodev"}})
	}
	if h := spec.Home; h != "" && spec.Root != "" {
		// In an image's root (read-only, not the bundle's: no link to
		// /work can be made there) the home is /work mounted again.
		mounts = append(mounts, mount{h, "bind", scratch["/work"], []string{"rbind", "rw", "nosuid", "nodev"}})
	}
	root := filepath.Join(bundle, "rootfs")
	if spec.Root != "" {
		root = spec.Root
	}
	dir := spec.Dir
	if dir == "" {
		dir = "/work"
	}
	env := spec.Env
	if env == nil {
		env = []string{}
	}
	type rlimit struct {
		Type string `json:"type"`
		Hard uint64 `json:"hard"`
		Soft uint64 `json:"soft"`
	}
	cpu := uint64(sandbox.CPUBackstop(l.CPUTime))
	rl := []rlimit{
		{"RLIMIT_NOFILE", uint64(l.OpenFiles), uint64(l.OpenFiles)},
		{"RLIMIT_FSIZE", uint64(l.FileSize), uint64(l.FileSize)},
		{"RLIMIT_STACK", uint64(l.Stack), uint64(l.Stack)},
		// gVisor lets a user have one task past RLIMIT_NPROC; the engine's
		// limit counts them all.
		{"RLIMIT_NPROC", uint64(l.Processes - 1), uint64(l.Processes - 1)},
		// As the engine's: no core files, no locked memory, and RLIMIT_CPU a
		// backstop behind the watcher.
		{"RLIMIT_CORE", 0, 0},
		{"RLIMIT_MEMLOCK", 64 << 10, 64 << 10},
		{"RLIMIT_CPU", cpu, cpu},
	}
	hostname := spec.Hostname
	if hostname == "" {
		hostname = "sandbox"
	}
	process := map[string]any{
		"terminal": false, "user": map[string]int{"uid": uid, "gid": uid}, "args": spec.Args, "env": env, "cwd": dir,
		"noNewPrivileges": true, "rlimits": rl,
	}
	// The program has no capability; the shim is gVisor's root with only
	// what it takes to start the program as the sandbox's user, which the
	// program keeps in its bounding set only (it can never use them: it is
	// not root, NoNewPrivs is set and every mount is nosuid).
	process["capabilities"] = map[string][]string{"bounding": {}, "effective": {}, "permitted": {}, "inheritable": {}, "ambient": {}}
	if shim {
		caps := []string{"CAP_SETUID", "CAP_SETGID"}
		process["user"] = map[string]int{"uid": 0, "gid": 0}
		process["capabilities"] = map[string][]string{"bounding": caps, "effective": caps, "permitted": caps}
	}
	network := map[string]string{"type": "network"}
	if bs.netns != "" {
		network["path"] = bs.netns
	}
	conf := map[string]any{
		"ociVersion": "1.0.0",
		"process":    process,
		"root":       map[string]any{"path": root, "readonly": true},
		"hostname":   hostname,
		"mounts":     mounts,
		"linux": map[string]any{
			"cgroupsPath": bs.cgroupsPath,
			"namespaces": []map[string]string{{"type": "pid"}, network, {"type": "ipc"}, {"type": "uts"},
				{"type": "mount"}},
		},
	}
	return json.MarshalIndent(conf, "", " ")
}

// killPid kills a process left in a run's cgroup (runsc's own, once the
// run is over).
func killPid(pid int) { syscall.Kill(pid, syscall.SIGKILL) }
