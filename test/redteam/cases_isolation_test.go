package redteam

// The isolation classes of SECURITY.md: host secrets, /proc and /dev,
// cross-run leakage, toolchain writes, nested namespaces and mounts, the
// denied and foreign-architecture syscalls, /proc/self/exe and leaked fds,
// setuid binaries, signals, network egress, output-file tricks, and hostile
// input file names (TestHostileFileNames, refused before any run).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// isoHostPasswd is what the host's user database starts with; the
// sandbox's own /etc/passwd has root's home at /tmp instead.
const isoHostPasswd = "root:x:0:0:root:/root"

func init() {
	register(
		// Host secrets.
		redCase{
			name: "isolation/secrets-files-python", language: "python", program: "isolation/secrets-files.py",
			status: executor.StatusCompleted,
			stdout: []string{
				"/root NOTFOUND", "/root/.ssh NOTFOUND", "/root/.ssh/id_rsa NOTFOUND", "/root/.bash_history NOTFOUND",
				"/etc/shadow NOTFOUND", "/etc/gshadow NOTFOUND", "/etc/sudoers NOTFOUND", "/etc/ssh NOTFOUND",
				"/home NOTFOUND", "/var NOTFOUND", "/var/lib/sandbox-run NOTFOUND", "/var/log NOTFOUND",
				"/run NOTFOUND", "/boot NOTFOUND", "/sys NOTFOUND", "/etc/hostname NOTFOUND",
				"/etc/resolv.conf NOTFOUND", "/etc/machine-id NOTFOUND",
				// hidepid=invisible: the sandbox's init is not even listed.
				"/proc/1/environ NOTFOUND", "/proc/1/cmdline NOTFOUND", "/proc/1/root/etc/shadow NOTFOUND", "/proc/1/cwd NOTFOUND",
				"PASSWD root,sandbox,nobody\n",
			},
			notStdout: []string{"LEAK", isoHostPasswd},
		},
		redCase{
			name: "isolation/secrets-env-python", language: "python", program: "isolation/secrets-env.py",
			setup:  isoSecretEnv,
			status: executor.StatusCompleted,
			stdout: []string{"ABSENT", "ENVKEYS HOME,LANG,PATH,PYTHONDONTWRITEBYTECODE,PYTHONIOENCODING,PYTHONUNBUFFERED,TMPDIR,USER\n", "DONE"},
			// setup adds the secret's value; the engine's own variables
			// (GOMAXPROCS of PID 1, GOCOVERDIR) must not show either.
			notStdout: []string{"LEAK", "GOMAXPROCS", "GOCOVERDIR", "environ 1 "},
		},
		redCase{
			name: "isolation/secrets-bash", language: "bash", program: "isolation/secrets.sh",
			setup:  isoSecretEnv,
			status: executor.StatusCompleted,
			stdout: []string{
				"/etc/shadow UNREADABLE", "/root/.ssh/id_rsa UNREADABLE", "/root/.bash_history UNREADABLE",
				"/var/lib/sandbox-run UNREADABLE", "/home UNREADABLE", "/root NOTFOUND", "ABSENT",
				"HOME=/tmp USER=sandbox", "ID 1000 1000 1000\n", "HOST sandbox",
				"CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2",
			},
			notStdout: []string{"LEAK"},
		},
		redCase{
			name: "isolation/secrets-javascript", language: "javascript", program: "isolation/secrets.js",
			setup:  isoSecretEnv,
			status: executor.StatusCompleted,
			stdout: []string{
				"/etc/shadow NOTFOUND", "/root NOTFOUND", "/root/.ssh NOTFOUND", "/home NOTFOUND",
				"/var/lib/sandbox-run NOTFOUND", "/proc/1/environ NOTFOUND", "ABSENT", "UID 1000 1000 1000",
			},
			notStdout: []string{"LEAK"},
		},

		// /proc and /dev.
		redCase{
			name: "isolation/proc-probes-c", language: "c", program: "isolation/proc-probes.c",
			status: executor.StatusCompleted,
			stdout: []string{
				// SAFE: masked (reads empty), unreadable, or not in this kernel.
				"kcore SAFE", "keys SAFE", "timer_list SAFE", "sched_debug SAFE", "kallsyms SAFE", "kmsg SAFE",
				"sysrq-trigger SAFE", "write /proc/sysrq-trigger SAFE",
				"write /proc/sys/kernel/hostname DENIED", "write /proc/sys/kernel/core_pattern DENIED",
				"write /proc/sys/vm/drop_caches DENIED", "write /proc/sys/net/ipv4/ip_forward DENIED",
				"write /proc/sys/kernel/ns_last_pid DENIED", "modprobe DENIED",
				"/proc/1/mem DENIED", "/proc/1/environ DENIED", "/proc/1/maps DENIED", "/proc/1/exe DENIED",
				"/proc/1/root/. DENIED", "/proc/1/fd/3 DENIED", "PIDS FEW",
			},
			notStdout: []string{"LEAK", "pid 1\n"},
		},
		redCase{
			name: "isolation/dev-probes-bash", language: "bash", program: "isolation/dev-probes.sh",
			status: executor.StatusCompleted,
			stdout: []string{
				"DEV fd full null random shm stderr stdin stdout urandom zero \n",
				"/dev/mem NOTFOUND", "/dev/kmem NOTFOUND", "/dev/port NOTFOUND", "/dev/kvm NOTFOUND",
				"/dev/sda NOTFOUND", "/dev/vda NOTFOUND", "/dev/nvme0n1 NOTFOUND", "/dev/tty NOTFOUND",
				"/dev/console NOTFOUND", "/dev/ptmx NOTFOUND", "/dev/net/tun NOTFOUND", "/dev/vsock NOTFOUND",
				"/dev/fuse NOTFOUND", "/dev/loop-control NOTFOUND", "/dev/cpu/0/msr NOTFOUND",
				"/sys NOTFOUND", "/sys/firmware NOTFOUND",
				"urandom read 8", "null write OK", "full ENOSPC", "dev create DENIED",
			},
			notStdout: []string{"PRESENT", "LEAK"},
		},
		redCase{
			name: "isolation/dev-mknod-c", language: "c", program: "isolation/dev-mknod.c",
			status: executor.StatusCompleted,
			stdout: []string{"/tmp/mem DENIED EPERM", "/work/kmem DENIED EPERM", "/dev/shm/sda DENIED EPERM",
				"/tmp/tty DENIED EPERM", "/tmp/kvm DENIED EPERM", "fifo OK"},
			notStdout: []string{"LEAK"},
		},

		// Cross-run leakage: a reader runs while the writer holds its
		// markers, and again after it ended.
		isoLeakCase(),

		// Writing into toolchains.
		redCase{
			name: "isolation/toolchain-write-bash", language: "bash", program: "isolation/toolchain-write.sh",
			status: executor.StatusCompleted,
			stdout: []string{
				"/usr/bin/evil EROFS", "/bin/evil EROFS", "/usr/lib/evil EROFS", "/lib/evil EROFS",
				"/usr/local/bin/evil EROFS", "/usr/local/go/bin/evil EROFS", "/evil EROFS", "/etc/evil EROFS",
				"/etc/passwd.new EROFS", "/usr/lib/x86_64-linux-gnu/evil.so EROFS", "mkdir /usr/evil DENIED",
				"chmod /usr/bin/bash EROFS", "symlink /usr/bin EROFS", "rename /usr/bin/env DENIED",
				"append /etc/passwd DENIED", "append /usr/bin/bashbug DENIED", "pwned lines in passwd: 0",
			},
			notStdout: []string{"LEAK"},
		},
		redCase{
			name: "isolation/toolchain-write-python", language: "python", program: "isolation/toolchain-write.py",
			status: executor.StatusCompleted,
			stdout: []string{
				"STDLIB /usr/lib/python3.11", "/usr/lib/python3.11/zz_evil.py EROFS", "sitecustomize DENIED", "/usr/lib/python3.11/os.py.new EROFS",
				"/usr/lib/python3/usercustomize.py EROFS", "/usr/lib/python3/dist-packages/evil.pth EROFS",
				"/usr/bin/python3.11.evil EROFS", "chmod python EROFS", "append os.py DENIED", "utime os.py DENIED",
			},
			notStdout: []string{"LEAK"},
		},
		redCase{
			name: "isolation/toolchain-write-go", language: "go", program: "isolation/toolchain-write.go",
			status: executor.StatusCompleted,
			stdout: []string{
				"GOROOT /usr/local/go", "/usr/local/go/src/runtime/zz_evil.go EROFS", "/usr/local/go/src/fmt/zz_evil.go EROFS",
				"/usr/local/go/bin/evil EROFS", "/usr/local/go/pkg/evil EROFS", "/usr/local/go/src/os/zz_evil.go EROFS",
				"chmod go EROFS", "remove VERSION EROFS", "cache EROFS",
			},
			notStdout: []string{"LEAK"},
		},

		// Nested namespaces and mounts.
		redCase{
			name: "isolation/nested-ns-c", language: "c", program: "isolation/nested-ns.c",
			status: executor.StatusCompleted,
			stdout: []string{
				"unshare NEWUSER EPERM", "unshare NEWNS EPERM", "unshare NEWNET EPERM", "unshare NEWPID EPERM",
				"unshare NEWIPC EPERM", "unshare NEWUTS EPERM", "unshare NEWCGROUP EPERM", "unshare NEWTIME EPERM",
				"unshare NEWUSER|NEWNS EPERM",
				"clone NEWUSER EPERM", "clone NEWNS EPERM", "clone NEWNET EPERM", "clone NEWPID EPERM",
				"clone NEWIPC EPERM", "clone NEWUTS EPERM", "clone NEWCGROUP EPERM", "clone highbits NEWUSER EPERM",
				"clone3 NEWUSER ENOSYS", "clone3 plain ENOSYS",
				"setns user EPERM", "setns net EPERM", "setns badfd EPERM", "fork OK", "pthread OK",
			},
			notStdout: []string{"SUCCEEDED", "BROKEN"},
		},
		redCase{
			name: "isolation/nested-ns-go", language: "go", program: "isolation/nested-ns.go",
			status: executor.StatusCompleted,
			stdout: []string{
				"unshare NEWUSER EPERM", "unshare NEWNS EPERM", "unshare NEWNET EPERM", "unshare NEWPID EPERM",
				"exec NEWUSER EPERM", "exec NEWNS EPERM", "exec NEWNET EPERM", "exec NEWPID EPERM",
				"exec plain SUCCEEDED",
			},
			notStdout: []string{"unshare NEWUSER SUCCEEDED", "exec NEWUSER SUCCEEDED", "exec NEWNS SUCCEEDED", "exec NEWNET SUCCEEDED", "exec NEWPID SUCCEEDED"},
		},
		redCase{
			name: "isolation/nested-ns-bash", language: "bash", program: "isolation/nested-ns.sh",
			status: executor.StatusCompleted,
			stdout: []string{
				"unshare -U EPERM", "unshare -r EPERM", "unshare -U -m EPERM", "unshare -n EPERM", "unshare -p -f EPERM",
				"unshare -m EPERM", "unshare -i EPERM", "unshare -u EPERM", "unshare -C EPERM",
				"unshare --user --map-root-user --mount --net EPERM", "nsenter FAILED", "uid still 1000",
			},
			notStdout: []string{"LEAK"},
		},
		redCase{
			name: "isolation/mount-c", language: "c", program: "isolation/mount.c",
			status: executor.StatusCompleted,
			stdout: []string{
				"mount tmpfs EPERM", "mount bind EPERM", "mount remount-rw EPERM", "mount proc EPERM",
				"umount2 proc EPERM", "umount2 usr EPERM", "umount EPERM", "pivot_root EPERM", "chroot EPERM",
				"fsopen EPERM", "fsmount EPERM", "fspick EPERM", "fsconfig EPERM", "open_tree EPERM",
				"move_mount EPERM", "mount_setattr EPERM", "MOUNTS UNCHANGED", "root SAME",
			},
			notStdout: []string{"SUCCEEDED"},
		},
		redCase{
			name: "isolation/mount-bash", language: "bash", program: "isolation/mount.sh",
			status:    executor.StatusCompleted,
			stdout:    []string{"mount tmpfs FAILED", "mount bind FAILED", "umount FAILED", "chroot EPERM", "keys still EMPTY"},
			notStdout: []string{"LEAK"},
		},

		// Denied and foreign-architecture syscalls.
		redCase{
			name: "isolation/denied-syscalls-c", language: "c", program: "isolation/denied-syscalls.c",
			status: executor.StatusCompleted,
			stdout: isoEPERM("bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
				"keyctl", "add_key", "request_key", "ptrace_TRACEME", "ptrace_ATTACH_1", "ptrace_SEIZE_1",
				"process_vm_readv", "process_vm_writev", "open_by_handle_at", "name_to_handle_at", "kexec_load",
				"kexec_file_load", "init_module", "finit_module", "delete_module", "reboot", "swapon", "swapoff",
				"acct", "syslog", "setns", "quotactl", "clock_settime", "clock_adjtime", "settimeofday", "adjtimex",
				"iopl", "ioperm", "sethostname", "setdomainname", "kcmp", "pidfd_getfd", "fanotify_init", "vhangup",
				"process_madvise", "personality_READ_IMPLIES_EXEC", "personality_ADDR_NO_RANDOMIZE",
				"personality query OK", "DONE\n"),
			notStdout: []string{"SUCCEEDED", "ENOSYS", "ERRNO"},
		},
		redCase{
			name: "isolation/denied-syscalls-python", language: "python", program: "isolation/denied-syscalls.py",
			status: executor.StatusCompleted,
			stdout: isoEPERM("bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "keyctl", "ptrace_TRACEME",
				"ptrace_ATTACH_1", "unshare_NEWUSER", "mount", "chroot", "setns", "init_module", "kexec_load",
				"open_by_handle_at", "syslog", "clone3 ENOSYS", "thread OK", "subprocess 0"),
			notStdout: []string{"SUCCEEDED"},
		},
		redCase{
			name: "isolation/clone3-c", language: "c", program: "isolation/clone3.c",
			status:    executor.StatusCompleted,
			stdout:    []string{"clone3 plain ENOSYS", "clone3 NEWUSER ENOSYS", "clone3 NEWNS|NEWPID ENOSYS", "clone3 INTO_CGROUP ENOSYS", "threads OK"},
			notStdout: []string{"SUCCEEDED", "BROKEN"},
		},
		redCase{
			name: "isolation/foreign-arch-i386-c", language: "c", program: "isolation/foreign-i386.c",
			status: executor.StatusRuntimeError, limit: "seccomp",
			stdout: []string{"BEFORE"}, notStdout: []string{"AFTER"},
			check: isoSignal("SIGSYS"),
		},
		redCase{
			name: "isolation/foreign-arch-x32-c", language: "c", program: "isolation/foreign-x32.c",
			status: executor.StatusRuntimeError, limit: "seccomp",
			stdout: []string{"BEFORE"}, notStdout: []string{"AFTER"},
			check: isoSignal("SIGSYS"),
		},

		// /proc/self/exe, fds, setuid, signals.
		redCase{
			name: "isolation/self-exe-c", language: "c", program: "isolation/self-exe.c",
			status: executor.StatusCompleted,
			stdout: []string{
				"self-exe write DENIED ETXTBSY", "self-exe rdwr DENIED ETXTBSY", "self-exe trunc DENIED ETXTBSY",
				"self is /work/main", "self-path write DENIED ETXTBSY",
				"init-exe read DENIED ENOENT", "init-exe write DENIED ENOENT", "init-exe path DENIED ENOENT",
				"init-exe readlink DENIED ENOENT", "init-root DENIED ENOENT", "init-cwd DENIED ENOENT",
				"ppid 1", "python3 write DENIED",
			},
			notStdout: []string{"OPENED", "LEAK"},
		},
		redCase{
			name: "isolation/fds-c", language: "c", program: "isolation/fds.c",
			status: executor.StatusCompleted,
			stdout: []string{"FDS CLEAN", "std fd 0 OPEN", "std fd 1 OPEN", "std fd 2 OPEN",
				"tiocsti fd 0 ENOTTY", "tiocsti fd 1 ENOTTY", "tiocsti fd 2 ENOTTY", "controlling tty NONE"},
			notStdout: []string{"LEAKED", "INJECTED"},
		},
		redCase{
			name: "isolation/setuid-c", language: "c", program: "isolation/setuid.c",
			status: executor.StatusCompleted,
			stdout: []string{
				"/usr/bin/passwd mode 4755 (setuid bit set)", "/usr/bin/su mode 4755 (setuid bit set)",
				"/usr/bin/mount mode 4755 (setuid bit set)",
				"/usr/bin/passwd uid [\t1000\t1000\t1000\t1000] caps [\t0000000000000000] -> EUID 1000",
				"/usr/bin/su uid [\t1000\t1000\t1000\t1000] caps [\t0000000000000000] -> EUID 1000",
				"/usr/bin/mount uid [\t1000\t1000\t1000\t1000] caps [\t0000000000000000] -> EUID 1000",
				"/usr/bin/chsh uid [\t1000\t1000\t1000\t1000] caps [\t0000000000000000] -> EUID 1000",
				"/usr/bin/newgrp uid [\t1000\t1000\t1000\t1000] caps [\t0000000000000000] -> EUID 1000",
				"SETUID checked=5 elevated=0", "ALL NOSUID", "NoNewPrivs\t1", "CAPS NONE", "ids uid=1000 euid=1000",
			},
			notStdout: []string{"ELEVATED", "SUID-CAPABLE", "INVISIBLE"},
		},
		redCase{
			name: "isolation/kill-c", language: "c", program: "isolation/kill.c",
			status: executor.StatusCompleted,
			stdout: []string{
				"kill(1, SIGKILL) EPERM", "kill(1, SIGTERM) EPERM", "kill(1, SIGSTOP) EPERM", "kill(1, 0) EPERM",
				"OTHER PIDS INIT ONLY", "HOST PIDS UNREACHABLE", "kill(-1) DELIVERED, child KILLED", "kill(1, 0) after EPERM", "ALIVE",
			},
			notStdout: []string{"HOST PIDS REACHABLE", "FOREIGN"},
		},

		// Network egress.
		redCase{
			name: "isolation/net-egress-python", language: "python", program: "isolation/net-egress.py",
			setup:  isoHostListeners,
			status: executor.StatusCompleted,
			stdout: []string{"tcp 127.0.0.1 ECONNREFUSED", "tcp 127.1.2.3 ECONNREFUSED", "tcp 0.0.0.0 ECONNREFUSED",
				"udp sent 5 datagrams", "udp ECONNREFUSED"},
			notStdout: []string{"CONNECTED", "REPLY"},
		},
		redCase{
			name: "isolation/net-tcp-bash", language: "bash", program: "isolation/net-tcp.sh",
			setup:     isoHostListeners,
			status:    executor.StatusCompleted,
			stdout:    []string{"tcp ECONNREFUSED", "udp sent"},
			notStdout: []string{"CONNECTED"},
		},
		redCase{
			name: "isolation/net-raw-packet-vsock-c", language: "c", program: "isolation/net-raw.c",
			status: executor.StatusCompleted,
			stdout: []string{
				"raw-icmp EPERM", "raw-tcp EPERM", "raw-ip EPERM", "raw-icmpv6 EPERM",
				"packet-raw EPERM", "packet-dgram EPERM", "packet-legacy EPERM", "ping EACCES",
				"vsock-stream EPERM", "vsock-dgram EPERM", "vsock-seqpacket EPERM", "vsock-highbits EPERM",
				"tcp CREATED", "udp6 CREATED",
			},
			notStdout: []string{"raw-icmp CREATED", "raw-tcp CREATED", "raw-ip CREATED", "raw-icmpv6 CREATED",
				"packet-raw CREATED", "packet-dgram CREATED", "packet-legacy CREATED", "ping CREATED", "vsock-stream CREATED",
				"vsock-dgram CREATED", "vsock-seqpacket CREATED", "vsock-highbits CREATED"},
		},
		redCase{
			name: "isolation/net-interfaces-python", language: "python", program: "isolation/net-interfaces.py",
			status: executor.StatusCompleted,
			stdout: []string{
				"IFACES lo\n", "PROCNETDEV lo\n", "ROUTES4 0\n", "UNIX sockets 0\n",
				"unix /run/sandbox-run.sock ENOENT", "unix /var/run/docker.sock ENOENT",
				"unix /run/dbus/system_bus_socket ENOENT", "unix /tmp/.X11-unix/X0 ENOENT",
				"vsock EPERM", "hostname sandbox",
			},
			notStdout: []string{"CREATED", "CONNECTED"},
		},
		redCase{
			name: "isolation/net-ipv6-go", language: "go", program: "isolation/net-ipv6.go",
			setup:  isoIPv6Listener,
			status: executor.StatusCompleted,
			// setup adds the ECONNREFUSED markers when the host has ::1.
			notStdout: []string{"CONNECTED"},
		},
		redCase{
			name: "isolation/net-api-javascript", language: "javascript", program: "isolation/net-api.js",
			setup:  isoAPIServer,
			status: executor.StatusCompleted,
			stdout: []string{"http 127.0.0.1 ECONNREFUSED", "tcp 127.0.0.1 ECONNREFUSED", "http 0.0.0.0 ECONNREFUSED",
				"tcp 0.0.0.0 ECONNREFUSED", "fetch ECONNREFUSED"},
			notStdout: []string{"REACHED", "CONNECTED"},
		},

		redCase{
			name: "isolation/net-host-unix-socket-python", language: "python", program: "isolation/host-unix-socket.py",
			setup:  isoHostUnixSockets,
			status: executor.StatusCompleted,
			stdout: []string{"abstract 1 ECONNREFUSED", "abstract 5 ECONNREFUSED", "abstract 2 ECONNREFUSED",
				"path 1 ENOENT", "path 5 ENOENT", "path 2 ENOENT", "bind abstract OWN"},
			notStdout: []string{"CONNECTED"},
		},

		// Host files through the compiler.
		redCase{
			name: "isolation/compile-include-c", language: "c", program: "isolation/compile-include.c",
			status: executor.StatusCompileError,
			check:  isoCompileHostFiles,
		},

		// Output-file attacks.
		redCase{
			name: "isolation/output-links-python", language: "python", program: "isolation/output-links.py",
			status: executor.StatusCompleted,
			stdout: []string{
				"symlink out.txt OK", "symlink rootlink OK", "hardlink passwd EXDEV", "hardlink python EXDEV",
				"hardlink devnull EXDEV", "hardlink ok2.txt OK", "fifo result.txt OK", "socket sock.txt OK",
			},
			check: isoCheckOutputLinks,
		},
		redCase{
			name: "isolation/output-race-c", language: "c", program: "isolation/output-race.c",
			status: executor.StatusCompleted,
			stdout: []string{"SWAPPERS STARTED", "MAIN EXITS"},
			check:  isoCheckOutputRace,
		},
	)
}

