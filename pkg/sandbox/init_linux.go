package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// initArg0 marks a re-execution of the binary as a sandbox's PID 1.
const initArg0 = "sandbox-run:init"

// File descriptors of the init process, set up by the host.
const (
	fdControl = 3 // unix seqpacket socket to the host: configs and runs in, events out
	fdExe     = 4 // the binary itself
	fdCover   = 5 // coverage directory, in -cover test builds only
)

// Inside ids: init is root of the user namespace (mapped to an unprivileged
// host uid); the program runs as an ordinary user.
const (
	innerRoot = 0
	innerUser = 1000
)

// initConfig is everything PID 1 needs to build the sandbox. It is the
// same for every run the sandbox serves: what differs between runs is in
// runRequest.
type initConfig struct {
	Mounts   []mountConfig
	Hostname string
	FileSize int64
	NoFile   int
	Stack    int64
	CPUSecs  int64 // RLIMIT_CPU backstop
	Seccomp  bool
	CgroupV2 bool
	// Network: the host gives this sandbox's network namespace a device
	// (Spec.Network); the sandbox serves one run.
	Network bool
	// PTY: /dev has a devpts instance of the sandbox's own (Spec.PTY).
	PTY bool `json:",omitempty"`
	// Home: a link to /work at this path in the root (Spec.Home).
	Home string `json:",omitempty"`
	// Detachable: the sandbox serves one run, which may outlive the host
	// (Spec.Detachable): PID 1 has no parent-death signal and watches its
	// control socket instead (watchHost).
	Detachable bool `json:",omitempty"`
}

// runRequest starts one program in a built sandbox. Its descriptors travel
// with it: stdin, stdout, stderr, the /work, /tmp and /dev/shm mounts, the
// result pipe and the Late mounts if any, then the run's cgroup (v2: its
// directory; v1: each hierarchy's tasks file and last pids.max).
type runRequest struct {
	Args      []string
	Env       []string
	Dir       string
	Processes int // v1: pids.max once the spawning thread has left
	// ResultPipe: a pipe for the program's descriptor 3 follows the
	// mounts, before the cgroup's descriptors.
	ResultPipe bool
	// CheckCounters asks for no run: PID 1 answers with a "reset" event,
	// clean when the network namespace's counters are a fresh sandbox's
	// (container.checkFor).
	CheckCounters bool `json:",omitempty"`
	// KeepFS: the last run's filesystems, still mounted and emptied by
	// the host, serve this run; the mounts' places in the message hold
	// placeholders.
	KeepFS bool `json:",omitempty"`
	// Detach, sent while a run of a Detachable sandbox lasts, lets the
	// run go on when the host closes the control socket (watchHost).
	Detach bool `json:",omitempty"`
	// Late is how many mounts follow the result pipe: the trees of the
	// sandbox's Late mounts, in their order, which PID 1 binds at their
	// targets for this run (mountLate).
	Late int `json:",omitempty"`
}

// lateFDs is where the Late mounts' descriptors start in a run's message.
func (r *runRequest) lateFDs() int {
	if r.ResultPipe {
		return runFDCgroup + 1
	}
	return runFDCgroup
}

// cgroupFDs is where the cgroup's descriptors start in a run's message.
func (r *runRequest) cgroupFDs() int { return r.lateFDs() + r.Late }

// Positions of a run's descriptors in its message.
const (
	runFDStdin = iota
	runFDStdout
	runFDStderr
	runFDWork
	runFDTmp
	runFDShm
	runFDCgroup // the first cgroup descriptor, or the result pipe
)

// mountConfig is a Mount with its Target filled in.
type mountConfig struct {
	Source, Target              string
	Writable, Overlay, Optional bool
	// Link, when set, makes Target a symlink to it (Spec.Root's links);
	// Source is then unused.
	Link string `json:",omitempty"`
	// Late: Target is only a directory to mount on when the sandbox is
	// built; the host clones Source's tree for the run (Mount.Late,
	// runRequest.Late), and Source is unused here.
	Late bool `json:",omitempty"`
}

// initEvent reports progress from PID 1 to the host.
type initEvent struct {
	// Event is "cgroupns" (v2: PID 1 made its cgroup namespace and may be
	// moved), "ready" (the sandbox is built and waits for a run), "started",
	// "exited" (the program ended; with Children, every process of the run
	// is gone too), "reset" (the run's processes are gone; Clean says
	// whether the sandbox is as it was before the run: it always follows
	// the run's last other event) or "error".
	Event string `json:"event"`
	// SetupCPU is what PID 1 spent starting the run (v1: charged to the
	// cpuacct cgroup the run's CPU is read from while it lasts).
	SetupCPU int64 `json:"setup_cpu_us,omitempty"`
	// Children is the CPU time of every process of the run, all reaped by
	// now (the "exited" event, and "reset").
	Children *cpuTimes `json:"children,omitempty"`
	// Wall is the program's wall time, from its fork to its exit, in
	// microseconds (the "exited" event): PID 1 sees both ends.
	Wall     int64  `json:"wall_us,omitempty"`
	ExitCode int    `json:"exit_code"`
	Signal   int    `json:"signal,omitempty"`
	Clean    bool   `json:"clean,omitempty"`
	Step     string `json:"step,omitempty"`
	Error    string `json:"error,omitempty"`
}

// Init turns this process into a sandbox's PID 1 when it was started as one
// and never returns in that case; otherwise it returns at once. Call it first
// in main (and in TestMain of tests that run sandboxes).
func Init() {
	if len(os.Args) == 0 || os.Args[0] != initArg0 {
		return
	}
	// Capabilities and credentials are per thread: the building steps below
	// happen on this one thread.
	runtime.LockOSThread()
	ctl := &controlConn{fd: fdControl}
	err := sandboxInit(ctl)
	if err != nil {
		var se *SetupError
		ev := initEvent{Event: "error", Error: err.Error()}
		if errors.As(err, &se) {
			ev.Step, ev.Error = se.Step, se.Err.Error()
		}
		ctl.send(ev)
		os.Exit(1)
	}
	os.Exit(0)
}

func step(name string, err error) error {
	if err == nil {
		return nil
	}
	return &SetupError{Step: name, Err: err}
}

