package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A container is a built sandbox: PID 1 in its namespaces with the root
// assembled, waiting on its control socket for runs, one at a time. Each
// run gets a fresh cgroup, fresh /work, /tmp and /dev/shm, and new mount,
// IPC and cgroup namespaces; after it, PID 1 kills and reaps every process
// of the run and checks the network namespace is empty. Only then may the
// container serve again (see pool).
type container struct {
	e        *Engine
	key      string // pool key; "" when it must not be reused
	slot     int
	hostRoot int
	hostUser int
	cg       *ctCgroup
	cmd      *exec.Cmd
	ctl      *controlConn
	events   chan initEvent
	exited   chan struct{} // closed once PID 1 is reaped
	runs     int
	idle     time.Time // when it went back to the pool
	// nextFS are the next run's filesystems, made ahead (see prepareFS);
	// keptFS the last run's, still mounted in the sandbox and emptied, for
	// the next run of keptTenant (see keepFS); fsDropped says none may be
	// kept any more.
	fsMu       sync.Mutex
	nextFS     *runFS
	keptFS     *runFS
	keptTenant string
	fsDropped  bool
	// verdictDue says PID 1's "reset" event of the last run is still to
	// be read (see settle); unfit that it said the sandbox is not clean.
	verdictDue, unfit bool
	// served says a run was started here; tenant is the last run's
	// Spec.Tenant. A run of another tenant has PID 1 check the counters
	// the namespaces keep first (see checkFor).
	served   bool
	tenant   string
	killOnce sync.Once
	// destroyed makes destroy idempotent: a second one would close
	// descriptor numbers that may by then be someone else's and free the
	// uid slot twice (two sandboxes on one uid).
	destroyed sync.Once
	// cleaning is the clean-up of the last run (its cgroup and mounts,
	// freed in the background after the result): the cgroup is removed
	// through the sandbox's directories, which destroy closes, so destroy
	// waits for it first.
	cleaning sync.WaitGroup
}

// maxRunsPerContainer retires a container after this many runs, a bound on
// whatever PID 1 might accumulate. Its own CPU time, which counts against
// the RLIMIT_CPU it shares with the runs, retires it sooner when it must
// (see initSandbox.reset).
const maxRunsPerContainer = 20000