// isoEPERM turns syscall names into "<name> EPERM" markers; entries with a
// space or a newline are taken as they are.
func isoEPERM(names ...string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		if strings.ContainsAny(n, " \n") {
			out[i] = n
		} else {
			out[i] = n + " EPERM\n"
		}
	}
	return out
}

func isoSignal(sig string) func(t *testing.T, res *executor.Result) {
	return func(t *testing.T, res *executor.Result) {
		if res.Signal != sig {
			t.Errorf("signal %q, want %s", res.Signal, sig)
		}
	}
}

// isoRun runs a program of programs/ through the executor, outside the
// harness (a second run of a case).
func isoRun(t *testing.T, language, program string, args ...string) *executor.Result {
	t.Helper()
	code, err := os.ReadFile(filepath.Join("programs", program))
	if err != nil {
		t.Fatal(err)
	}
	res, err := testExec.Execute(context.Background(), &executor.Request{Language: language, Code: code, Args: args,
		Limits: executor.Limits{WallTime: 10 * time.Second}})
	if err != nil {
		t.Fatalf("execute %s: %v", program, err)
	}
	return res
}

// isoSecretEnv puts a secret into the server's (this process's) environment;
// the program gets its name and must not find its value anywhere.
func isoSecretEnv(t *testing.T, c *redCase) {
	var b [12]byte
	rand.Read(b[:])
	name := "SANDBOX_RUN_REDTEAM_SECRET"
	value := "sr-secret-" + hex.EncodeToString(b[:])
	t.Setenv(name, value)
	t.Setenv("SANDBOX_RUN_API_KEY", value)
	c.args = []string{name}
	c.stdout = append(c.stdout, "ENV "+name+" ABSENT")
	c.notStdout = append(c.notStdout, value, "SANDBOX_RUN_API_KEY")
}

