package sandbox

import (
	"fmt"
	"runtime"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"
)

// seccompArch is what the filter needs to know of the running architecture.
type seccompArch struct {
	audit    uint32            // seccomp_data.arch of native calls
	x32      bool              // amd64: numbers with the x32 bit are another ABI
	syscalls map[string]uint32 // name → number, from x/sys/unix's SYS_* constants
}

// seccompNative is set by seccomp_table_$GOARCH.go; nil elsewhere, so the
// sandbox refuses to run rather than run unfiltered. The tables are made with
//
//	awk '$1 ~ /^SYS_/ && $2 == "=" { printf "\"%s\": %s,\n", tolower(substr($1, 5)), $3 }' \
//		$(go env GOMODCACHE)/golang.org/x/sys@v0.49.0/unix/zsysnum_linux_$GOARCH.go
//
// wrapped in an init that sets audit and x32, and gofmt.
var seccompNative *seccompArch

// seccompAllow is moby's profiles/seccomp/default.json unconditional allow
// list (plus its per-arch entries) without what seccompDeny takes out:
// adjtimex, clock_adjtime(64), io_uring_*, name_to_handle_at, and the
// kernel>=4.8 grant of ptrace and process_vm_*; setrlimit and prlimit64
// are checked by argument instead (see seccompLeaf). Names an arch lacks
// are skipped.
var seccompAllow = []string{
	"accept", "accept4", "access", "alarm", "bind", "brk", "capget", "capset",
	"chdir", "chmod", "chown", "chown32",
	"clock_getres", "clock_getres_time64", "clock_gettime", "clock_gettime64",
	"clock_nanosleep", "clock_nanosleep_time64", "close", "close_range",
	"connect", "copy_file_range", "creat", "dup", "dup2", "dup3",
	"epoll_create", "epoll_create1", "epoll_ctl", "epoll_ctl_old",
	"epoll_pwait", "epoll_pwait2", "epoll_wait", "epoll_wait_old",
	"eventfd", "eventfd2", "execve", "execveat", "exit", "exit_group",
	"faccessat", "faccessat2", "fadvise64", "fadvise64_64", "fallocate",
	"fanotify_mark", "fchdir", "fchmod", "fchmodat", "fchown", "fchown32",
	"fchownat", "fcntl", "fcntl64", "fdatasync", "fgetxattr", "flistxattr",
	"flock", "fork", "fremovexattr", "fsetxattr", "fstat", "fstat64",
	"fstatat64", "fstatfs", "fstatfs64", "fsync", "ftruncate", "ftruncate64",
	"futex", "futex_time64", "futex_waitv", "futimesat", "getcpu", "getcwd",
	"getdents", "getdents64", "getegid", "getegid32", "geteuid", "geteuid32",
	"getgid", "getgid32", "getgroups", "getgroups32", "getitimer",
	"getpeername", "getpgid", "getpgrp", "getpid", "getppid", "getpriority",
	"getrandom", "getresgid", "getresgid32", "getresuid", "getresuid32",
	"getrlimit", "get_robust_list", "getrusage", "getsid", "getsockname",
	"getsockopt", "get_thread_area", "gettid", "gettimeofday", "getuid",
	"getuid32", "getxattr", "inotify_add_watch", "inotify_init",
	"inotify_init1", "inotify_rm_watch", "io_cancel", "ioctl", "io_destroy",
	"io_getevents", "io_pgetevents", "io_pgetevents_time64", "ioprio_get",
	"ioprio_set", "io_setup", "io_submit", "ipc", "kill",
	"landlock_add_rule", "landlock_create_ruleset", "landlock_restrict_self",
	"lchown", "lchown32", "lgetxattr", "link", "linkat", "listen",
	"listxattr", "llistxattr", "_llseek", "lremovexattr", "lseek",
	"lsetxattr", "lstat", "lstat64", "madvise", "membarrier", "memfd_create",
	"memfd_secret", "mincore", "mkdir", "mkdirat", "mknod", "mknodat",
	"mlock", "mlock2", "mlockall", "mmap", "mmap2", "mprotect",
	"mq_getsetattr", "mq_notify", "mq_open", "mq_timedreceive",
	"mq_timedreceive_time64", "mq_timedsend", "mq_timedsend_time64",
	"mq_unlink", "mremap", "msgctl", "msgget", "msgrcv", "msgsnd", "msync",
	"munlock", "munlockall", "munmap", "nanosleep", "newfstatat",
	"_newselect", "open", "openat", "openat2", "pause", "pidfd_open",
	"pidfd_send_signal", "pipe", "pipe2", "pkey_alloc", "pkey_free",
	"pkey_mprotect", "poll", "ppoll", "ppoll_time64", "prctl", "pread64",
	"preadv", "preadv2", "process_mrelease", "pselect6",
	"pselect6_time64", "pwrite64", "pwritev", "pwritev2", "read",
	"readahead", "readlink", "readlinkat", "readv", "recv", "recvfrom",
	"recvmmsg", "recvmmsg_time64", "recvmsg", "remap_file_pages",
	"removexattr", "rename", "renameat", "renameat2", "restart_syscall",
	"rmdir", "rseq", "rt_sigaction", "rt_sigpending", "rt_sigprocmask",
	"rt_sigqueueinfo", "rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait",
	"rt_sigtimedwait_time64", "rt_tgsigqueueinfo", "sched_getaffinity",
	"sched_getattr", "sched_getparam", "sched_get_priority_max",
	"sched_get_priority_min", "sched_getscheduler", "sched_rr_get_interval",
	"sched_rr_get_interval_time64", "sched_setaffinity", "sched_setattr",
	"sched_setparam", "sched_setscheduler", "sched_yield", "seccomp",
	"select", "semctl", "semget", "semop", "semtimedop", "semtimedop_time64",
	"send", "sendfile", "sendfile64", "sendmmsg", "sendmsg", "sendto",
	"setfsgid", "setfsgid32", "setfsuid", "setfsuid32", "setgid", "setgid32",
	"setgroups", "setgroups32", "setitimer", "setpgid", "setpriority",
	"setregid", "setregid32", "setresgid", "setresgid32", "setresuid",
	"setresuid32", "setreuid", "setreuid32", "set_robust_list",
	"setsid", "setsockopt", "set_thread_area", "set_tid_address", "setuid",
	"setuid32", "setxattr", "shmat", "shmctl", "shmdt", "shmget", "shutdown",
	"sigaltstack", "signalfd", "signalfd4", "sigprocmask", "sigreturn",
	"socketcall", "socketpair", "splice", "stat", "stat64", "statfs",
	"statfs64", "statx", "symlink", "symlinkat", "sync", "sync_file_range",
	"syncfs", "sysinfo", "tee", "tgkill", "time", "timer_create",
	"timer_delete", "timer_getoverrun", "timer_gettime", "timer_gettime64",
	"timer_settime", "timer_settime64", "timerfd_create", "timerfd_gettime",
	"timerfd_gettime64", "timerfd_settime", "timerfd_settime64", "times",
	"tkill", "truncate", "truncate64", "ugetrlimit", "umask", "uname",
	"unlink", "unlinkat", "utime", "utimensat", "utimensat_time64", "utimes",
	"vfork", "vmsplice", "wait4", "waitid", "waitpid", "write", "writev",
	// moby's per-arch entries.
	"arm_fadvise64_64", "arm_sync_file_range", "sync_file_range2",
	"breakpoint", "cacheflush", "set_tls", "arch_prctl", "modify_ldt",
}

