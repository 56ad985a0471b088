package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

var (
	_ Live = (*Process)(nil)
	_ Live = (*Adopted)(nil)
)

// Detach hands on a run of a Detachable spec that is still going on, so
// that it may outlive this process: this process stops watching it (no
// wall-time, CPU-time or context limit ends it any more, and nothing of
// this process kills it: not Kill, not the engine's Close), stops reading
// its output (nothing more is written to the spec's Stdout, Stderr or
// ResultOut once Detach returns) and closes its end of the program's
// stdin, stdout, stderr and result pipe. The returned record is what a
// process needs to take the run over (Engine.Adopt); whoever holds it
// must end the run (Kill) when its time is up.
//
// After Detach, p must not be used: Wait returns ErrDetached at once (a
// Wait already waiting does too), DialTCP and Stats return ErrDetached,
// Kill does nothing. A run that is not Detachable cannot be detached; one
// that is over, or that a limit or Kill is ending, fails with ErrRunEnded.
func (p *Process) Detach() (*Detached, error) {
	if !p.spec.Detachable {
		return nil, errors.New("sandbox: only a run of a Detachable spec can be detached")
	}
	if ev, ok := p.awaitStart(); !ok || ev.Event != "started" {
		return nil, fmt.Errorf("%w: the program did not start (Wait says why)", ErrRunEnded)
	}
	if err := p.detachable(); err != nil {
		return nil, err
	}
	if p.frozen.Load() {
		// Thawed first, as Adopted.Detach does.
		if err := p.freezer().set(context.Background(), false); err != nil {
			return nil, err
		}
	}
	d, err := p.record()
	if err != nil {
		return nil, err
	}
	// From now on PID 1 lets the run go on when the control socket closes.
	if err := p.c.ctl.send(runRequest{Detach: true}); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRunEnded, err)
	}
	// Until here the run was ours: a limit that ends it meanwhile ends it
	// as ever, and Wait then reports it.
	p.killMu.Lock()
	if err = p.detachableLocked(); err == nil {
		p.detached = true
	}
	p.killMu.Unlock()
	if err != nil {
		return nil, err
	}
	close(p.detach)
	p.watchMu.Lock() // Wait's watchers, if Wait runs, have stopped
	p.watchMu.Unlock()
	p.release()
	p.outDone.Wait()
	p.c.abandon()
	return d, nil
}

// detachable says why the run cannot be detached now, if it cannot.
func (p *Process) detachable() error {
	p.killMu.Lock()
	defer p.killMu.Unlock()
	return p.detachableLocked()
}

func (p *Process) detachableLocked() error {
	switch {
	case p.detached:
		return ErrDetached
	case p.over || p.exited || p.ended.Load() || p.limitHit.Load() != nil:
		return ErrRunEnded
	}
	return nil
}

// record describes the run for Adopt.
func (p *Process) record() (*Detached, error) {
	pid := p.c.cmd.Process.Pid
	// PID 1 is our child: its pid is its own until we reap it.
	start, err := procStartTime(pid)
	if err != nil || !p.c.alive() {
		return nil, fmt.Errorf("%w: PID 1: %v", ErrRunEnded, err)
	}
	boot, err := bootID()
	if err != nil {
		return nil, err
	}
	d := &Detached{Pid: pid, StartTime: start, BootID: boot, UID: p.c.hostRoot, CgroupV2: p.cg.v2}
	if p.cg.v2 {
		d.Sandbox = map[string]string{"unified": filepath.Join(p.c.cg.c.parent, p.c.cg.name)}
		d.Run = map[string]string{"unified": p.cg.dir}
	} else {
		d.Sandbox = maps.Clone(p.c.cg.v1.dirs)
		d.Run = maps.Clone(p.cg.dirs)
		d.CPUBase = int64(p.cg.cpuBase)
	}
	return d, nil
}