// isoCompileHostFiles: the compiler's sandbox sees no host file; the compile
// fails on the missing /etc/shadow.
func isoCompileHostFiles(t *testing.T, res *executor.Result) {
	if res.Compile == nil {
		t.Fatal("no compile step in the result")
	}
	out := res.Compile.Stdout + res.Compile.Stderr
	t.Logf("compile: %.600q", out)
	// Under gVisor PID 1 is the shim (gVisor's root): its environ exists
	// and is denied, which stops the compile first.
	gvisorDenied := isolation == executor.IsolationGVisor && strings.Contains(out, "/proc/1/environ: Permission denied")
	if !strings.Contains(out, "/etc/shadow: No such file or directory") && !gvisorDenied {
		t.Errorf("the compiler did not report /etc/shadow as missing")
	}
	for _, bad := range []string{"HOST FILE VISIBLE", "root:"} {
		if strings.Contains(out, bad) {
			t.Errorf("the compiler's output has %q", bad)
		}
	}
}

// isoHostUnixSockets listens on an abstract and a path UNIX socket in the
// host's namespaces.
func isoHostUnixSockets(t *testing.T, c *redCase) {
	var b [8]byte
	rand.Read(b[:])
	abstract := "sandbox-run-redteam-host-" + hex.EncodeToString(b[:])
	// A short directory: a UNIX socket's path has at most 107 bytes, and
	// t.TempDir's are named after the test.
	dir, err := os.MkdirTemp("", "sock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "api.sock")
	var counters []*isoCounter
	for _, a := range []string{"@" + abstract, path} {
		n, _ := isoTCPListener(t, "unix", a)
		if n == nil {
			t.Fatalf("cannot listen on unix %s", a)
		}
		counters = append(counters, n)
	}
	for _, a := range []string{"@" + abstract + "-dgram"} {
		if n := isoUDPListener(t, "unixgram", a); n != nil {
			counters = append(counters, n)
		}
	}
	c.args = []string{abstract, path}
	c.check = func(t *testing.T, res *executor.Result) {
		for _, n := range counters {
			n.assertNothing(t, "a UNIX socket of the host")
		}
	}
}

// isoCounter counts what a host listener received.
type isoCounter struct{ conns, bytes atomic.Int64 }

func (n *isoCounter) assertNothing(t *testing.T, what string) {
	t.Helper()
	time.Sleep(100 * time.Millisecond) // let anything in flight arrive
	if c, b := n.conns.Load(), n.bytes.Load(); c != 0 || b != 0 {
		t.Errorf("%s on the host received %d connections/datagrams, %d bytes from the sandbox", what, c, b)
	}
}

func isoTCPListener(t *testing.T, network, addr string) (*isoCounter, string) {
	l, err := net.Listen(network, addr)
	if err != nil {
		return nil, ""
	}
	t.Cleanup(func() { l.Close() })
	n := &isoCounter{}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.conns.Add(1)
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(2 * time.Second))
				b := make([]byte, 4096)
				for {
					k, err := c.Read(b)
					n.bytes.Add(int64(k))
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return n, l.Addr().String()
}

func isoUDPListener(t *testing.T, network, addr string) *isoCounter {
	pc, err := net.ListenPacket(network, addr)
	if err != nil {
		return nil
	}
	t.Cleanup(func() { pc.Close() })
	n := &isoCounter{}
	go func() {
		b := make([]byte, 65536)
		for {
			k, _, err := pc.ReadFrom(b)
			if err != nil {
				return
			}
			n.conns.Add(1)
			n.bytes.Add(int64(k))
		}
	}()
	return n
}

func isoPort(t *testing.T, addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// isoHostListeners starts a TCP and a UDP listener on the host's 127.0.0.1
// and gives their ports to the program; neither may hear from it.
func isoHostListeners(t *testing.T, c *redCase) {
	tcp, addr := isoTCPListener(t, "tcp4", "127.0.0.1:0")
	if tcp == nil {
		t.Fatal("cannot listen on 127.0.0.1")
	}
	var udp *isoCounter
	var udpPort string
	for i := 0; i < 20 && udp == nil; i++ {
		// The UDP port need not equal the TCP one; any free one.
		pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		udpPort = isoPort(t, pc.LocalAddr().String())
		pc.Close()
		udp = isoUDPListener(t, "udp4", "127.0.0.1:"+udpPort)
	}
	if udp == nil {
		t.Fatal("cannot listen on UDP 127.0.0.1")
	}
	c.args = []string{isoPort(t, addr), udpPort}
	c.check = func(t *testing.T, res *executor.Result) {
		tcp.assertNothing(t, "the TCP listener on 127.0.0.1:"+isoPort(t, addr))
		udp.assertNothing(t, "the UDP listener on 127.0.0.1:"+udpPort)
	}
}

// isoIPv6Listener listens on the host's [::1] when it has one.
func isoIPv6Listener(t *testing.T, c *redCase) {
	tcp, addr := isoTCPListener(t, "tcp6", "[::1]:0")
	if tcp == nil {
		t.Log("the host has no IPv6 loopback: the program only reports that")
		c.args = []string{"none"}
		c.stdout = append(c.stdout, "ipv6 SKIPPED")
		return
	}
	udp := isoUDPListener(t, "udp6", addr) // same port number, if free for UDP
	port := isoPort(t, addr)
	c.args = []string{addr}
	c.stdout = append(c.stdout, "tcp "+addr+" ECONNREFUSED", "tcp [::ffff:127.0.0.1]:"+port+" ECONNREFUSED", "udp6 sent")
	c.check = func(t *testing.T, res *executor.Result) {
		tcp.assertNothing(t, "the TCP listener on "+addr)
		if udp != nil {
			udp.assertNothing(t, "the UDP listener on "+addr)
		}
	}
}

// isoAPIServer stands in for sandbox-run's HTTP API on the host's loopback.
func isoAPIServer(t *testing.T, c *redCase) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprintln(w, `{"status":"ok"}`)
	}))
	t.Cleanup(srv.Close)
	c.args = []string{isoPort(t, srv.Listener.Addr().String())}
	c.check = func(t *testing.T, res *executor.Result) {
		time.Sleep(100 * time.Millisecond)
		if n := hits.Load(); n != 0 {
			t.Errorf("the API server on the host's loopback got %d requests from the sandbox", n)
		}
	}
}