func sandboxInit(ctl *controlConn) error {
	// Nothing of ours may leak into a program: everything is close-on-exec
	// and a run's descriptors are handed over explicitly.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return step("close fds", err)
	}
	var cfg initConfig
	ctFDs, err := ctl.recv(&cfg)
	if err != nil {
		return step("read config", err)
	}
	// cgroup v2: runs are cloned straight into their cgroups, which must lie
	// inside this namespace; it is rooted at the sandbox's own cgroup, where
	// the host cloned us, and the threads that start runs join it.
	var cgns int
	if cfg.CgroupV2 {
		if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
			return step("cgroup namespace", err)
		}
		fd, err := unix.Open("/proc/thread-self/ns/cgroup", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return step("cgroup namespace", err)
		}
		cgns = fd
		ctl.send(initEvent{Event: "cgroupns"})
	}
	srcs, err := openMountSources(cfg.Mounts)
	if err != nil {
		return err
	}
	// Until now we held the host's root uid (unmapped here) so that bind
	// sources in directories only root can search could be opened. From
	// here on we are the namespace's root, an unprivileged uid on the host.
	if err := syscall.Setresgid(innerRoot, innerRoot, innerRoot); err != nil {
		return step("setresgid", err)
	}
	if err := syscall.Setresuid(innerRoot, innerRoot, innerRoot); err != nil {
		return step("setresuid", err)
	}
	// Changing uid cleared the parent-death signal the host set: arm it
	// again. Had the host died before this, its end of the control socket
	// is closed and the first read below ends us. A detachable sandbox
	// has none: it watches its control socket (watchHost).
	if !cfg.Detachable {
		if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
			return step("parent-death signal", err)
		}
	}
	// No user namespace may be made below ours, by any means: clone3, whose
	// flags seccomp cannot see, included.
	if err := os.WriteFile("/proc/sys/user/max_user_namespaces", []byte("0"), 0); err != nil {
		return step("limit user namespaces", err)
	}
	if err := buildRoot(srcs, cfg.PTY, cfg.Home); err != nil {
		return err
	}
	if err := unix.Sethostname([]byte(cfg.Hostname)); err != nil {
		return step("hostname", err)
	}
	if err := loopbackUp(); err != nil {
		return step("loopback", err)
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return step("dumpable", err)
	}
	if err := setRlimits(&cfg); err != nil {
		return err
	}
	var filter []unix.SockFilter
	if cfg.Seccomp {
		// On cgroup v2 the spawning thread clones the program into its
		// cgroup with clone3, so its filter (the program's) must let clone3
		// through; the user-namespace limit above stands in for the check.
		if filter, err = seccompFilterFor(cfg.CgroupV2); err != nil {
			return step("seccomp", err)
		}
	}
	sb := &initSandbox{cfg: &cfg, ctl: ctl, filter: filter, cgns: cgns, ctFDs: ctFDs, pts: -1}
	if cfg.PTY {
		if sb.pts, err = unix.Open("/dev/pts", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
			return step("open /dev/pts", err)
		}
	}
	if sb.netFDs, err = openAll(netFiles); err != nil {
		return err
	}
	if sb.ipcFDs, err = openAll(ipcFiles); err != nil {
		return err
	}
	if sb.mqueue, err = openMqueue(); err != nil {
		return err
	}
	if err := resetSysvIDs(); err != nil {
		return err
	}
	if sb.counterFDs, err = openAll(counterFiles); err != nil {
		return err
	}
	if sb.counterBase, err = readCounters(sb.counterFDs, nil); err != nil {
		return step("read counters", err)
	}
	// The spawner thread now, not at the first run: the threads the Go
	// runtime adds around it then take pids below the runs' (runPidBase).
	// On v1 it roots its cgroup namespace where it is, so it waits for the
	// host's word that PID 1 is in the sandbox's cgroups; with it come the
	// tasks files of the sandbox's CPU cgroups, which only the spawner
	// thread joins (ctCgroup.cpuOnly).
	if !cfg.CgroupV2 {
		var settled cgroupSettled
		if sb.cpuFDs, err = ctl.recv(&settled); err != nil {
			return step("wait for cgroup", err)
		}
		sb.threadCPU = settled.ThreadCPU
	}
	if err := sb.startSpawner(); err != nil {
		return err
	}
	ctl.send(initEvent{Event: "ready"})
	for {
		var req runRequest
		fds, err := ctl.recv(&req)
		if err != nil {
			if errors.Is(err, errControlClosed) {
				return nil // the host is done with this sandbox
			}
			return step("read run", err)
		}
		if req.CheckCounters {
			for _, fd := range fds {
				unix.Close(fd)
			}
			why := sb.countersMoved()
			sb.ctl.send(initEvent{Event: "reset", Clean: why == "", Error: why})
			continue
		}
		sb.serve(&req, fds)
		if cfg.Detachable {
			return nil // its one run is over
		}
	}
}

// initSandbox is PID 1's state between runs.
type initSandbox struct {
	cfg    *initConfig
	ctl    *controlConn
	filter []unix.SockFilter
	cgns   int   // v2: the cgroup namespace rooted at the sandbox's cgroup
	ctFDs  []int // v1: the tasks files of the sandbox's own cgroups
	cpuFDs []int // v1: those of its CPU cgroups, which PID 1 is not in
	// threadCPU: v1, the run's CPU counter counts the spawner thread of
	// PID 1 alone (cgroupSettled).
	threadCPU bool
	netFDs    []int
	ipcFDs    []int // /proc/sysvipc files
	mqueue    int   // the IPC namespace's POSIX message queues, detached
	pts       int   // /dev/pts (Spec.PTY), else -1
	// counterFDs are the network namespace's counters (counterFiles) and
	// counterBase what they said when the sandbox was built.
	counterFDs     []int
	counterBase    [][]byte
	counterScratch [][]byte
	// fsMounted: a run's filesystems are mounted (see unmountRun).
	fsMounted bool
	jobs      chan spawnJob
	// children0 is childrenCPU when the current run started.
	children0 cpuTimes
}

// cpuTimes is user and system CPU time in microseconds.
type cpuTimes struct {
	User int64 `json:"user_us"`
	Sys  int64 `json:"sys_us"`
}

// childrenCPU is the CPU time of the processes PID 1 has reaped so far:
// every process of a run ends reaped by it, directly or through its
// parents, so the difference over a run is the run's exact CPU time.
func childrenCPU() cpuTimes {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_CHILDREN, &ru)
	return cpuTimes{User: ru.Utime.Nano() / 1000, Sys: ru.Stime.Nano() / 1000}
}