// seccompDeny fails with EPERM: the caller learns it is forbidden, rather
// than absent. The last line goes beyond SECURITY.md's list: moby gates
// these on a capability the sandbox never grants.
var seccompDeny = []string{
	"keyctl", "add_key", "request_key", "bpf", "perf_event_open",
	"userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
	"mount", "umount", "umount2", "pivot_root", "fsopen", "fsconfig",
	"fsmount", "fspick", "open_tree", "move_mount", "mount_setattr",
	"unshare", "setns", "ptrace", "process_vm_readv", "process_vm_writev",
	"open_by_handle_at", "name_to_handle_at", "kexec_load",
	"kexec_file_load", "init_module", "finit_module", "delete_module",
	"reboot", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd",
	"syslog", "clock_settime", "clock_settime64", "clock_adjtime",
	"clock_adjtime64", "settimeofday", "adjtimex", "stime",
	"lookup_dcookie", "vhangup", "chroot", "iopl", "ioperm", "nfsservctl",
	"uselib", "ustat", "sysfs", "_sysctl",
	"sethostname", "setdomainname", "fanotify_init", "kcmp", "pidfd_getfd",
	"process_madvise",
}

const (
	seccompOffNr   = 0
	seccompOffArch = 4
	// Low 32 bits of args[0]; both supported arches are little-endian.
	seccompOffArg0Lo = 16
	seccompOffArg1Lo = 24
	seccompOffArg2Lo = 32
	seccompOffArg2Hi = 36

	seccompMaxInsns = 4096 // BPF_MAXINSNS
	seccompX32Bit   = 0x40000000

	seccompRetAllow  = unix.SECCOMP_RET_ALLOW
	seccompRetKill   = unix.SECCOMP_RET_KILL_PROCESS
	seccompRetEPERM  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	seccompRetENOSYS = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)

	// clone(2) flags that would make namespaces. CLONE_NEWTIME (0x80) is in
	// clone's exit-signal byte, where it can only be an invalid signal.
	seccompCloneNS = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
		unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET |
		unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME
)