// startContainer builds a sandbox for cfg and waits until it is ready. On
// failure the half-built sandbox is already destroyed and nil returned.
func (e *Engine) startContainer(cfg *initConfig, key string) (*container, error) {
	c, err := e.buildContainer(cfg, key, true)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// buildContainer builds a sandbox for cfg. With no uid slot free, idle
// sandboxes of the pool are destroyed for one, and with evictWarm those
// built ahead for Detachable specs too (never for a refill of those).
func (e *Engine) buildContainer(cfg *initConfig, key string, evictWarm bool) (c *container, err error) {
	c = &container{e: e, key: key, events: make(chan initEvent, 8), exited: make(chan struct{})}
	c.slot, err = e.uids.get()
	for errors.Is(err, ErrBusy) && (e.pool.evict() || evictWarm && e.warm.evict()) {
		c.slot, err = e.uids.get()
	}
	if err != nil {
		return nil, err
	}
	c.hostRoot = e.cfg.UIDBase + 2*c.slot
	c.hostUser = c.hostRoot + 1
	defer func() {
		if err != nil {
			c.destroy()
		}
	}()
	name := fmt.Sprintf("ct-%d-%d", os.Getpid(), runSeq.Add(1))
	if cfg.Detachable {
		// Random: the next engine process may have this one's pid, and
		// its sandboxes must not collide with those left running.
		name = fmt.Sprintf("ct-%d-%s%016x", os.Getpid(), detachableMark, rand.Uint64())
	}
	if c.cg, err = e.cg.createSandbox(name, c.hostRoot, cfg.Detachable); err != nil {
		return c, &SetupError{Step: "cgroup", Err: err}
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return c, &SetupError{Step: "control socket", Err: err}
	}
	// Run requests carry argv and environment: room for the largest.
	unix.SetsockoptInt(pair[0], unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 2*maxControlMessage)
	c.ctl = &controlConn{fd: pair[0], size: 64 << 10}
	if err := c.ctl.poll(); err != nil {
		unix.Close(pair[0])
		unix.Close(pair[1])
		c.ctl = nil
		return c, &SetupError{Step: "control socket", Err: err}
	}
	childSock := os.NewFile(uintptr(pair[1]), "control")
	defer childSock.Close()
	devNull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return c, &SetupError{Step: "start init", Err: err}
	}
	defer devNull.Close()
	// The binary is executed through a descriptor the engine holds, so a
	// replaced or unreadable path on disk does not matter.
	extra := []*os.File{childSock, e.exeFile}
	// Two Ps: with one, each blocking call of PID 1 (recvmsg, wait4,
	// umount) had the runtime's sysmon take the P and wake a spinning
	// thread, a dozen wake-ups a run (docs/BENCHMARKS.md).
	initEnv := []string{"GOMAXPROCS=2"}
	if e.coverDir != nil {
		extra = append(extra, e.coverDir)
		initEnv = append(initEnv, "GOCOVERDIR=/proc/self/fd/"+strconv.Itoa(fdCover))
	}
	ids := func() []syscall.SysProcIDMap {
		return []syscall.SysProcIDMap{{ContainerID: innerRoot, HostID: c.hostRoot, Size: 1}, {ContainerID: innerUser, HostID: c.hostUser, Size: 1}}
	}
	c.cmd = &exec.Cmd{
		Path:       "/proc/self/fd/" + strconv.Itoa(fdExe),
		Args:       []string{initArg0},
		Env:        initEnv,
		Stdin:      devNull,
		Stdout:     devNull,
		Stderr:     devNull,
		ExtraFiles: extra,
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNS |
				syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS,
			UidMappings: ids(),
			GidMappings: ids(),
			// PID 1 keeps the host's uid 0 (unmapped inside) until it has
			// opened the bind sources; ambient capabilities carry its
			// namespace capabilities across the exec meanwhile.
			AmbientCaps: initCaps,
			// A detachable sandbox watches its control socket instead
			// (initSandbox.watchHost).
			Pdeathsig: pdeathsig(cfg),
			// A session of its own: Ctrl-C on the caller's terminal
			// (SIGINT to the foreground process group) must not kill
			// pooled sandboxes under `serve` or a REPL; the caller
			// decides what its own interrupt ends.
			Setsid: true,
		},
	}
	if e.cg.v2 {
		c.cmd.SysProcAttr.UseCgroupFD = true
		c.cmd.SysProcAttr.CgroupFD = c.cg.fd
	}
	// Pdeathsig fires when the thread that forked dies, so the fork and the
	// wait share one locked thread that lives as long as the container.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := c.cmd.Start(); err != nil {
			started <- err
			close(c.exited)
			return
		}
		started <- nil
		c.cmd.Wait()
		close(c.exited)
	}()
	if err = <-started; err != nil {
		c.cmd = nil
		return c, &SetupError{Step: "start init", Err: err}
	}
	childSock.Close()
	go c.readEvents()
	// On v1 PID 1's thread that forks programs steps back into the
	// sandbox's own cgroups through these.
	var ctTasks []int
	runDirs := make(map[string]int, len(v1RunControllers))
	for _, ctrl := range v1RunControllers {
		if c.cg.dfd != nil {
			runDirs[ctrl] = c.cg.dfd[ctrl]
		}
	}
	// One tasks file per hierarchy: co-mounted controllers share it.
	for _, dfd := range distinctFDs(runDirs) {
		fd, err := unix.Openat(dfd, "tasks", unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return c, &SetupError{Step: "cgroup", Err: err}
		}
		defer unix.Close(fd)
		ctTasks = append(ctTasks, fd)
	}
	if err = c.ctl.send(cfg, ctTasks...); err != nil {
		return c, &SetupError{Step: "start init", Err: err}
	}
	// On cgroup v1 the host moves PID 1 into the sandbox's cgroups while it
	// builds the root; that can wait several milliseconds for the kernel.
	// On v2 PID 1 first makes its cgroup namespace, rooted where it was
	// born, and is moved below that afterwards.
	if !e.cg.v2 {
		if err = c.cg.settle(c.cmd.Process.Pid); err != nil {
			// PID 1 may have ended first, on an error of its own.
			return c, c.initError(&SetupError{Step: "cgroup", Err: err})
		}
		// PID 1 waits for this to start its spawner thread (see
		// sandboxInit), which joins the sandbox's CPU cgroups through fds.
		fds, err := c.cg.spawnerTasks()
		if err != nil {
			return c, &SetupError{Step: "cgroup", Err: err}
		}
		err = c.ctl.send(cgroupSettled{ThreadCPU: c.cg.cpuOnly("cpuacct")}, fds...)
		closeFDs(fds)
		if err != nil {
			return c, &SetupError{Step: "start init", Err: err}
		}
	}
	timeout := time.AfterFunc(setupTimeout, c.kill)
	defer timeout.Stop()
	for {
		ev, ok := <-c.events
		switch {
		case !ok:
			return c, &SetupError{Step: "init", Err: fmt.Errorf("sandbox init ended while building: %v", c.state())}
		case ev.Event == "error":
			return c, &SetupError{Step: ev.Step, Err: errors.New(ev.Error)}
		case ev.Event == "cgroupns":
			if err = c.cg.settle(c.cmd.Process.Pid); err != nil {
				return c, &SetupError{Step: "cgroup", Err: err}
			}
		case ev.Event == "ready":
			return c, nil
		}
	}
}