// selfCPU is PID 1's own CPU time so far, all threads.
func selfCPU() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cgroupSettled is the host's word on cgroup v1 that PID 1 is in its
// cgroups; with it come the tasks files of the sandbox's CPU cgroups for
// the spawner thread to join.
type cgroupSettled struct {
	// ThreadCPU: the cpuacct cgroup the run's CPU time is read from is one
	// of them, so of PID 1 only the spawner thread counts in it.
	ThreadCPU bool `json:"thread_cpu,omitempty"`
}

// threadCPU is the calling thread's CPU time.
func threadCPU() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_THREAD, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// spawnJob asks the spawner thread to fork a run's program.
type spawnJob struct {
	path string
	req  *runRequest
	fds  []int
	done chan spawned
	// self0 is PID 1's CPU time when the run's start began, where all of
	// PID 1 counts in the cgroup the run's CPU is read from (v1 without
	// threadCPU).
	self0 time.Duration
}

type spawned struct {
	pid int
	err error
	at  time.Time // when the program was forked
}

// runMounts are where a run's fresh filesystems go, in the order of their
// descriptors.
var runMounts = []string{"/work", "/tmp", "/dev/shm"}

// serve runs one program to its end and puts the sandbox back as it was:
// every process of the run killed and reaped, its /work, /tmp and /dev/shm
// unmounted, and the network and IPC namespaces checked for anything it
// left there.
func (sb *initSandbox) serve(req *runRequest, fds []int) {
	s := sb.start(req, fds)
	for _, fd := range fds {
		unix.Close(fd)
	}
	if s.err != nil {
		ev := initEvent{Event: "error", Error: s.err.Error()}
		var se *SetupError
		if errors.As(s.err, &se) {
			ev.Step, ev.Error = se.Step, se.Err.Error()
		}
		sb.ctl.send(ev)
		sb.finishRun(sb.reap())
		return
	}
	forked := s.at // the spawner has said "started"
	if sb.cfg.Detachable {
		go sb.watchHost()
	}
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			sb.ctl.send(initEvent{Event: "error", Step: "wait", Error: err.Error()})
			break
		}
		if pid != s.pid {
			continue // an orphan we reaped as PID 1
		}
		ev := initEvent{Event: "exited", ExitCode: ws.ExitStatus(), Wall: max(time.Since(forked).Microseconds(), 1)}
		if ws.Signaled() {
			ev.ExitCode, ev.Signal = -1, int(ws.Signal())
		}
		// The run ends with its program: what it left running goes now,
		// so that the exit says the run's processes are gone and what
		// they all spent. The verdict on the sandbox follows; the host
		// answers without waiting for it.
		children, reapErr := sb.reap()
		if reapErr == "" {
			ev.Children = children
		}
		sb.ctl.send(ev)
		sb.finishRun(children, reapErr)
		return
	}
	sb.finishRun(sb.reap())
}

// watchHost reads the control socket while a detachable sandbox's run
// lasts, and ends the run when the socket closes before the host let the
// run go on without it (runRequest.Detach): the host died, and the run
// dies with it as any other's does by its parent-death signal. A close
// that comes before this starts is read here all the same.
func (sb *initSandbox) watchHost() {
	for {
		var req runRequest
		fds, err := sb.ctl.recv(&req)
		for _, fd := range fds {
			unix.Close(fd)
		}
		if err != nil {
			break
		}
		if req.Detach {
			return
		}
	}
	// As PID 1 we may signal every process of the namespace but
	// ourselves; serve then reaps them and ends the run.
	unix.Kill(-1, unix.SIGKILL)
}

// finishRun puts the sandbox back as it was before the run, then gives the
// verdict: once the host has it, PID 1 is ready for the next run.
func (sb *initSandbox) finishRun(children *cpuTimes, reapErr string) {
	sb.ctl.send(sb.reset(children, reapErr))
}

// unmountRun removes the last run's filesystems, when the next run brings
// its own: they stay mounted after a run, for the host to empty and hand to
// the next run of the tenant (runRequest.KeepFS). A sandbox that cannot
// unmount them must not serve again, and with PID 1 gone it cannot.
func (sb *initSandbox) unmountRun() {
	if !sb.fsMounted {
		return
	}
	for _, target := range runMounts {
		if err := unix.Unmount(target, unix.MNT_DETACH); err != nil && err != unix.EINVAL {
			os.Exit(1)
		}
	}
	sb.fsMounted = false
}

// start mounts the run's filesystems and has the spawner fork the program.
func (sb *initSandbox) start(req *runRequest, fds []int) (s spawned) {
	var self0 time.Duration
	if !sb.cfg.CgroupV2 && !sb.threadCPU {
		self0 = selfCPU()
	}
	sb.children0 = childrenCPU()
	if len(fds) < req.cgroupFDs()+1 {
		return spawned{err: step("read run", fmt.Errorf("%d descriptors", len(fds)))}
	}
	switch {
	case req.KeepFS && !sb.fsMounted:
		return spawned{err: step("mount", errors.New("no filesystems kept"))}
	case !req.KeepFS:
		sb.unmountRun()
		for i, target := range runMounts {
			if err := unix.MoveMount(fds[runFDWork+i], "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
				return spawned{err: step("mount "+target, err)}
			}
			sb.fsMounted = true
		}
	}
	if err := sb.mountLate(req, fds); err != nil {
		return spawned{err: err}
	}
	// The working directory must be inside the sandbox (runc CVE-2024-21626).
	var st unix.Stat_t
	if err := unix.Stat(req.Dir, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return spawned{err: step("working directory", fmt.Errorf("%s is not a directory inside the sandbox", req.Dir))}
	}
	path := req.Args[0]
	if !strings.Contains(path, "/") {
		var err error
		if path, err = lookPath(path, req.Env); err != nil {
			return spawned{err: step("exec", err)}
		}
	}
	if err := sb.startSpawner(); err != nil {
		return spawned{err: err}
	}
	// The program takes pid runPidBase+1, whatever runs came before.
	if _, err := unix.Pwrite(nsLastPid, []byte(strconv.Itoa(runPidBase)), 0); err != nil {
		return spawned{err: step("reset pids", err)}
	}
	done := make(chan spawned, 1)
	sb.jobs <- spawnJob{path: path, req: req, fds: fds, done: done, self0: self0}
	return <-done
}