// abandon lets the sandbox of a detached run go on without this engine:
// its control socket (PID 1 was told: runRequest.Detach) and cgroup
// descriptors are closed, its cgroups left, and its uid slot held until
// PID 1 exits.
func (c *container) abandon() {
	c.ctl.shutdown()
	for range c.events {
	}
	c.ctl.close()
	c.dropFS()
	c.cg.forget()
	c.e.uids.holdTaken(c.slot)
	go func() {
		<-c.exited // only in this process: PID 1 is its child
		c.e.uids.unhold(c.slot)
	}()
}

// forget closes the descriptors of the sandbox's cgroups and leaves the
// directories, to a detached run.
func (ct *ctCgroup) forget() {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	ct.removed = true
	if ct.fd >= 0 {
		unix.Close(ct.fd)
		ct.fd = -1
	}
	closeFDs(distinctFDs(ct.dfd))
	ct.dfd = nil
}

// forget closes the run cgroup's descriptors and leaves its directories,
// to a detached run.
func (rc *runCgroup) forget() {
	if rc.fd >= 0 {
		unix.Close(rc.fd)
		rc.fd = -1
	}
	closeFDs(rc.handover)
	rc.handover = nil
	closeFDs(distinctFDs(rc.dfd))
	rc.dfd = nil
}

// Adopted is a detached run that this process took over (Engine.Adopt).
type Adopted struct {
	e     *Engine
	d     Detached
	pidfd *os.File // PID 1's, polled for its exit
	slot  int      // the engine's uid slot held for the run, or -1

	mu sync.Mutex
	// ending: PID 1 exited and the run's cgroups are being removed;
	// handed: the run was handed on (Detach).
	ending, handed bool
	done           chan struct{} // closed when Wait returns
	err            error
	// netDetach stops serving the network device AttachNetwork gave it.
	netDetach func()
	// frozen: Freeze froze it and Thaw did not thaw it since.
	frozen atomic.Bool
}

// Adopt takes over a detached run (Process.Detach, Adopted.Detach), in
// this process or another on the same host: the run's sandbox must have
// the engine's cgroup parent. It checks that the record's PID 1 is still
// that process, by its start time, the boot and its cgroup; if it is not,
// the run is over: Adopt fails with an error that wraps ErrRunEnded and
// removes the run's cgroups if they are left and empty. The engine gives
// the run's uids (when in its range) to no other run until it ends: adopt
// runs before starting others, which may have taken them.
//
// The engine's Close and Quiesce leave adopted runs alone. The holder ends
// the run (Kill) when its time is up.
func (e *Engine) Adopt(d *Detached) (*Adopted, error) {
	if err := e.checkRecord(d); err != nil {
		return nil, err
	}
	a := &Adopted{e: e, d: *d, slot: -1, done: make(chan struct{})}
	a.d.Sandbox, a.d.Run = maps.Clone(d.Sandbox), maps.Clone(d.Run)
	if err := a.open(); err != nil {
		if errors.Is(err, ErrRunEnded) {
			a.d.removeCgroups(false)
			// A slot parked for it at New is free again.
			if slot, ok := e.uidSlot(d.UID); ok && e.uids.unpark(slot) {
				e.uids.unhold(slot)
			}
		}
		return nil, err
	}
	if slot, ok := e.uidSlot(d.UID); ok {
		if !e.uids.unpark(slot) && !e.uids.hold(slot) {
			a.pidfd.Close()
			return nil, fmt.Errorf("sandbox: adopt: uid %d is another run's of this engine (adopt runs before starting others)", d.UID)
		}
		a.slot = slot
	}
	go a.watch()
	return a, nil
}