// isoLeakCase: the writer leaves markers everywhere and holds them for four
// seconds; a reader runs meanwhile (started in setup) and once more after.
func isoLeakCase() redCase {
	type out struct {
		res *executor.Result
		err error
	}
	return redCase{
		name: "isolation/leak-cross-run-c", language: "c", program: "isolation/leak-writer.c",
		status: executor.StatusCompleted,
		stdout: []string{
			"write /tmp/sandbox-run-leak OK", "write /dev/shm/sandbox-run-leak OK", "write /work/sandbox-run-leak OK",
			"sysv shm=OK msg=OK sem=OK", "mq OK", "abstract OK", "SELF SEES ALL", "HELD",
		},
		setup: func(t *testing.T, c *redCase) {
			code, err := os.ReadFile(filepath.Join("programs", "isolation/leak-reader.c"))
			if err != nil {
				t.Fatal(err)
			}
			ch := make(chan out, 1)
			go func() {
				time.Sleep(300 * time.Millisecond) // let the writer get going
				res, err := testExec.Execute(context.Background(), &executor.Request{Language: "c", Code: code, Args: []string{"30"},
					Limits: executor.Limits{WallTime: 10 * time.Second}})
				ch <- out{res, err}
			}()
			c.check = func(t *testing.T, res *executor.Result) {
				if res.OutputFiles["sandbox-run-leak"] == nil {
					t.Errorf("the writer's own /work marker did not come back: %v", res.OutputFiles)
				}
				concurrent := <-ch
				if concurrent.err != nil {
					t.Fatalf("concurrent reader: %v", concurrent.err)
				}
				second := isoRun(t, "c", "isolation/leak-reader.c", "1")
				for i, r := range []*executor.Result{concurrent.res, second} {
					t.Logf("reader %d: status=%s stdout=%q", i, r.Status, r.Stdout)
					if r.Status != executor.StatusCompleted || !strings.Contains(r.Stdout, "CLEAN\n") ||
						!strings.Contains(r.Stdout, "abstract ECONNREFUSED") || !strings.Contains(r.Stdout, "sysvipc shm rows=1") ||
						strings.Contains(r.Stdout, "LEAK") {
						t.Errorf("reader %d (0: during the writer, 1: after it) saw the writer's markers: %+v", i, r)
					}
				}
			}
		},
	}
}

