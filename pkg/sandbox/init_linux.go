package sandbox

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// initArg0 marks a re-execution of the binary as a sandbox's PID 1.
const initArg0 = "sandbox-run:init"

// File descriptors of the init process, set up by the host.
const (
	fdConfig = 3 // host → init: initConfig as JSON, then EOF
	fdStatus = 4 // init → host: initEvent JSON lines
	fdWork   = 5 // detached tmpfs mount that becomes /work
	fdExe    = 6 // the binary itself
	fdCover  = 7 // coverage directory, in -cover test builds only
)

// Inside ids: init is root of the user namespace (mapped to an unprivileged
// host uid); the program runs as an ordinary user.
const (
	innerRoot = 0
	innerUser = 1000
)

// initConfig is everything PID 1 needs to build the sandbox.
type initConfig struct {
	Args     []string
	Env      []string
	Dir      string
	Hostname string
	Mounts   []mountConfig
	TmpSize  int64
	Inodes   int
	FileSize int64
	NoFile   int
	Stack    int64
	CPUSecs  int64 // RLIMIT_CPU backstop
	Seccomp  bool
}

// mountConfig is a Mount with its Target filled in.
type mountConfig struct {
	Source, Target              string
	Writable, Overlay, Optional bool
}

// initEvent reports progress from PID 1 to the host.
type initEvent struct {
	Event   string `json:"event"`                 // "started", "exited", "error"
	InitCPU int64  `json:"init_cpu_us,omitempty"` // PID 1's CPU time when it forked the program
	// InitCPUAtGo is PID 1's CPU time when it learnt it was in its cgroup:
	// on cgroup v1 only what follows is charged to the run.
	InitCPUAtGo int64  `json:"init_cpu_at_go_us,omitempty"`
	ExitCode    int    `json:"exit_code"`
	Signal      int    `json:"signal,omitempty"`
	Step        string `json:"step,omitempty"`
	Error       string `json:"error,omitempty"`
	// ScratchFull and ScratchLargest describe /tmp and /dev/shm at the
	// end of a failed run: full, and the size of their largest file.
	ScratchFull    bool  `json:"scratch_full,omitempty"`
	ScratchLargest int64 `json:"scratch_largest,omitempty"`
}

// Init turns this process into a sandbox's PID 1 when it was started as one
// and never returns in that case; otherwise it returns at once. Call it first
// in main (and in TestMain of tests that run sandboxes).
func Init() {
	if len(os.Args) == 0 || os.Args[0] != initArg0 {
		return
	}
	// Capabilities and credentials are per thread: every step below, and the
	// fork of the program, must happen on this one thread.
	runtime.LockOSThread()
	status := os.NewFile(fdStatus, "status")
	send := func(ev initEvent) {
		b, _ := json.Marshal(ev)
		status.Write(append(b, '\n'))
	}
	code, err := sandboxInit(send)
	if err != nil {
		var se *SetupError
		ev := initEvent{Event: "error", Error: err.Error()}
		if errors.As(err, &se) {
			ev.Step, ev.Error = se.Step, se.Err.Error()
		}
		send(ev)
		os.Exit(1)
	}
	os.Exit(code)
}

func step(name string, err error) error {
	if err == nil {
		return nil
	}
	return &SetupError{Step: name, Err: err}
}