// checkRecord checks that d names a detachable sandbox of the engine's
// cgroup parent, and a run cgroup in it.
func (e *Engine) checkRecord(d *Detached) error {
	if d == nil || d.Pid <= 0 {
		return errors.New("sandbox: adopt: no PID 1 in the record")
	}
	if d.CgroupV2 != e.cg.v2 {
		return errors.New("sandbox: adopt: the record is of another cgroup version than the engine's")
	}
	parents, runCtrls := e.cg.parents, v1RunControllers
	if e.cg.v2 {
		parents, runCtrls = map[string]string{"unified": e.cg.parent}, []string{"unified"}
	}
	for ctrl, parent := range parents {
		if dir := d.Sandbox[ctrl]; filepath.Dir(dir) != parent || !isDetachable(filepath.Base(dir)) {
			return fmt.Errorf("sandbox: adopt: %q is not a detachable sandbox's cgroup under the engine's %s", dir, parent)
		}
	}
	for _, ctrl := range runCtrls {
		dir := d.Run[ctrl]
		base := filepath.Base(dir)
		if filepath.Dir(dir) != d.Sandbox[ctrl] || !strings.HasPrefix(base, "run-") && !strings.HasPrefix(base, "next-") {
			return fmt.Errorf("sandbox: adopt: %q is not a run's cgroup in the sandbox's %s", dir, d.Sandbox[ctrl])
		}
	}
	return nil
}

// open opens a pidfd of the record's PID 1 and checks that it is that
// process: a process of this boot, started when the record says, in the
// sandbox's cgroup, and not exited. Once the pidfd is open, the pid is
// not freed for another process before it is readable (PID 1 exited), so
// what /proc/<pid> says after it is PID 1's.
func (a *Adopted) open() error {
	ended := func(why string) error {
		return fmt.Errorf("%w: PID 1 (pid %d) of the detached run %s", ErrRunEnded, a.d.Pid, why)
	}
	fd, err := unix.PidfdOpen(a.d.Pid, unix.PIDFD_NONBLOCK)
	if err == unix.EINVAL {
		fd, err = unix.PidfdOpen(a.d.Pid, 0) // before Linux 5.10
	}
	if err == unix.ESRCH {
		return ended("is gone")
	}
	if err != nil {
		return fmt.Errorf("sandbox: adopt: pidfd of pid %d: %w", a.d.Pid, err)
	}
	a.pidfd = os.NewFile(uintptr(fd), "pidfd")
	boot, _ := bootID()
	start, err := procStartTime(a.d.Pid)
	switch {
	case boot != a.d.BootID:
		err = ended("was of another boot")
	case err != nil || start != a.d.StartTime:
		err = ended("is gone: the pid is another process's")
	case !cgroupHolds(a.d.initCgroup(), a.d.Pid):
		err = ended("is not in the sandbox's cgroup")
	case a.exited():
		err = ended("has exited")
	}
	if err != nil {
		a.pidfd.Close()
	}
	return err
}

// watch waits for PID 1 to exit; then the run's cgroups are removed and
// Wait returns, unless it was handed on (Detach). The uid slot is held
// until then either way.
func (a *Adopted) watch() {
	a.awaitExit()
	a.mu.Lock()
	handed := a.handed
	a.ending = !handed
	a.mu.Unlock()
	if !handed {
		a.detachNetwork()
		a.err = a.d.removeCgroups(true)
	}
	a.pidfd.Close()
	if a.slot >= 0 {
		a.e.uids.unhold(a.slot)
	}
	if !handed {
		close(a.done)
	}
}

// awaitExit returns once PID 1 has exited: its pidfd turns readable.
func (a *Adopted) awaitExit() {
	rc, err := a.pidfd.SyscallConn()
	if err == nil {
		err = rc.Read(func(fd uintptr) bool { return pidfdExited(int(fd)) })
	}
	if err == nil {
		return
	}
	// The runtime's poller did not take the pidfd (opened blocking, on
	// an older kernel): wait in poll(2). Only watch closes the pidfd.
	fds := []unix.PollFd{{Fd: int32(a.pidfd.Fd()), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); err != unix.EINTR {
			return
		}
	}
}