// mountLate binds the sandbox's Late mounts at their targets, from the
// trees the host cloned for the run. Only a Detachable sandbox has them,
// and it serves one run: they stay until PID 1 ends.
func (sb *initSandbox) mountLate(req *runRequest, fds []int) error {
	var targets []string
	for _, m := range sb.cfg.Mounts {
		if m.Late {
			targets = append(targets, m.Target)
		}
	}
	if len(targets) != req.Late {
		return step("mount", fmt.Errorf("%d late mounts for %d", req.Late, len(targets)))
	}
	for i, target := range targets {
		if err := unix.MoveMount(fds[req.lateFDs()+i], "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return step("mount "+target, err)
		}
	}
	return nil
}

// startSpawner starts the spawner thread unless it runs.
func (sb *initSandbox) startSpawner() error {
	if sb.jobs != nil {
		return nil
	}
	ready := make(chan error, 1)
	sb.jobs = make(chan spawnJob)
	go sb.spawner(ready)
	if err := <-ready; err != nil {
		sb.jobs = nil
		return err
	}
	return nil
}

// spawner forks every program of the sandbox from one thread of its own,
// made for that once and for good: it has the programs' cgroup namespace,
// no capabilities but those to take the user's ids, and their seccomp
// filter, all of which the forks inherit. It never leaves this goroutine.
func (sb *initSandbox) spawner(ready chan<- error) {
	runtime.LockOSThread()
	err := func() error {
		if sb.cfg.CgroupV2 {
			// Programs go into cgroups below the sandbox's, seen from it.
			return step("cgroup namespace", unix.Setns(sb.cgns, unix.CLONE_NEWCGROUP))
		}
		// This thread alone joins the sandbox's CPU cgroups; in all of
		// the sandbox's cgroups now, it makes them the root.
		for _, fd := range sb.cpuFDs {
			if err := writeFD(fd, "0"); err != nil {
				return step("join cgroup", err)
			}
		}
		return step("cgroup namespace", unix.Unshare(unix.CLONE_NEWCGROUP))
	}()
	if err == nil {
		err = dropCapabilities()
	}
	if err == nil && sb.filter != nil {
		err = step("seccomp", installSeccomp(sb.filter, false))
	} else if err == nil {
		err = step("no_new_privs", unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
	}
	ready <- err
	if err != nil {
		return // the thread ends with the goroutine
	}
	for job := range sb.jobs {
		var at time.Time
		var thread0 time.Duration
		if sb.threadCPU {
			thread0 = threadCPU()
		}
		pid, err := sb.fork(job.path, job.req, job.fds, &at)
		if err == nil {
			// Said from here, not after a switch back to the main
			// thread: the host's wait for the start is that much
			// shorter. The main thread sends nothing until done.
			ev := initEvent{Event: "started"}
			switch {
			case sb.threadCPU:
				ev.SetupCPU = (threadCPU() - thread0).Microseconds()
			case !sb.cfg.CgroupV2:
				ev.SetupCPU = (selfCPU() - job.self0).Microseconds()
			}
			sb.ctl.send(ev)
		}
		job.done <- spawned{pid: pid, err: err, at: at}
	}
}

// fork starts the program on the spawner thread. On cgroup v1 the thread
// steps into the run's cgroups for the fork (moving one thread takes no
// process-wide lock in the kernel, so it never waits for RCU) and back
// out; on v2 clone3 puts the program straight into its cgroup.
func (sb *initSandbox) fork(path string, req *runRequest, fds []int, at *time.Time) (int, error) {
	cgFDs := fds[req.cgroupFDs():]
	if !sb.cfg.CgroupV2 {
		if len(cgFDs) < 2 {
			return 0, step("join cgroup", fmt.Errorf("%d cgroup descriptors", len(cgFDs)))
		}
		for _, fd := range cgFDs[:len(cgFDs)-1] {
			if err := writeFD(fd, "0"); err != nil {
				return 0, step("join cgroup", err)
			}
		}
	}
	sys := &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: innerUser, Gid: innerUser, NoSetGroups: true},
		Setsid:     true,
	}
	if sb.cfg.CgroupV2 {
		sys.UseCgroupFD, sys.CgroupFD = true, cgFDs[0]
	}
	files := []uintptr{uintptr(fds[runFDStdin]), uintptr(fds[runFDStdout]), uintptr(fds[runFDStderr])}
	if req.ResultPipe {
		files = append(files, uintptr(fds[runFDCgroup]))
	}
	attr := &syscall.ProcAttr{
		Dir:   req.Dir,
		Env:   req.Env,
		Files: files,
		Sys:   sys,
	}
	*at = time.Now()
	pid, err := syscall.ForkExec(path, req.Args, attr)
	// A binary the host just wrote into /work may still be open for
	// writing in a child the host is forking at that moment (until that
	// child's exec closes it): the kernel refuses to run it meanwhile.
	for wait := time.Millisecond; err == syscall.ETXTBSY && wait < time.Second; wait *= 2 {
		time.Sleep(wait)
		*at = time.Now()
		pid, err = syscall.ForkExec(path, req.Args, attr)
	}
	if sb.cfg.CgroupV2 {
		if err != nil {
			return 0, step("exec", fmt.Errorf("%s: %w", path, err))
		}
		return pid, nil
	}
	// Back to the sandbox's cgroups. This thread counted in the run's
	// pids.max, one higher so far: the tree can now be one more than the
	// limit at most, which is what the limit becomes.
	for _, fd := range sb.ctFDs {
		if werr := writeFD(fd, "0"); werr != nil && err == nil {
			unix.Kill(pid, unix.SIGKILL)
			return 0, step("leave cgroup", werr)
		}
	}
	if err != nil {
		return 0, step("exec", fmt.Errorf("%s: %w", path, err))
	}
	if err := writeFD(cgFDs[len(cgFDs)-1], strconv.Itoa(req.Processes)); err != nil {
		unix.Kill(pid, unix.SIGKILL)
		return 0, step("pids limit", err)
	}
	return pid, nil
}