// seccompSpecial are the syscalls allowed or denied by their arguments.
var seccompSpecial = []string{"clone", "socket", "personality", "setrlimit", "prlimit64"}

// seccompPersonas are the personality(2) values moby allows: PER_LINUX,
// PER_LINUX32, UNAME26, PER_LINUX32|UNAME26 and the 0xffffffff query.
var seccompPersonas = []uint32{0x0, 0x8, 0x20000, 0x20008, 0xffffffff}

// seccompAction is what the filter does for one syscall number: return ret,
// or, when special is set, run the argument check for that syscall.
type seccompAction struct {
	ret     uint32
	special string
}

// seccompPolicy maps each syscall number of arch that the policy names to
// its action; every other number gets ENOSYS.
func seccompPolicy(arch *seccompArch, allowClone3 bool) (map[uint32]seccompAction, error) {
	policy := make(map[uint32]seccompAction)
	add := func(name string, act seccompAction) error {
		nr, ok := arch.syscalls[name]
		if !ok {
			return nil
		}
		if _, dup := policy[nr]; dup {
			return fmt.Errorf("seccomp: syscall %s (%d) is named twice in the policy", name, nr)
		}
		policy[nr] = act
		return nil
	}
	for _, name := range seccompAllow {
		if err := add(name, seccompAction{ret: seccompRetAllow}); err != nil {
			return nil, err
		}
	}
	for _, name := range seccompDeny {
		if err := add(name, seccompAction{ret: seccompRetEPERM}); err != nil {
			return nil, err
		}
	}
	// glibc falls back from clone3 to clone only on ENOSYS, and clone3's
	// flags sit in memory where the filter cannot check them.
	// Where clone3 must pass (see seccompFilterFor), nested user
	// namespaces are shut off by a namespace limit instead.
	clone3 := seccompAction{ret: seccompRetENOSYS}
	if allowClone3 {
		clone3.ret = seccompRetAllow
	}
	if err := add("clone3", clone3); err != nil {
		return nil, err
	}
	for _, name := range seccompSpecial {
		if err := add(name, seccompAction{special: name}); err != nil {
			return nil, err
		}
	}
	return policy, nil
}