// pdeathsig is the signal PID 1 gets when the host dies: SIGKILL, but
// for a detachable sandbox, which may outlive it.
func pdeathsig(cfg *initConfig) syscall.Signal {
	if cfg.Detachable {
		return 0
	}
	return syscall.SIGKILL
}

// initError is the error PID 1 reported while building, when it reports
// one before it ends (within a second), else fallback.
func (c *container) initError(fallback error) error {
	timer := time.NewTimer(time.Second)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-c.events:
			switch {
			case !ok:
				return fallback
			case ev.Event == "error":
				return &SetupError{Step: ev.Step, Err: errors.New(ev.Error)}
			}
		case <-timer.C:
			return fallback
		}
	}
}

// state describes how PID 1 ended, once it has.
func (c *container) state() string {
	select {
	case <-c.exited:
		if c.cmd != nil && c.cmd.ProcessState != nil {
			return c.cmd.ProcessState.String()
		}
	default:
	}
	return "running"
}

func (c *container) readEvents() {
	defer close(c.events)
	for {
		var ev initEvent
		fds, err := c.ctl.recv(&ev)
		for _, fd := range fds {
			unix.Close(fd) // PID 1 sends none; never keep what comes
		}
		if err != nil {
			return
		}
		c.events <- ev
	}
}