// exited says whether PID 1 has exited (or its pidfd is closed).
func (a *Adopted) exited() bool {
	rc, err := a.pidfd.SyscallConn()
	if err != nil {
		return true
	}
	gone := true
	if rc.Control(func(fd uintptr) { gone = pidfdExited(int(fd)) }) != nil {
		return true
	}
	return gone
}

// pidfdExited says whether the process of the pidfd has exited.
func pidfdExited(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if err != unix.EINTR {
			return err != nil || n > 0
		}
	}
}

// usable says why the run can no longer be used, if it cannot.
func (a *Adopted) usable() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.handed:
		return ErrDetached
	case a.ending:
		return ErrRunEnded
	}
	return nil
}

// Wait waits until the run is over, its PID 1 exited (by itself or
// Kill), and its cgroups are removed; it returns the error of the
// removal, if any. Once the run is handed on (Detach) it returns
// ErrDetached at once.
func (a *Adopted) Wait() error {
	<-a.done
	return a.err
}

// Kill ends the run: every process of the sandbox's cgroups (v2, through
// cgroup.kill) and its PID 1 (through its pidfd, never a pid another
// process may have taken), which takes the rest of its pid namespace
// with it; on v1 what is left in the run's cgroup is killed after. Wait
// then returns. A run handed on is left alone.
func (a *Adopted) Kill() {
	if errors.Is(a.usable(), ErrDetached) {
		return
	}
	if a.d.CgroupV2 {
		os.WriteFile(filepath.Join(a.d.Sandbox["unified"], "cgroup.kill"), []byte("1"), 0)
	}
	if rc, err := a.pidfd.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { unix.PidfdSendSignal(int(fd), unix.SIGKILL, nil, 0) })
	}
	if !a.d.CgroupV2 {
		a.runCgroup().kill()
	}
	a.freezer().thawKilled(true)
}

// DialTCP connects to port on the loopback (127.0.0.1) of the run's
// network namespace, as Process.DialTCP does; ErrRunEnded once the run is
// over.
func (a *Adopted) DialTCP(ctx context.Context, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("sandbox: port %d out of range", port)
	}
	ns, err := a.openProc("ns/net", unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer unix.Close(ns)
	return dialLoopback(ctx, ns, port)
}

// Stats reads what the run uses now, as Process.Stats does: from its
// cgroup, and its /work and /tmp through PID 1's root; ErrRunEnded once
// it is over.
func (a *Adopted) Stats() (Stats, error) {
	if err := a.usable(); err != nil {
		return Stats{}, err
	}
	rc := a.runCgroup()
	u, err := rc.usage(true)
	if err != nil {
		if a.exited() {
			return Stats{}, ErrRunEnded
		}
		return Stats{}, err
	}
	s := Stats{CPU: max(int64(u.CPU)-a.d.CPUBase, 0), MemoryPeak: u.PeakMemory, Memory: rc.memoryNow()}
	s.MemoryPeak = max(s.MemoryPeak, s.Memory) // the peak was read first
	for _, dir := range []string{"root/work", "root/tmp"} {
		fd, err := a.openProc(dir, unix.O_PATH|unix.O_DIRECTORY)
		if err != nil {
			return Stats{}, err
		}
		s.addDisk(fd)
		unix.Close(fd)
	}
	return s, nil
}

// Detach hands the run on again (to the next process, at its restart):
// this process lets it go as Process.Detach does, and Wait returns
// ErrDetached. ErrRunEnded once the run is over.
func (a *Adopted) Detach() (*Detached, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.handed:
		return nil, ErrDetached
	case a.ending || a.exited():
		return nil, ErrRunEnded
	}
	if a.frozen.Load() {
		// Handed on as it was started: frozen, its next holder might
		// never know to thaw it. It freezes it again when it is to be.
		if err := a.freezer().set(context.Background(), false); err != nil {
			return nil, err
		}
	}
	a.handed, a.err = true, ErrDetached
	close(a.done)
	if a.netDetach != nil {
		// The device goes with our end of it: the next holder makes one.
		a.netDetach()
		a.netDetach = nil
	}
	d := a.d
	d.Sandbox, d.Run = maps.Clone(a.d.Sandbox), maps.Clone(a.d.Run)
	return &d, nil
}