// isoCheckOutputLinks: no link was followed, special files were skipped with
// a reason, our own regular files came back; then the same program again,
// asking for the tricky paths by name.
func isoCheckOutputLinks(t *testing.T, res *executor.Result) {
	isoNoHostContent(t, res)
	if got := string(res.OutputFiles["ok.txt"]); got != "fine\n" {
		t.Errorf("ok.txt = %q, want our own content", got)
	}
	if got := string(res.OutputFiles["ok2.txt"]); got != "fine\n" {
		t.Errorf("ok2.txt (hardlink inside /work) = %q", got)
	}
	// Under gVisor a FIFO or a socket is the Sentry's alone: the host's
	// /work never has it (not found), which is as safe.
	gvisorOnly := func(p, reason string) bool {
		return isolation == executor.IsolationGVisor && (p == "result.txt" || p == "sock.txt") && (reason == "" || reason == "not found")
	}
	for _, p := range []string{"out.txt", "shadow.txt", "rel.txt", "selfroot.txt", "rootlink", "etclink", "d/x.txt", "result.txt", "sock.txt"} {
		if _, ok := res.OutputFiles[p]; ok {
			t.Errorf("%s was returned: %q", p, res.OutputFiles[p])
		}
		if r := isoSkipReason(res, p); r != "not a regular file" && !gvisorOnly(p, r) {
			t.Errorf("%s: skipped reason %q, want %q", p, r, "not a regular file")
		}
	}
	for _, p := range []string{"hard.txt", "hard.bin", "null.txt", "rootlink/etc/passwd", "etclink/passwd"} {
		if _, ok := res.OutputFiles[p]; ok {
			t.Errorf("%s exists in the outputs", p)
		}
	}

	// By name: the patterns must not walk through the links either.
	code, _ := os.ReadFile(filepath.Join("programs", "isolation/output-links.py"))
	start := time.Now()
	again, err := testExec.Execute(context.Background(), &executor.Request{Language: "python", Code: code,
		OutputFiles: []string{"out.txt", "result.txt", "sock.txt", "rootlink/etc/passwd", "etclink/passwd", "etclink/*", "d/*", "ok.txt"}})
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > 8*time.Second {
		t.Errorf("collecting a FIFO output took %v: the host blocked on it", time.Since(start))
	}
	t.Logf("by name: files=%v skipped=%+v", isoKeys(again.OutputFiles), again.SkippedFiles)
	isoNoHostContent(t, again)
	if len(again.OutputFiles) != 1 || string(again.OutputFiles["ok.txt"]) != "fine\n" {
		t.Errorf("by name: returned %v, want only ok.txt", isoKeys(again.OutputFiles))
	}
	want := map[string]string{"out.txt": "not a regular file", "result.txt": "not a regular file", "sock.txt": "not a regular file",
		"d/x.txt": "not a regular file", "rootlink/etc/passwd": "not found", "etclink/passwd": "not found"}
	for p, reason := range want {
		if r := isoSkipReason(again, p); r != reason && !gvisorOnly(p, r) {
			t.Errorf("by name: %s skipped as %q, want %q", p, r, reason)
		}
	}
}