// alive says whether PID 1 is still there.
func (c *container) alive() bool {
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

// next returns PID 1's next event; false means it is gone.
func (c *container) next() (initEvent, bool) {
	ev, ok := <-c.events
	return ev, ok
}

// takeFS returns the filesystems for a run of tenant with the limits l:
// the last run's, kept mounted (kept true), when they were the tenant's and
// have the sizes l asks for; else those made ahead if they have them; else
// nil. Kept ones that do not fit are closed: the run's new ones replace
// them in the sandbox.
func (c *container) takeFS(l Limits, tenant string) (fs *runFS, kept bool) {
	c.fsMu.Lock()
	if k := c.keptFS; k != nil {
		c.keptFS = nil
		if k.fits(l) && c.keptTenant == tenant {
			c.fsMu.Unlock()
			return k, true
		}
		defer k.close()
	}
	fs = c.nextFS
	c.nextFS = nil
	c.fsMu.Unlock()
	if fs != nil && !fs.fits(l) {
		fs.close()
		return nil, false
	}
	return fs, false
}

// keepFS keeps fs, a finished run's filesystems that PID 1 still has
// mounted, emptied (runFS.wipe), for the next run of tenant.
func (c *container) keepFS(fs *runFS, tenant string) {
	c.fsMu.Lock()
	old := c.keptFS
	if c.fsDropped {
		old = fs
	} else {
		c.keptFS, c.keptTenant = fs, tenant
	}
	c.fsMu.Unlock()
	if old != nil {
		old.close()
	}
}

// prepareFS makes the next run's filesystems ahead, with the sizes of l
// (the last run's), off the path of any run: with the cgroups (see
// ctCgroup.prepareNext) they are most of what starting a run costs.
func (c *container) prepareFS(l Limits) {
	c.fsMu.Lock()
	busy := c.nextFS != nil || c.keptFS != nil || c.fsDropped
	c.fsMu.Unlock()
	if busy {
		return
	}
	fs, err := newRunFS(l, c.hostRoot, c.hostUser)
	if err != nil {
		return // the run makes its own, and says why if it cannot
	}
	c.fsMu.Lock()
	if c.nextFS == nil && !c.fsDropped {
		c.nextFS, fs = fs, nil
	}
	c.fsMu.Unlock()
	if fs != nil {
		fs.close()
	}
}

// dropFS closes the filesystems made ahead and kept; none are kept after.
func (c *container) dropFS() {
	c.fsMu.Lock()
	fs, kept := c.nextFS, c.keptFS
	c.nextFS, c.keptFS, c.fsDropped = nil, nil, true
	c.fsMu.Unlock()
	for _, f := range []*runFS{fs, kept} {
		if f != nil {
			f.close()
		}
	}
}

// settled says whether PID 1's verdict on the last run is in (and read),
// without waiting for it.
func (c *container) settled() bool {
	if !c.verdictDue {
		return true
	}
	select {
	case ev, ok := <-c.events:
		// Nothing comes between a run's end and its verdict.
		c.takeVerdict(ev, ok)
		return true
	default:
		return false
	}
}

// settle reads PID 1's verdict on the last run if it is still due, and
// says whether the container may serve again.
func (c *container) settle() bool {
	if c.verdictDue {
		c.takeVerdict(c.awaitReset())
	}
	return !c.unfit
}

// takeVerdict records PID 1's verdict on the last run: anything but a
// clean "reset" event makes the container unfit to serve again.
func (c *container) takeVerdict(ev initEvent, ok bool) {
	c.verdictDue, c.unfit = false, !ok || ev.Event != "reset" || !ev.Clean
}

// checkFor says whether the sandbox may serve a run of tenant: any after
// its own runs; another tenant's once PID 1 finds the counters its
// network namespace keeps (counterFiles) as a fresh sandbox's. A run
// moves them with every packet on lo and every socket error, which would
// tell the next run, maybe another client's, what it did; between one
// tenant's runs they tell nothing that tenant did not do, so PID 1 reads
// them only when the tenant changes (four /proc files formatted anew,
// which cost a few percent of a short run's CPU when read after every run).
func (c *container) checkFor(tenant string) bool {
	if !c.served || c.tenant == tenant {
		return true
	}
	if c.ctl.send(runRequest{CheckCounters: true}) != nil {
		return false
	}
	c.verdictDue = true
	return c.settle()
}

// awaitReset reads PID 1's events up to its verdict on the last run (the
// "reset" event); false when PID 1 is gone, or was stuck and killed.
func (c *container) awaitReset() (initEvent, bool) {
	timer := time.AfterFunc(stuckTimeout, c.kill)
	defer timer.Stop()
	for {
		ev, ok := c.next()
		if !ok || ev.Event == "reset" {
			return ev, ok
		}
	}
}

// kill ends PID 1 and with it everything in the sandbox.
func (c *container) kill() {
	c.killOnce.Do(func() {
		if c.cmd != nil && c.cmd.Process != nil {
			c.cmd.Process.Signal(syscall.SIGKILL)
		}
		if c.ctl != nil {
			// Wakes the event reader, which then sees the end.
			c.ctl.shutdown()
		}
	})
}

// destroyLater destroys c in the background (Engine.Quiesce waits for it).
func (e *Engine) destroyLater(c *container) {
	e.background.Add(1)
	go func() {
		defer e.background.Done()
		c.destroy()
	}()
}

// destroy ends the container and frees its cgroup, socket and uids. PID 1
// is asked first, by closing its socket, so that it exits on its own (and
// a -cover build writes its counters); it is killed if it does not.
func (c *container) destroy() { c.destroyed.Do(c.doDestroy) }

func (c *container) doDestroy() {
	c.e.uids.release()
	c.cleaning.Wait()
	c.dropFS()
	if c.ctl != nil && c.cmd != nil {
		c.ctl.shutdown()
		select {
		case <-c.exited:
		case <-time.After(time.Second):
		}
	}
	c.kill()
	if c.cmd != nil {
		<-c.exited
	}
	if c.ctl != nil {
		for range c.events {
		}
		c.ctl.close()
	}
	if c.cg != nil {
		c.cg.remove()
	}
	c.e.uids.put(c.slot)
}

// poolKey identifies the sandboxes cfg can be served by; "" when a sandbox
// built for it must not serve again: a writable mount or an overlay keeps
// what a run wrote, a network device what a run sent and was sent, and a
// detachable run may leave with its sandbox.
func poolKey(cfg *initConfig) string {
	if cfg.Network || cfg.Detachable {
		return ""
	}
	for _, m := range cfg.Mounts {
		if m.Writable || m.Overlay {
			return ""
		}
	}
	return configKey(cfg)
}

// configKey identifies what a sandbox built for cfg is: two configurations
// with one key build alike sandboxes. A Late mount's source, bound at each
// run's start, is no part of it.
func configKey(cfg *initConfig) string {
	// Every field, length-prefixed: no two configurations encode alike.
	b := make([]byte, 0, 512)
	str := func(s string) []byte {
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, ':')
		return append(b, s...)
	}
	for _, m := range cfg.Mounts {
		if m.Late {
			b = str("")
		} else {
			b = str(m.Source)
		}
		b = str(m.Target)
		b = str(m.Link)
		for _, f := range []bool{m.Optional, m.Writable, m.Overlay, m.Late} {
			b = strconv.AppendBool(b, f)
		}
	}
	b = str(cfg.Hostname)
	for _, n := range []int64{cfg.FileSize, int64(cfg.NoFile), cfg.Stack, cfg.CPUSecs} {
		b = append(strconv.AppendInt(b, n, 10), ',')
	}
	b = strconv.AppendBool(b, cfg.Seccomp)
	b = strconv.AppendBool(b, cfg.CgroupV2)
	for _, f := range []bool{cfg.PTY, cfg.Network, cfg.Detachable} {
		b = strconv.AppendBool(b, f)
	}
	b = append(b, cfg.Home...)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}