// AttachNetwork gives the run a network device as Spec.Network gives a
// run: tun0, made in its network namespace and configured as n says, whose
// host end n.Attach serves until the run is over or handed on (Detach).
// A run detached with a network lost its device with its holder's end of
// it: its adopter gives it one anew (connections open then are gone; new
// ones go through the new device). One device at a time: a run that has
// one fails with an error.
func (a *Adopted) AttachNetwork(n *Network) error {
	if err := n.validate(); err != nil {
		return err
	}
	ns, err := a.openProc("ns/net", unix.O_RDONLY)
	if err != nil {
		return err
	}
	tun, err := attachTUNAt(ns, n)
	unix.Close(ns)
	if err != nil {
		return &SetupError{Step: "network", Err: err}
	}
	detach, err := n.Attach(tun)
	if err != nil {
		tun.Close()
		return &SetupError{Step: "network", Err: err}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.handed, a.ending:
		detach()
		return ErrRunEnded
	case a.netDetach != nil:
		detach()
		return errors.New("sandbox: the run has a network device already")
	}
	a.netDetach = detach
	return nil
}

// detachNetwork stops serving the run's network device, if it has one.
func (a *Adopted) detachNetwork() {
	a.mu.Lock()
	detach := a.netDetach
	a.netDetach = nil
	a.mu.Unlock()
	if detach != nil {
		detach()
	}
}

// openProc opens /proc/<pid>/name of the run's PID 1 (with O_CLOEXEC
// added to flags): ErrRunEnded when PID 1 has exited, for the pid may
// then be another process's.
func (a *Adopted) openProc(name string, flags int) (int, error) {
	if err := a.usable(); err != nil {
		return -1, err
	}
	fd, err := unix.Open("/proc/"+strconv.Itoa(a.d.Pid)+"/"+name, flags|unix.O_CLOEXEC, 0)
	if a.exited() {
		if err == nil {
			unix.Close(fd)
		}
		return -1, ErrRunEnded
	}
	if err != nil {
		return -1, fmt.Errorf("sandbox: open /proc/%d/%s: %w", a.d.Pid, name, err)
	}
	return fd, nil
}

// runCgroup is the run's cgroup, reached by path; on v1 with the
// sandbox's cpuacct cgroup, where its CPU time counts.
func (a *Adopted) runCgroup() *runCgroup {
	rc := &runCgroup{v2: a.d.CgroupV2, fd: -1}
	if rc.v2 {
		rc.dir = a.d.Run["unified"]
		return rc
	}
	rc.dirs = maps.Clone(a.d.Run)
	rc.dirs["cpuacct"] = a.d.Sandbox["cpuacct"]
	return rc
}

// initCgroup is the directory of the cgroup that holds the sandbox's
// PID 1: v2 the init leaf, v1 the sandbox's pids cgroup.
func (d *Detached) initCgroup() string {
	if d.CgroupV2 {
		return filepath.Join(d.Sandbox["unified"], ctInitLeaf)
	}
	return d.Sandbox["pids"]
}

// removeCgroups removes the sandbox's cgroups, with the run's in them:
// with kill what is left there is killed first, without only those that
// hold no process go.
func (d *Detached) removeCgroups(kill bool) error {
	dirs := []string{d.Sandbox["unified"]}
	if !d.CgroupV2 {
		dirs = distinctDirs(d.Sandbox)
	}
	var last error
	for _, dir := range dirs {
		var err error
		if kill {
			err = removeTree(d.CgroupV2, dir)
		} else {
			err = removeEmptyTree(dir)
		}
		if err != nil {
			last = err
		}
	}
	return last
}