// isoCheckOutputRace: whatever state the swappers left, a link was never
// followed.
func isoCheckOutputRace(t *testing.T, res *executor.Result) {
	isoNoHostContent(t, res)
	t.Logf("files=%v skipped=%+v", isoKeys(res.OutputFiles), res.SkippedFiles)
	for p, data := range res.OutputFiles {
		// Empty when the kill landed between creating and writing a file.
		if string(data) != "benign\n" && len(data) != 0 {
			t.Errorf("%s = %.200q, want the program's own content", p, data)
		}
	}
	// The swappers unlink and recreate: when the run ended a name may be
	// missing, but one that is there and not a regular file is skipped.
	for _, p := range []string{"race.txt", "flip.txt"} {
		if r := isoSkipReason(res, p); r != "" && r != "not a regular file" {
			t.Errorf("%s skipped as %q: %+v", p, r, res.SkippedFiles)
		}
	}
	if _, ok := res.OutputFiles["racedir"]; ok {
		t.Errorf("racedir (a directory or a link) came back as a file")
	}
}

func isoNoHostContent(t *testing.T, res *executor.Result) {
	t.Helper()
	for p, data := range res.OutputFiles {
		if strings.Contains(string(data), "root:x:0:0") || strings.Contains(string(data), isoHostPasswd) {
			t.Errorf("output file %s carries a passwd file's content: %.200q", p, data)
		}
	}
}