// pool keeps idle containers by key, most recently used first. A run
// returns its container when PID 1 reports it clean; for keys prepared
// with prewarm, taking one below the wanted number builds a replacement in
// the background.
type pool struct {
	e        *Engine
	mu       sync.Mutex
	idle     map[string][]*container
	n        int            // idle containers
	starting map[string]int // containers being built, by key
	targets  map[string]prewarmTarget
	max      int
	ttl      time.Duration
	closed   bool
	janitor  *time.Timer
}

// prewarmTarget is how many idle containers a prepared key should have.
type prewarmTarget struct {
	cfg *initConfig
	n   int
}

func newPool(e *Engine, max int, ttl time.Duration) *pool {
	return &pool{e: e, idle: make(map[string][]*container), starting: make(map[string]int), targets: make(map[string]prewarmTarget), max: max, ttl: ttl}
}

// len is how many containers are idle.
func (p *pool) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// take takes an idle container for key that is fit to serve a run of
// tenant, or returns nil: one whose last run's verdict was still due reads
// it first, and is destroyed if it is not clean (or, for another tenant,
// if its counters moved: checkFor).
func (p *pool) take(key, tenant string) *container {
	for {
		c := p.get(key, tenant)
		if c == nil || c.settle() && c.checkFor(tenant) {
			return c
		}
		p.e.destroyLater(c)
	}
}