// reap ends whatever the run left running and reaps it: the CPU time of
// every process of the run, or why the processes could not all be reaped.
func (sb *initSandbox) reap() (*cpuTimes, string) {
	// As PID 1 we may signal every process of the namespace but ourselves.
	unix.Kill(-1, unix.SIGKILL)
	for {
		_, err := unix.Wait4(-1, nil, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err == unix.ECHILD {
			break
		}
		if err != nil {
			return nil, "reap: " + err.Error()
		}
	}
	end := childrenCPU()
	return &cpuTimes{User: end.User - sb.children0.User, Sys: end.Sys - sb.children0.Sys}, ""
}

// reset is PID 1's verdict on the sandbox once the run's processes are
// reaped: whether nothing of the run remains for the next to see.
func (sb *initSandbox) reset(children *cpuTimes, reapErr string) initEvent {
	if reapErr != "" {
		return initEvent{Event: "reset", Error: reapErr}
	}
	if why := leftovers(sb.netFDs, sb.ipcFDs, sb.mqueue); why != "" {
		return initEvent{Event: "reset", Error: why, Children: children}
	}
	if sb.pts >= 0 {
		if why := ptysLeft(sb.pts); why != "" {
			return initEvent{Event: "reset", Error: why, Children: children}
		}
	}
	if _, err := unix.Pwrite(nsLastPid, []byte("1"), 0); err != nil {
		return initEvent{Event: "reset", Error: "reset pids: " + err.Error(), Children: children}
	}
	// Our RLIMIT_CPU is the runs' backstop: retire long before we reach it.
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	if used := time.Duration(ru.Utime.Nano() + ru.Stime.Nano()); used > time.Duration(sb.cfg.CPUSecs)*time.Second/4 {
		return initEvent{Event: "reset", Error: fmt.Sprintf("PID 1 used %v of CPU", used), Children: children}
	}
	return initEvent{Event: "reset", Clean: true, Children: children}
}

// Files PID 1 keeps open to check, after each run, that the namespaces
// the runs share are empty; reading one again from offset 0 makes the
// kernel write it anew.
var (
	netFiles = []string{"/proc/net/sockstat", "/proc/net/sockstat6", "/proc/net/unix"}
	ipcFiles = []string{"/proc/sysvipc/shm", "/proc/sysvipc/msg", "/proc/sysvipc/sem"}
)

// openAll opens files for reading; those absent (sockstat6 without IPv6)
// are -1.
func openAll(files []string) ([]int, error) {
	fds := make([]int, len(files))
	for i, name := range files {
		fd, err := unix.Open(name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == unix.ENOENT {
			fd = -1
		} else if err != nil {
			return nil, step("open "+name, err)
		}
		fds[i] = fd
	}
	return fds, nil
}

// openMqueue keeps a handle on the IPC namespace's POSIX message queues:
// their filesystem, mounted for a moment and detached, so that no path
// shows it.
func openMqueue() (int, error) {
	const at = "/dev/mqueue"
	if err := os.MkdirAll(at, 0o700); err != nil {
		return -1, step("mqueue", err)
	}
	if err := unix.Mount("mqueue", at, "mqueue", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return -1, step("mqueue", err)
	}
	fd, err := unix.Open(at, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, step("mqueue", err)
	}
	if err := unix.Unmount(at, unix.MNT_DETACH); err != nil {
		return -1, step("mqueue", err)
	}
	return fd, step("mqueue", os.Remove(at))
}

// leftovers says what a run left in the namespaces that outlive its
// processes: TCP connections in TIME_WAIT, orphaned sockets, unix sockets
// kept alive by descriptors in flight, SysV IPC objects, message queues.
func leftovers(netFDs, ipcFDs []int, mqueue int) string {
	var buf [8192]byte
	read := func(fd int) (string, error) {
		n, err := unix.Pread(fd, buf[:], 0)
		if err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	for i, fd := range netFDs {
		if fd < 0 {
			continue
		}
		text, err := read(fd)
		if err != nil {
			return netFiles[i] + ": " + err.Error()
		}
		if strings.HasSuffix(netFiles[i], "unix") {
			if lines := strings.Count(text, "\n"); lines > 1 {
				return fmt.Sprintf("%d unix sockets left", lines-1)
			}
			continue
		}
		for _, line := range strings.Split(text, "\n") {
			proto, counts, ok := strings.Cut(line, ":")
			if !ok || proto == "sockets" {
				continue
			}
			fields := strings.Fields(counts)
			for j := 0; j+1 < len(fields); j += 2 {
				// Not "orphan", "alloc" or "mem": those count the whole
				// host's TCP sockets, whatever their namespace.
				switch fields[j] {
				case "inuse", "tw":
					if fields[j+1] != "0" {
						return fmt.Sprintf("%s: %s %s %s", netFiles[i], proto, fields[j], fields[j+1])
					}
				}
			}
		}
	}
	for i, fd := range ipcFDs {
		if fd < 0 {
			continue
		}
		text, err := read(fd)
		if err != nil {
			return ipcFiles[i] + ": " + err.Error()
		}
		if lines := strings.Count(text, "\n"); lines > 1 {
			return fmt.Sprintf("%s: %d left", ipcFiles[i], lines-1)
		}
	}
	if _, err := unix.Seek(mqueue, 0, 0); err != nil {
		return "mqueue: " + err.Error()
	}
	n, err := unix.ReadDirent(mqueue, buf[:])
	if err != nil {
		return "mqueue: " + err.Error()
	}
	if _, _, names := unix.ParseDirent(buf[:n], -1, nil); len(names) > 0 {
		return fmt.Sprintf("%d message queues left", len(names))
	}
	return ""
}

// nsLastPid is PID 1's handle on the pid namespace's last allocated pid.
var nsLastPid = -1

// runPidBase is where each run's pids start (its first process is
// runPidBase+1), above PID 1's own threads, which share the pid namespace
// and whose number the Go runtime decides. Between runs the last pid is
// set back to 1, so that a thread the runtime adds then takes a pid below
// the runs'. (One it adds while a run lasts takes the next pid of the run's
// and keeps it: later runs' pids skip it. The spawner thread is started
// with the sandbox, which leaves that rare; it is a known gap.)
const runPidBase = 32

// Counters that outlive a run in the namespaces a pooled sandbox keeps, and
// would tell the next run (maybe another client's) what this one did: a
// side and covert channel. The pid namespace's last pid is set back before
// each run (nsLastPid). What cannot be set back retires the sandbox, when
// it moved, before a run of another tenant (container.checkFor): the
// network namespace's counters (counterFiles: every packet on lo, every
// socket error, even a send with no route, moves one of them) and the IPC
// namespace's SysV id sequences (sysvNextID).
var counterFiles = []string{"/proc/net/dev", "/proc/net/snmp", "/proc/net/netstat", "/proc/net/snmp6"}

// sysvNextID are PID 1's handles on kernel.{shm,msg,sem}_next_id of the
// sandbox's IPC namespace (-1 where the kernel lacks them). The ids of SysV
// objects come from a sequence and a cursor that the namespace keeps after
// the objects are gone (shmget after a run that made and removed three
// segments returns id 3, not 0), and no file shows them. A next_id set to
// 0 is what shows: the kernel gives the next new object that id and puts
// the file back to -1. PID 1 made and removed one object of each kind
// first (resetSysvIDs), so that the cursor is where a fresh namespace's is
// after its first object: a run sees the ids a fresh namespace gives.
var sysvNextID = [3]int{-1, -1, -1}

var sysvNextIDFiles = [3]string{"shm_next_id", "msg_next_id", "sem_next_id"}

// resetSysvIDs makes and removes one SysV object of each kind, then sets
// each next_id to 0 (see sysvNextID).
func resetSysvIDs() error {
	const ipcPrivate, ipcCreat, ipcRmid = 0, 0o1000, 0
	id, err := unix.SysvShmGet(ipcPrivate, 1, ipcCreat|0o600)
	if err == nil {
		_, err = unix.SysvShmCtl(id, ipcRmid, nil)
	}
	if err != nil {
		return step("sysv shm", err)
	}
	r, _, e := unix.Syscall(unix.SYS_MSGGET, ipcPrivate, ipcCreat|0o600, 0)
	if e == 0 {
		_, _, e = unix.Syscall(unix.SYS_MSGCTL, r, ipcRmid, 0)
	}
	if e != 0 {
		return step("sysv msg", e)
	}
	r, _, e = unix.Syscall(unix.SYS_SEMGET, ipcPrivate, 1, ipcCreat|0o600)
	if e == 0 {
		_, _, e = unix.Syscall6(unix.SYS_SEMCTL, r, 0, ipcRmid, 0, 0, 0)
	}
	if e != 0 {
		return step("sysv sem", e)
	}
	for i, fd := range sysvNextID {
		if fd < 0 {
			continue
		}
		if _, err := unix.Pwrite(fd, []byte("0"), 0); err != nil {
			return step("reset "+sysvNextIDFiles[i], err)
		}
	}
	return nil
}

// readCounters reads each counter file anew, into the buffers of into
// when given.
func readCounters(fds []int, into [][]byte) ([][]byte, error) {
	if into == nil {
		into = make([][]byte, len(fds))
	}
	for i, fd := range fds {
		if fd < 0 {
			continue
		}
		buf := into[i][:0]
		for {
			if len(buf) == cap(buf) {
				buf = append(buf, make([]byte, 4096)...)[:len(buf)]
			}
			n, err := unix.Pread(fd, buf[len(buf):cap(buf)], int64(len(buf)))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", counterFiles[i], err)
			}
			if n == 0 {
				break
			}
			buf = buf[:len(buf)+n]
		}
		into[i] = buf
	}
	return into, nil
}

// countersMoved says which of the counters the next run would see differ
// from those of a fresh sandbox; "" when none does.
func (sb *initSandbox) countersMoved() string {
	var buf [16]byte
	for i, fd := range sysvNextID {
		if fd < 0 {
			continue
		}
		n, err := unix.Pread(fd, buf[:], 0)
		if err != nil {
			return sysvNextIDFiles[i] + ": " + err.Error()
		}
		if strings.TrimSpace(string(buf[:n])) != "0" {
			return "SysV IPC ids moved (" + sysvNextIDFiles[i] + ")"
		}
	}
	now, err := readCounters(sb.counterFDs, sb.counterScratch)
	if err != nil {
		return err.Error()
	}
	sb.counterScratch = now
	for i := range now {
		if string(now[i]) != string(sb.counterBase[i]) {
			return counterFiles[i] + " moved"
		}
	}
	return ""
}

// mountSource is an opened bind source, or a symlink to recreate.
type mountSource struct {
	mountConfig
	fd      int
	symlink string
	isDir   bool
}

func openMountSources(mounts []mountConfig) ([]mountSource, error) {
	srcs := make([]mountSource, 0, len(mounts))
	for _, m := range mounts {
		s := mountSource{mountConfig: m, fd: -1}
		if m.Late {
			s.isDir = true // bound at each run's start: nothing to open
			srcs = append(srcs, s)
			continue
		}
		if m.Link != "" {
			s.symlink = m.Link
			srcs = append(srcs, s)
			continue
		}
		if m.Target == m.Source {
			// /bin -> usr/bin and friends: recreate the link, bind nothing.
			if link, err := os.Readlink(m.Source); err == nil {
				s.symlink = link
				srcs = append(srcs, s)
				continue
			}
		}
		fd, err := unix.Open(m.Source, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			if m.Optional && errors.Is(err, unix.ENOENT) {
				continue
			}
			return nil, step("mount "+m.Source, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return nil, step("mount "+m.Source, err)
		}
		s.fd, s.isDir = fd, st.Mode&unix.S_IFMT == unix.S_IFDIR
		if (m.Writable || m.Overlay) && !s.isDir {
			return nil, step("mount "+m.Source, errors.New("writable and overlay mounts must be directories"))
		}
		srcs = append(srcs, s)
	}
	return srcs, nil
}

// lookPath finds a program in the sandbox's PATH (from its environment),
// never the host's.
func lookPath(name string, env []string) (string, error) {
	path := "/usr/local/bin:/usr/bin:/bin"
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		candidate := filepath.Join(dir, name)
		var st unix.Stat_t
		if unix.Stat(candidate, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Mode&0o111 != 0 {
			return candidate, nil
		}
	}
	return "", fmt.Errorf("%s: not found in PATH %s", name, path)
}

// buildRoot assembles the new root on a tmpfs and pivots into it.
func buildRoot(srcs []mountSource, pty bool, home string) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return step("make / private", err)
	}
	const newRoot = "/tmp"
	if err := os.MkdirAll(newRoot, 0o755); err != nil {
		return step("new root", err)
	}
	if err := unix.Mount("tmpfs", newRoot, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=4m,nr_inodes=4096,mode=0755"); err != nil {
		return step("new root", err)
	}
	at := func(p string) string { return filepath.Join(newRoot, p) }

	for _, m := range srcs {
		target := at(m.Target)
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return step("mount "+m.Target, err)
		}
		if m.symlink != "" {
			if err := os.Symlink(m.symlink, target); err != nil && !errors.Is(err, os.ErrExist) {
				return step("link "+m.Target, err)
			}
			continue
		}
		if err := mkMountPoint(target, m.isDir); err != nil {
			return step("mount "+m.Target, err)
		}
		if m.Late {
			continue // bound at the run's start (mountLate)
		}
		source := "/proc/self/fd/" + strconv.Itoa(m.fd)
		if m.Overlay {
			if err := overlayMount(source, target); err != nil {
				return step("overlay "+m.Target, err)
			}
			unix.Close(m.fd)
			continue
		}
		if err := unix.Mount(source, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return step("bind "+m.Target, err)
		}
		unix.Close(m.fd)
		attr := uint64(unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV)
		if !m.Writable {
			attr |= unix.MOUNT_ATTR_RDONLY
		}
		if err := unix.MountSetattr(-1, target, unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: attr}); err != nil {
			return step("protect "+m.Target, err)
		}
	}

	// /work, /tmp and /dev/shm are fresh for every run: they are only mount
	// points here.
	if err := os.MkdirAll(at("/work"), 0o755); err != nil {
		return step("work", err)
	}
	if err := os.MkdirAll(at("/tmp"), 0o755); err != nil {
		return step("tmp", err)
	}
	if home != "" {
		if err := os.MkdirAll(at(filepath.Dir(home)), 0o755); err != nil {
			return step("home", err)
		}
		if err := os.Symlink("/work", at(home)); err != nil {
			return step("home", err)
		}
	}
	if err := buildDev(at("/dev"), pty); err != nil {
		return err
	}
	if err := buildProc(at("/proc"), at("/dev/null")); err != nil {
		return err
	}
	if err := writeEtc(at("/etc")); err != nil {
		return step("etc", err)
	}

	if err := unix.Chdir(newRoot); err != nil {
		return step("pivot_root", err)
	}
	// pivot_root(".", ".") stacks the old root on top of the new one;
	// detaching it leaves only the new root (runc's way, no temp dir).
	if err := unix.PivotRoot(".", "."); err != nil {
		return step("pivot_root", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return step("detach old root", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return step("chdir /", err)
	}
	if err := unix.MountSetattr(-1, "/", 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}); err != nil {
		return step("read-only root", err)
	}
	return nil
}