func sandboxInit(send func(initEvent)) (int, error) {
	var cfg initConfig
	cfgFile := os.NewFile(fdConfig, "config")
	cfgIn := bufio.NewReader(cfgFile)
	line, err := cfgIn.ReadBytes('\n')
	if err != nil {
		return 0, step("read config", err)
	}
	if err := json.Unmarshal(line, &cfg); err != nil {
		return 0, step("read config", err)
	}
	srcs, err := openMountSources(cfg.Mounts)
	if err != nil {
		return 0, err
	}
	// Until now we held the host's root uid (unmapped here) so that bind
	// sources in directories only root can search could be opened. From
	// here on we are the namespace's root, an unprivileged uid on the host.
	if err := syscall.Setresgid(innerRoot, innerRoot, innerRoot); err != nil {
		return 0, step("setresgid", err)
	}
	if err := syscall.Setresuid(innerRoot, innerRoot, innerRoot); err != nil {
		return 0, step("setresuid", err)
	}
	// Changing uid cleared the parent-death signal the host set: arm it
	// again. Had the host died before this, the "go" it never sends ends
	// us below (the config pipe reads EOF).
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return 0, step("parent-death signal", err)
	}
	if err := buildRoot(&cfg, srcs); err != nil {
		return 0, err
	}
	if err := unix.Sethostname([]byte(cfg.Hostname)); err != nil {
		return 0, step("hostname", err)
	}
	if err := loopbackUp(); err != nil {
		return 0, step("loopback", err)
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return 0, step("dumpable", err)
	}
	if err := setRlimits(&cfg); err != nil {
		return 0, err
	}
	// The host sends "go" once we are in the run's cgroup (on cgroup v1 it
	// moves us there while we build the root). A new cgroup namespace then
	// makes that cgroup the root of what the program can see.
	if msg, err := cfgIn.ReadString('\n'); err != nil || msg != "go\n" {
		return 0, step("wait for the cgroup", fmt.Errorf("got %q, %v", msg, err))
	}
	cfgFile.Close()
	cpuAtGo := selfCPU()
	if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
		return 0, step("cgroup namespace", err)
	}
	// Nothing but stdio may reach the program; our status pipe closes on exec.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return 0, step("close fds", err)
	}
	if err := dropCapabilities(); err != nil {
		return 0, err
	}
	if cfg.Seccomp {
		filter, err := seccompFilter()
		if err != nil {
			return 0, step("seccomp", err)
		}
		if err := installSeccomp(filter); err != nil {
			return 0, step("seccomp", err)
		}
	} else if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return 0, step("no_new_privs", err)
	}

	path := cfg.Args[0]
	if !strings.Contains(path, "/") {
		if path, err = lookPath(path, cfg.Env); err != nil {
			return 0, step("exec", err)
		}
	}
	cpuAtFork := selfCPU()
	main, err := syscall.ForkExec(path, cfg.Args, &syscall.ProcAttr{
		Dir:   cfg.Dir,
		Env:   cfg.Env,
		Files: []uintptr{0, 1, 2},
		Sys: &syscall.SysProcAttr{
			Credential: &syscall.Credential{Uid: innerUser, Gid: innerUser, NoSetGroups: true},
			Setsid:     true,
		},
	})
	if err != nil {
		return 0, step("exec", fmt.Errorf("%s: %w", path, err))
	}
	send(initEvent{Event: "started", InitCPU: cpuAtFork.Microseconds(), InitCPUAtGo: cpuAtGo.Microseconds()})
	// The program owns stdio now; nothing of ours may reach its stderr.
	if null, err := unix.Open("/dev/null", unix.O_WRONLY|unix.O_CLOEXEC, 0); err == nil {
		unix.Dup3(null, 2, unix.O_CLOEXEC)
		unix.Close(null)
	}
	// As PID 1 we reap every orphan; the run ends when the program does, and
	// our exit makes the kernel kill whatever else is left in the namespace.
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, step("wait", err)
		}
		if pid != main {
			continue
		}
		ev := initEvent{Event: "exited", ExitCode: ws.ExitStatus()}
		if ws.Signaled() {
			ev.ExitCode, ev.Signal = -1, int(ws.Signal())
		}
		if ev.ExitCode != 0 {
			// The host cannot see /tmp and /dev/shm: say whether the run
			// filled them, so a failure there is reported as a limit.
			for _, dir := range []string{"/tmp", "/dev/shm"} {
				ev.ScratchFull = ev.ScratchFull || tmpfsFull(dir)
				ev.ScratchLargest = max(ev.ScratchLargest, largestFile(dir, 0))
			}
		}
		send(ev)
		return 0, nil
	}
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

func tmpfsFull(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && (st.Bfree == 0 || st.Ffree == 0)
}

// largestFile walks dir without following links (what the program left
// there is untrusted) and returns the size of its largest regular file.
func largestFile(dir string, depth int) int64 {
	entries, err := os.ReadDir(dir)
	if err != nil || depth > 16 {
		return 0
	}
	var biggest int64
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil {
			continue
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			biggest = max(biggest, st.Size)
		case unix.S_IFDIR:
			biggest = max(biggest, largestFile(p, depth+1))
		}
	}
	return biggest
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

// selfCPU is this process's own CPU time so far.
func selfCPU() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// buildRoot assembles the new root on a tmpfs and pivots into it.
func buildRoot(cfg *initConfig, srcs []mountSource) error {
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

	// /work: the host's detached tmpfs, or a private one.
	if err := os.MkdirAll(at("/work"), 0o755); err != nil {
		return step("work", err)
	}
	if err := unix.MoveMount(fdWork, "", unix.AT_FDCWD, at("/work"), unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return step("mount /work", err)
	}
	unix.Close(fdWork)
	tmpOpts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=1777", cfg.TmpSize, cfg.Inodes)
	if err := mountTmpfs(at("/tmp"), tmpOpts); err != nil {
		return step("mount /tmp", err)
	}
	if err := buildDev(at("/dev")); err != nil {
		return err
	}
	if err := mountTmpfs(at("/dev/shm"), tmpOpts); err != nil {
		return step("mount /dev/shm", err)
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
	// The working directory must be inside the new root (runc CVE-2024-21626).
	var st unix.Stat_t
	if err := unix.Stat(cfg.Dir, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return step("working directory", fmt.Errorf("%s is not a directory inside the sandbox", cfg.Dir))
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
// from the host (mknod is impossible in a user namespace) and the fd links.
func buildDev(dev string) error {
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
	links := [][2]string{{"/proc/self/fd", "fd"}, {"/proc/self/fd/0", "stdin"}, {"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"}}
	for _, l := range links {
		if err := os.Symlink(l[0], filepath.Join(dev, l[1])); err != nil {
			return step("dev "+l[1], err)
		}
	}
	return nil
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

func setRlimits(cfg *initConfig) error {
	limits := []struct {
		res int
		val uint64
	}{
		{unix.RLIMIT_CORE, 0},
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

// dropCapabilities empties the bounding, ambient and inheritable sets and
// keeps only CAP_SETUID and CAP_SETGID in this thread, which the fork of the
// program needs to take the user's ids; the program's execve then leaves it
// with no capabilities at all.
func dropCapabilities() error {
	last := 40
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			last = n
		}
	}
	for c := 0; c <= last; c++ {
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