// get takes an idle container for key, or returns nil.
func (p *pool) get(key, tenant string) *container {
	if key == "" || p.max <= 0 {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	list := p.idle[key]
	if t, ok := p.targets[key]; ok && !p.closed && len(list)-1+p.starting[key] < t.n {
		go p.prewarm(t.cfg, t.n)
	}
	if len(list) == 0 {
		return nil
	}
	// The most recently used container whose PID 1 has given its verdict
	// on its last run (and so is ready for the next), the tenant's own
	// first (another's has its counters checked: checkFor), else the
	// most recently used.
	i := len(list) - 1
	settled := -1
	for j := i; j >= 0; j-- {
		if list[j].settled() {
			if !list[j].served || list[j].tenant == tenant {
				settled = j
				break
			}
			if settled < 0 {
				settled = j
			}
		}
	}
	if settled >= 0 {
		i = settled
	}
	c := list[i]
	list = append(list[:i], list[i+1:]...)
	if len(list) == 0 {
		delete(p.idle, key)
	} else {
		p.idle[key] = list
	}
	p.n--
	if !c.alive() {
		// PID 1 died while idle (killed from outside): not this one.
		p.e.destroyLater(c)
		return nil
	}
	return c
}

// wants says whether put may take c back (it may still refuse it).
func (p *pool) wants(c *container) bool {
	return c.key != "" && c.runs < maxRunsPerContainer && p.max > 0
}

// put returns a container that served a run cleanly; false means the pool
// does not want it and the caller destroys it. A full pool makes room by
// destroying its least recently used container: the one just used is the
// likelier to serve next.
func (p *pool) put(c *container) bool {
	if !p.wants(c) {
		return false
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return false
	}
	var victim *container
	if p.n+p.e.warm.len() >= p.max {
		victim = p.takeOldestLocked()
	}
	c.idle = time.Now()
	p.idle[c.key] = append(p.idle[c.key], c)
	p.n++
	if p.janitor == nil {
		p.janitor = time.AfterFunc(p.ttl, p.expire)
	}
	p.mu.Unlock()
	if victim != nil {
		p.e.destroyLater(victim)
	}
	return true
}

// takeOldestLocked removes the idle container unused the longest from the
// pool and returns it, or nil.
func (p *pool) takeOldestLocked() *container {
	var oldest *container
	for _, list := range p.idle {
		if len(list) > 0 && (oldest == nil || list[0].idle.Before(oldest.idle)) {
			oldest = list[0]
		}
	}
	if oldest == nil {
		return nil
	}
	if list := p.idle[oldest.key][1:]; len(list) == 0 {
		delete(p.idle, oldest.key)
	} else {
		p.idle[oldest.key] = list
	}
	p.n--
	return oldest
}

// prewarm builds the containers cfg's key lacks of n idle (or being
// built) when it is called, and no more: counting again after each build
// would chase expiry for ever on a machine where a build takes longer than
// PoolIdle (each one built expires while the next is built).
func (p *pool) prewarm(cfg *initConfig, n int) error {
	key := poolKey(cfg)
	if key == "" {
		return errors.New("sandbox: a spec with writable or overlay mounts or a network cannot be prepared ahead")
	}
	p.mu.Lock()
	missing := n - len(p.idle[key]) - p.starting[key]
	p.mu.Unlock()
	for ; missing > 0; missing-- {
		p.mu.Lock()
		starting := 0
		for _, s := range p.starting {
			starting += s
		}
		// Prepared sandboxes take at most half the pool: the rest is for
		// those runs bring back.
		full := p.closed || 2*(p.n+starting) >= p.max || len(p.idle[key])+p.starting[key] >= n
		if !full {
			p.starting[key]++
		}
		p.mu.Unlock()
		if full {
			return nil
		}
		if testHookPrewarmBuild != nil {
			testHookPrewarmBuild()
		}
		c, err := p.e.startContainer(cfg, key)
		p.mu.Lock()
		p.starting[key]--
		p.mu.Unlock()
		if err != nil {
			return err
		}
		if !p.put(c) {
			c.destroy()
			return nil
		}
	}
	return nil
}

// testHookPrewarmBuild, when set (by tests), runs before each container
// prewarm builds.
var testHookPrewarmBuild func()

// expire destroys containers idle for longer than the TTL.
func (p *pool) expire() {
	var old []*container
	p.mu.Lock()
	cutoff := time.Now().Add(-p.ttl)
	for key, list := range p.idle {
		keep := list[:0]
		for _, c := range list {
			if c.idle.Before(cutoff) {
				old = append(old, c)
			} else {
				keep = append(keep, c)
			}
		}
		if len(keep) == 0 {
			delete(p.idle, key)
		} else {
			p.idle[key] = keep
		}
	}
	p.n -= len(old)
	if p.n > 0 && !p.closed {
		p.janitor.Reset(p.ttl / 2)
	} else {
		p.janitor = nil
	}
	p.mu.Unlock()
	for _, c := range old {
		c.destroy()
	}
}

// evict destroys the idle container unused the longest, to free its uids;
// false when there is none.
func (p *pool) evict() bool {
	p.mu.Lock()
	oldest := p.takeOldestLocked()
	p.mu.Unlock()
	if oldest == nil {
		return false
	}
	oldest.destroy()
	return true
}

// drain destroys every idle container; with close, the pool takes no more.
func (p *pool) drain(close bool) {
	p.mu.Lock()
	var all []*container
	for _, list := range p.idle {
		all = append(all, list...)
	}
	p.idle = make(map[string][]*container)
	p.n = 0
	if close {
		p.closed = true
	}
	p.mu.Unlock()
	destroyAll(all)
}

// destroyAll destroys the containers cs, in parallel, and waits.
func destroyAll(cs []*container) {
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(c.destroy)
	}
	wg.Wait()
}