func mkMountPoint(target string, dir bool) error {
	if dir {
		return os.MkdirAll(target, 0o755)
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_RDONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

func mountTmpfs(target, opts string) error {
	if err := os.MkdirAll(target, 0o755); err != nil {
		return err
	}
	return unix.Mount("tmpfs", target, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts)
}

// overlayMount gives target a private writable view of the read-only
// lower directory, with the upper layer on a tmpfs of its own.
func overlayMount(lower, target string) error {
	scratch, err := os.MkdirTemp(filepath.Dir(target), ".ovl")
	if err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", scratch, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
		return err
	}
	upper, work := filepath.Join(scratch, "upper"), filepath.Join(scratch, "work")
	for _, d := range []string{upper, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
		if err := os.Chown(d, innerUser, innerUser); err != nil {
			return err
		}
	}
	if err := os.Chown(target, innerUser, innerUser); err != nil {
		return err
	}
	opts := "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work + ",userxattr"
	if err := unix.Mount("overlay", target, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return err
	}
	// The scratch tmpfs stays mounted under the overlay; hide its name.
	return unix.Unmount(scratch, unix.MNT_DETACH)
}

// buildDev creates a minimal /dev: the harmless character devices bound
// from the host (mknod is impossible in a user namespace) and the fd links;
// with pty, a devpts instance of the sandbox's own at /dev/pts too.
func buildDev(dev string, pty bool) error {
	if err := mountTmpfs(dev, "size=64k,nr_inodes=64,mode=0755"); err != nil {
		return step("mount /dev", err)
	}
	for _, name := range []string{"null", "zero", "full", "random", "urandom"} {
		target := filepath.Join(dev, name)
		if err := mkMountPoint(target, false); err != nil {
			return step("dev "+name, err)
		}
		if err := unix.Mount("/dev/"+name, target, "", unix.MS_BIND, ""); err != nil {
			return step("dev "+name, err)
		}
		if err := unix.MountSetattr(-1, target, 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NOEXEC}); err != nil {
			return step("dev "+name, err)
		}
	}
	if err := os.Mkdir(filepath.Join(dev, "shm"), 0o755); err != nil {
		return step("dev shm", err)
	}
	links := [][2]string{{"/proc/self/fd", "fd"}, {"/proc/self/fd/0", "stdin"}, {"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"}}
	for _, l := range links {
		if err := os.Symlink(l[0], filepath.Join(dev, l[1])); err != nil {
			return step("dev "+l[1], err)
		}
	}
	if pty {
		return step("dev pts", mountDevpts(dev))
	}
	return nil
}