// seccompFilter returns the allow-list filter for the running architecture.
func seccompFilter() ([]unix.SockFilter, error) { return seccompFilterFor(false) }

// seccompFilterFor returns the filter with clone3 allowed or not. On cgroup
// v2 the program is cloned into its cgroup with clone3 by a thread that
// already carries the filter, so there clone3 passes; the sandbox's user
// namespace then allows no nested user namespace (user.max_user_namespaces
// is 0 in it), which is what clone3's unchecked flags could have made.
func seccompFilterFor(allowClone3 bool) ([]unix.SockFilter, error) {
	arch := seccompNative
	if arch == nil {
		return nil, fmt.Errorf("seccomp: no filter for %s", runtime.GOARCH)
	}
	policy, err := seccompPolicy(arch, allowClone3)
	if err != nil {
		return nil, err
	}

	// Cut [0, 2^32) into runs of numbers with one action, gaps being
	// ENOSYS, so the search below compares against run starts only.
	nrs := make([]uint32, 0, len(policy))
	for nr := range policy {
		nrs = append(nrs, nr)
	}
	slices.Sort(nrs)
	type run struct {
		lo  uint32
		act seccompAction
	}
	var runs []run
	add := func(r run) {
		if n := len(runs); n > 0 && runs[n-1].act == r.act && r.act.special == "" {
			return
		}
		runs = append(runs, r)
	}
	enosys := seccompAction{ret: seccompRetENOSYS}
	next := uint32(0) // first number not yet in runs
	for _, nr := range nrs {
		if nr != next {
			add(run{next, enosys})
		}
		add(run{nr, policy[nr]})
		next = nr + 1
	}
	if next != 0 || len(runs) == 0 {
		add(run{next, enosys})
	}

	var search func(rs []run) []unix.SockFilter
	search = func(rs []run) []unix.SockFilter {
		if len(rs) == 1 {
			return seccompLeaf(rs[0].act)
		}
		mid := len(rs) / 2
		below, above := search(rs[:mid]), search(rs[mid:])
		var prog []unix.SockFilter
		if len(below) <= 255 {
			prog = append(prog, seccompJump(unix.BPF_JGE, rs[mid].lo, uint8(len(below)), 0))
		} else {
			// Conditional jumps reach 255 instructions; BPF_JA reaches any.
			prog = append(prog,
				seccompJump(unix.BPF_JGE, rs[mid].lo, 0, 1),
				seccompStmt(unix.BPF_JMP|unix.BPF_JA, uint32(len(below))))
		}
		prog = append(prog, below...)
		return append(prog, above...)
	}

	prog := []unix.SockFilter{
		seccompStmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, seccompOffArch),
		seccompJump(unix.BPF_JEQ, arch.audit, 1, 0),
		seccompStmt(unix.BPF_RET|unix.BPF_K, seccompRetKill),
		seccompStmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, seccompOffNr),
	}
	if arch.x32 {
		prog = append(prog,
			seccompJump(unix.BPF_JGE, seccompX32Bit, 0, 1),
			seccompStmt(unix.BPF_RET|unix.BPF_K, seccompRetKill))
	}
	prog = append(prog, search(runs)...)
	if len(prog) > seccompMaxInsns {
		return nil, fmt.Errorf("seccomp: filter has %d instructions, over %d", len(prog), seccompMaxInsns)
	}
	return prog, nil
}