// cgroupHolds says whether process pid is in the cgroup dir.
func cgroupHolds(dir string, pid int) bool {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	return err == nil && slices.Contains(strings.Fields(string(b)), strconv.Itoa(pid))
}

// procStartTime is the start time of process pid, field 22 of
// /proc/<pid>/stat, in clock ticks after boot.
func procStartTime(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// Field 2, the command, is in parentheses and may hold anything:
	// the fields after its last ")" start at 3.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// bootID is the kernel's id of this boot.
func bootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b)), err
}

// uidSlot is the engine's uid slot whose sandboxes' PID 1 runs as uid, if
// uid is in the engine's range.
func (e *Engine) uidSlot(uid int) (int, bool) {
	off := uid - e.cfg.UIDBase
	if off < 0 || off%2 != 0 || off/2 >= e.cfg.UIDSlots {
		return 0, false
	}
	return off / 2, true
}

// hold keeps slot s from the engine's runs for a run it adopts, until
// unhold: the slot must be free or held already; false when a run of the
// engine has it.
func (u *uidPool) hold(s int) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.held[s] > 0 {
		u.held[s]++
		return true
	}
	i := slices.Index(u.free, s)
	if i < 0 {
		return false
	}
	u.free = slices.Delete(u.free, i, i+1)
	u.held[s] = 1
	return true
}

// holdTaken holds slot s, which a container of the engine took, for the
// run it detaches.
func (u *uidPool) holdTaken(s int) {
	u.mu.Lock()
	u.held[s]++
	u.mu.Unlock()
}

// unhold ends a hold of slot s; the last one frees it.
func (u *uidPool) unhold(s int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.held[s]--; u.held[s] > 0 {
		return
	}
	delete(u.held, s)
	u.free = append(u.free, s)
	close(u.freed)
	u.freed = make(chan struct{})
}

// parkDetached holds, from the engine's start, the uid slots of the
// detachable sandboxes that outlived an earlier engine (their PID 1 still
// runs in a ct-<pid>-d<n> cgroup of ours), so that no run of this engine
// takes one before Adopt: Adopt takes the hold over, or frees it when the
// sandbox has ended. A sandbox never adopted nor tried keeps its slot held
// while this engine lives.
func (e *Engine) parkDetached() {
	parent := e.cg.parent
	if !e.cg.v2 {
		parent = e.cg.parents["pids"]
	}
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, ent := range entries {
		if !ent.IsDir() || !isDetachable(ent.Name()) {
			continue
		}
		// PID 1 is in the sandbox's cgroup or (v2: no processes where
		// there are children) in a leaf below it.
		filepath.WalkDir(filepath.Join(parent, ent.Name()), func(dir string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
			for _, f := range strings.Fields(string(b)) {
				pid, _ := strconv.Atoi(f)
				if uid, ok := procUID(pid); ok {
					if slot, ok := e.uidSlot(uid); ok && !e.uids.isParked(slot) && e.uids.hold(slot) {
						e.uids.park(slot)
					}
				}
			}
			return nil
		})
	}
}

// isParked says whether slot s is parked already.
func (u *uidPool) isParked(s int) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.parked[s]
}

// procUID is the real uid of process pid, from /proc/pid/status.
func procUID(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				uid, err := strconv.Atoi(f[0])
				return uid, err == nil
			}
		}
	}
	return 0, false
}

// park marks slot s's hold as parkDetached's, for Adopt to take over.
func (u *uidPool) park(s int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.parked == nil {
		u.parked = map[int]bool{}
	}
	u.parked[s] = true
}

// unpark takes over a parked hold of slot s (false when there is none).
func (u *uidPool) unpark(s int) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.parked[s] {
		return false
	}
	delete(u.parked, s)
	return true
}