// maxPTYs is how many terminals a sandbox with Spec.PTY may have open.
const maxPTYs = 64

// mountDevpts mounts a new devpts instance at dev/pts, apart from the
// host's and every other sandbox's, and links dev/ptmx to its ptmx. It
// takes no gid= option: the kernel refuses a group unmapped in the
// sandbox's user namespace (the host's tty group, 5), so each terminal
// belongs to the group of whoever opened ptmx, the program's own. A
// sandbox has at most maxPTYs terminals at once: the host's sandboxes
// share the kernel's (kernel.pty.max).
func mountDevpts(dev string) error {
	pts := filepath.Join(dev, "pts")
	if err := os.Mkdir(pts, 0o755); err != nil {
		return err
	}
	opts := "newinstance,ptmxmode=0666,mode=0620,max=" + strconv.Itoa(maxPTYs)
	if err := unix.Mount("devpts", pts, "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, opts); err != nil {
		return err
	}
	return os.Symlink("pts/ptmx", filepath.Join(dev, "ptmx"))
}

// ptysLeft says which terminal a run left in the sandbox's devpts (pts, a
// descriptor of its directory), if it left one: the next run must see none
// but its own.
func ptysLeft(pts int) string {
	var buf [4096]byte
	if _, err := unix.Seek(pts, 0, 0); err != nil {
		return "pts: " + err.Error()
	}
	n, err := unix.ReadDirent(pts, buf[:])
	if err != nil {
		return "pts: " + err.Error()
	}
	_, _, names := unix.ParseDirent(buf[:n], -1, nil)
	for _, name := range names {
		if name != "ptmx" {
			return "terminal /dev/pts/" + name + " left"
		}
	}
	return ""
}