func isoSkipReason(res *executor.Result, p string) string {
	for _, s := range res.SkippedFiles {
		if s.Path == p {
			return s.Reason
		}
	}
	return ""
}

func isoKeys(m executor.OutputFiles) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestHostileFileNames: input files that would land outside /work, hide
// their name or overwhelm the host are refused before anything runs.
func TestHostileFileNames(t *testing.T) {
	deep := strings.Repeat("d/", 20) + "x"
	many := make([]sandbox.File, 10000)
	for i := range many {
		many[i] = sandbox.File{Path: "f" + strconv.Itoa(i), Data: []byte("x")}
	}
	cases := []struct {
		name  string
		files []sandbox.File
	}{
		{"dotdot", []sandbox.File{{Path: "../x", Data: []byte("x")}}},
		{"dotdot-deep", []sandbox.File{{Path: "a/../../x", Data: []byte("x")}}},
		{"dotdot-only", []sandbox.File{{Path: "..", Data: []byte("x")}}},
		{"dot", []sandbox.File{{Path: ".", Data: []byte("x")}}},
		{"absolute", []sandbox.File{{Path: "/etc/x", Data: []byte("x")}}},
		{"absolute-work", []sandbox.File{{Path: "/work/x", Data: []byte("x")}}},
		{"empty", []sandbox.File{{Path: "", Data: []byte("x")}}},
		{"nul", []sandbox.File{{Path: "a\x00b", Data: []byte("x")}}},
		{"rtl-override", []sandbox.File{{Path: "x\u202etxt.exe", Data: []byte("x")}}},
		{"isolate", []sandbox.File{{Path: "x\u2066y", Data: []byte("x")}}},
		{"escape", []sandbox.File{{Path: "\x1b[2Jx", Data: []byte("x")}}},
		{"newline", []sandbox.File{{Path: "a\nb", Data: []byte("x")}}},
		{"c1-control", []sandbox.File{{Path: "a\u0085b", Data: []byte("x")}}},
		{"not-utf8", []sandbox.File{{Path: "\xff\xfe", Data: []byte("x")}}},
		{"too-long", []sandbox.File{{Path: strings.Repeat("a", 300), Data: []byte("x")}}},
		{"too-deep", []sandbox.File{{Path: deep, Data: []byte("x")}}},
		{"file-and-dir", []sandbox.File{{Path: "a", Data: []byte("x")}, {Path: "a/b", Data: []byte("x")}}},
		{"source-as-dir", []sandbox.File{{Path: "main.py/x", Data: []byte("x")}}},
		{"10k-files", many},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshot()
			res, err := testExec.Execute(context.Background(), &executor.Request{Language: "python",
				Code: []byte("print('RAN')"), Files: tc.files, Isolation: isolation})
			var inv *executor.InvalidRequestError
			if !errors.As(err, &inv) {
				t.Fatalf("got %v (%T), result %+v; want an InvalidRequestError before any run", err, err, res)
			}
			if res != nil {
				t.Errorf("a refused request has a result: %+v", res)
			}
			t.Logf("refused: %v", err)
			if left := leftovers(before); len(left) > 0 {
				t.Errorf("left behind: %v", left)
			}
		})
	}
}