// seccompLeaf is the code for one action, ending in returns on every path.
func seccompLeaf(act seccompAction) []unix.SockFilter {
	ret := func(k uint32) unix.SockFilter { return seccompStmt(unix.BPF_RET|unix.BPF_K, k) }
	loadArg0 := seccompStmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, seccompOffArg0Lo)
	switch act.special {
	case "clone":
		// The kernel uses only the low 32 bits of clone's flags.
		return []unix.SockFilter{
			loadArg0,
			seccompJump(unix.BPF_JSET, seccompCloneNS, 0, 1),
			ret(seccompRetEPERM),
			ret(seccompRetAllow),
		}
	case "socket":
		// domain is an int: the kernel ignores the high word.
		return []unix.SockFilter{
			loadArg0,
			seccompJump(unix.BPF_JEQ, unix.AF_VSOCK, 0, 1),
			ret(seccompRetEPERM),
			ret(seccompRetAllow),
		}
	case "personality":
		// persona is an unsigned int, so the low word is all of it.
		prog := []unix.SockFilter{loadArg0}
		n := len(seccompPersonas)
		for i, v := range seccompPersonas {
			prog = append(prog, seccompJump(unix.BPF_JEQ, v, uint8(n-i), 0))
		}
		return append(prog, ret(seccompRetEPERM), ret(seccompRetAllow))
	case "setrlimit":
		// RLIMIT_CORE stays 1 (see setRlimits): a program that could set
		// it to 0 or more would have its crashes piped to the host's core
		// handler. resource is an unsigned int.
		return []unix.SockFilter{
			loadArg0,
			seccompJump(unix.BPF_JEQ, unix.RLIMIT_CORE, 0, 1),
			ret(seccompRetEPERM),
			ret(seccompRetAllow),
		}
	case "prlimit64":
		// prlimit64(pid, resource, new, old): reading RLIMIT_CORE (new is
		// NULL, how glibc's getrlimit asks) passes, setting it does not.
		return []unix.SockFilter{
			seccompStmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, seccompOffArg1Lo),
			seccompJump(unix.BPF_JEQ, unix.RLIMIT_CORE, 0, 5),
			seccompStmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, seccompOffArg2Lo),
			seccompJump(unix.BPF_JEQ, 0, 0, 2),
			seccompStmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, seccompOffArg2Hi),
			seccompJump(unix.BPF_JEQ, 0, 1, 0),
			ret(seccompRetEPERM),
			ret(seccompRetAllow),
		}
	}
	return []unix.SockFilter{ret(act.ret)}
}

func seccompStmt(code uint16, k uint32) unix.SockFilter {
	return unix.SockFilter{Code: code, K: k}
}

func seccompJump(op uint16, k uint32, jt, jf uint8) unix.SockFilter {
	return unix.SockFilter{Code: unix.BPF_JMP | op | unix.BPF_K, Jt: jt, Jf: jf, K: k}
}

// installSeccomp sets no_new_privs and installs filter on every thread of the process
// (seccomp(2) SECCOMP_SET_MODE_FILTER with SECCOMP_FILTER_FLAG_TSYNC); it must not allocate
// after the filter is live beyond what the Go runtime needs.
func installSeccomp(filter []unix.SockFilter, allThreads bool) error {
	if len(filter) == 0 || len(filter) > seccompMaxInsns {
		return fmt.Errorf("seccomp: filter has %d instructions", len(filter))
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}

	// no_new_privs is per thread: it must be set on the thread that calls
	// seccomp, which TSYNC then copies to all the others. Without TSYNC
	// the filter binds the calling thread only, which the caller has
	// locked.
	var flags uintptr
	if allThreads {
		flags = unix.SECCOMP_FILTER_FLAG_TSYNC
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	if _, _, e := unix.RawSyscall6(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0, 0); e != 0 {
		return fmt.Errorf("seccomp: no_new_privs: %w", e)
	}
	r, _, e := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		flags, uintptr(unsafe.Pointer(&prog)))
	runtime.KeepAlive(filter)
	// Both failures leave no filter installed, so allocating here is fine.
	if e != 0 {
		return fmt.Errorf("seccomp: install filter: %w", e)
	}
	if r != 0 {
		return fmt.Errorf("seccomp: thread %d could not take the filter", r)
	}
	return nil
}