// procMasked are /proc entries that reveal or poke at the host kernel.
var procMasked = []string{"kcore", "keys", "timer_list", "sched_debug", "sysrq-trigger", "kallsyms", "kmsg", "latency_stats", "config.gz"}

// procMaskedDirs are /proc directories hidden under an empty read-only
// tmpfs; procReadOnly stay visible but read-only (Docker's choice of both).
var (
	procMaskedDirs = []string{"acpi", "asound", "scsi"}
	procReadOnly   = []string{"bus", "fs", "irq", "sys"}
)

func buildProc(proc, devNull string) error {
	if err := os.MkdirAll(proc, 0o555); err != nil {
		return step("mount /proc", err)
	}
	if err := unix.Mount("proc", proc, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "hidepid=invisible"); err != nil {
		// hidepid needs kernel 5.8; a private pid namespace is the real wall.
		if err := unix.Mount("proc", proc, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return step("mount /proc", err)
		}
	}
	// Runs in a reused sandbox all see the same small pids: PID 1 sets
	// where the next one is taken from before each, through this handle
	// opened before /proc/sys turns read-only.
	fd, err := unix.Open(filepath.Join(proc, "sys/kernel/ns_last_pid"), unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return step("open ns_last_pid", err)
	}
	nsLastPid = fd
	for i, name := range sysvNextIDFiles {
		fd, err := unix.Open(filepath.Join(proc, "sys/kernel", name), unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil && err != unix.ENOENT {
			return step("open "+name, err)
		}
		if err == nil {
			sysvNextID[i] = fd
		}
	}
	for _, name := range procMasked {
		p := filepath.Join(proc, name)
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if err := unix.Mount(devNull, p, "", unix.MS_BIND, ""); err != nil {
			return step("mask /proc/"+name, err)
		}
	}
	for _, name := range procMaskedDirs {
		p := filepath.Join(proc, name)
		if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
			continue
		}
		if err := unix.Mount("tmpfs", p, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=0,mode=0555"); err != nil {
			return step("mask /proc/"+name, err)
		}
	}
	for _, name := range procReadOnly {
		p := filepath.Join(proc, name)
		if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
			continue
		}
		if err := unix.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return step("protect /proc/"+name, err)
		}
		if err := unix.MountSetattr(-1, p, unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC}); err != nil {
			return step("protect /proc/"+name, err)
		}
	}
	return nil
}

// writeEtc gives the sandbox a user database naming its two users and a
// hosts file, so programs that look themselves up do not fail.
func writeEtc(etc string) error {
	if err := os.MkdirAll(etc, 0o755); err != nil {
		return err
	}
	files := map[string]string{
		"passwd": "root:x:0:0:root:/tmp:/bin/sh\nsandbox:x:1000:1000:sandbox:/tmp:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
		"group":  "root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n",
		"hosts":  "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost\n",
	}
	for name, content := range files {
		p := filepath.Join(etc, name)
		if _, err := os.Lstat(p); err == nil {
			continue // a configured mount provides it
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// loopbackUp brings up lo in the run's private network namespace, the only
// interface it has.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// coreLimit is the programs' RLIMIT_CORE, soft and hard. Not 0: when the
// host's kernel.core_pattern is a pipe (systemd-coredump, apport) the
// kernel ignores the limit and hands every crash to the host's helper,
// which logs it and reads the process; exactly 1 is the value it keeps
// for the helper's own crashes and aborts the dump on ("RLIMIT_CORE is set
// to 1, aborting core", fs/coredump.c), and a file dump needs at least a
// page, so no core file is written either. The seccomp filter keeps a
// program from changing it (setrlimit and prlimit64 on RLIMIT_CORE).
const coreLimit = 1

func setRlimits(cfg *initConfig) error {
	limits := []struct {
		res int
		val uint64
	}{
		{unix.RLIMIT_CORE, coreLimit},
		{unix.RLIMIT_FSIZE, uint64(cfg.FileSize)},
		{unix.RLIMIT_STACK, uint64(cfg.Stack)},
		{unix.RLIMIT_MEMLOCK, 0},
		{unix.RLIMIT_CPU, uint64(cfg.CPUSecs)},
	}
	for _, l := range limits {
		if err := unix.Setrlimit(l.res, &unix.Rlimit{Cur: l.val, Max: l.val}); err != nil {
			return step("rlimit "+strconv.Itoa(l.res), err)
		}
	}
	// syscall.Setrlimit, so the runtime does not restore its own NOFILE in
	// the child.
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: uint64(cfg.NoFile), Max: uint64(cfg.NoFile)}); err != nil {
		return step("rlimit nofile", err)
	}
	return nil
}

// lastCap is the kernel's highest capability number, read once.
var (
	lastCapOnce sync.Once
	lastCap     int
)

// dropCapabilities empties the bounding, ambient and inheritable sets and
// keeps only CAP_SETUID and CAP_SETGID in this thread, which the fork of the
// program needs to take the user's ids; the program's execve then leaves it
// with no capabilities at all.
func dropCapabilities() error {
	lastCapOnce.Do(func() {
		lastCap = 40
		if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
			if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				lastCap = n
			}
		}
	})
	for c := 0; c <= lastCap; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return step("drop bounding capability "+strconv.Itoa(c), err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return step("clear ambient capabilities", err)
	}
	keep := uint32(1<<unix.CAP_SETUID | 1<<unix.CAP_SETGID)
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	data := [2]unix.CapUserData{{Effective: keep, Permitted: keep}}
	if err := unix.Capset(&hdr, (*unix.CapUserData)(unsafe.Pointer(&data[0]))); err != nil {
		return step("drop capabilities", err)
	}
	return nil
}
