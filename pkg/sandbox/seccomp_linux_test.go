package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// seccompData lays out a struct seccomp_data in native byte order.
func seccompData(arch, nr uint32, args ...uint64) []byte {
	b := make([]byte, 64)
	binary.NativeEndian.PutUint32(b[0:], nr)
	binary.NativeEndian.PutUint32(b[4:], arch)
	for i, a := range args {
		binary.NativeEndian.PutUint64(b[16+8*i:], a)
	}
	return b
}

// runBPF interprets the classic BPF subset the generator emits, failing the
// test on anything else, as the kernel's checker would reject it.
func runBPF(t *testing.T, prog []unix.SockFilter, data []byte) uint32 {
	t.Helper()
	var a uint32
	for pc := 0; pc < len(prog); pc++ {
		ins := prog[pc]
		jump := func(cond bool) {
			if cond {
				pc += int(ins.Jt)
			} else {
				pc += int(ins.Jf)
			}
		}
		switch ins.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			if ins.K%4 != 0 || int(ins.K)+4 > len(data) {
				t.Fatalf("pc %d: load at offset %d", pc, ins.K)
			}
			a = binary.NativeEndian.Uint32(data[ins.K:])
		case unix.BPF_JMP | unix.BPF_JA:
			pc += int(ins.K)
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K:
			jump(a == ins.K)
		case unix.BPF_JMP | unix.BPF_JGT | unix.BPF_K:
			jump(a > ins.K)
		case unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K:
			jump(a >= ins.K)
		case unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K:
			jump(a&ins.K != 0)
		case unix.BPF_RET | unix.BPF_K:
			return ins.K
		default:
			t.Fatalf("pc %d: unsupported opcode %#x", pc, ins.Code)
		}
	}
	t.Fatalf("program ran off its end")
	return 0
}

func nativeSeccompFilter(t *testing.T) (*seccompArch, []unix.SockFilter) {
	t.Helper()
	if seccompNative == nil {
		if _, err := seccompFilter(); err == nil {
			t.Fatalf("seccompFilter succeeded on %s, which has no table", runtime.GOARCH)
		}
		t.Skipf("no seccomp table for %s", runtime.GOARCH)
	}
	filter, err := seccompFilter()
	if err != nil {
		t.Fatal(err)
	}
	return seccompNative, filter
}

func seccompRetString(r uint32) string {
	switch {
	case r == seccompRetAllow:
		return "ALLOW"
	case r == seccompRetKill:
		return "KILL_PROCESS"
	case r&unix.SECCOMP_RET_ACTION_FULL == unix.SECCOMP_RET_ERRNO:
		return "ERRNO " + unix.ErrnoName(unix.Errno(r&unix.SECCOMP_RET_DATA))
	}
	return fmt.Sprintf("%#x", r)
}

func TestSeccompFilterDecisions(t *testing.T) {
	arch, filter := nativeSeccompFilter(t)
	const (
		allow  = seccompRetAllow
		eperm  = seccompRetEPERM
		enosys = seccompRetENOSYS
		kill   = seccompRetKill
	)
	threadFlags := uint64(unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND |
		unix.CLONE_THREAD | unix.CLONE_SYSVSEM | unix.CLONE_SETTLS |
		unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID)
	type seccompCase struct {
		name string
		arch uint32
		nr   uint32
		args []uint64
		want uint32
	}
	cases := []seccompCase{
		{"write", arch.audit, unix.SYS_WRITE, nil, allow},
		{"read", arch.audit, unix.SYS_READ, nil, allow},
		{"execve", arch.audit, unix.SYS_EXECVE, nil, allow},
		{"futex", arch.audit, unix.SYS_FUTEX, nil, allow},
		{"mmap", arch.audit, unix.SYS_MMAP, nil, allow},
		{"exit_group", arch.audit, unix.SYS_EXIT_GROUP, nil, allow},
		{"rseq", arch.audit, unix.SYS_RSEQ, nil, allow},
		{"mount", arch.audit, unix.SYS_MOUNT, nil, eperm},
		{"ptrace", arch.audit, unix.SYS_PTRACE, nil, eperm},
		{"bpf", arch.audit, unix.SYS_BPF, nil, eperm},
		{"unshare", arch.audit, unix.SYS_UNSHARE, nil, eperm},
		{"setns", arch.audit, unix.SYS_SETNS, nil, eperm},
		{"keyctl", arch.audit, unix.SYS_KEYCTL, nil, eperm},
		{"io_uring_setup", arch.audit, unix.SYS_IO_URING_SETUP, nil, eperm},
		{"clone3", arch.audit, unix.SYS_CLONE3, nil, enosys},
		{"unknown 1000", arch.audit, 1000, nil, enosys},
		{"unknown 0x3fffffff", arch.audit, 0x3fffffff, nil, enosys},
		{"get_mempolicy (unlisted)", arch.audit, unix.SYS_GET_MEMPOLICY, nil, enosys},
		{"clone NEWUSER", arch.audit, unix.SYS_CLONE, []uint64{unix.CLONE_NEWUSER}, eperm},
		{"clone NEWNS|SIGCHLD", arch.audit, unix.SYS_CLONE, []uint64{unix.CLONE_NEWNS | uint64(unix.SIGCHLD)}, eperm},
		{"clone NEWTIME", arch.audit, unix.SYS_CLONE, []uint64{unix.CLONE_NEWTIME}, eperm},
		{"clone thread", arch.audit, unix.SYS_CLONE, []uint64{threadFlags}, allow},
		{"clone fork", arch.audit, unix.SYS_CLONE, []uint64{uint64(unix.SIGCHLD)}, allow},
		{"clone vfork", arch.audit, unix.SYS_CLONE, []uint64{unix.CLONE_VM | unix.CLONE_VFORK | uint64(unix.SIGCHLD)}, allow},
		{"socket AF_INET", arch.audit, unix.SYS_SOCKET, []uint64{unix.AF_INET}, allow},
		{"socket AF_UNIX", arch.audit, unix.SYS_SOCKET, []uint64{unix.AF_UNIX}, allow},
		{"socket AF_VSOCK", arch.audit, unix.SYS_SOCKET, []uint64{unix.AF_VSOCK}, eperm},
		{"socket AF_VSOCK high word", arch.audit, unix.SYS_SOCKET, []uint64{1<<32 | unix.AF_VSOCK}, eperm},
		{"personality query", arch.audit, unix.SYS_PERSONALITY, []uint64{0xffffffff}, allow},
		{"personality PER_LINUX", arch.audit, unix.SYS_PERSONALITY, []uint64{0}, allow},
		{"personality PER_LINUX32|UNAME26", arch.audit, unix.SYS_PERSONALITY, []uint64{0x20008}, allow},
		{"personality ADDR_NO_RANDOMIZE", arch.audit, unix.SYS_PERSONALITY, []uint64{0x0040000}, eperm},
		{"setrlimit CORE", arch.audit, unix.SYS_SETRLIMIT, []uint64{unix.RLIMIT_CORE, 0x7ff000}, eperm},
		{"setrlimit CORE high word", arch.audit, unix.SYS_SETRLIMIT, []uint64{1<<32 | unix.RLIMIT_CORE, 0x7ff000}, eperm},
		{"setrlimit NOFILE", arch.audit, unix.SYS_SETRLIMIT, []uint64{unix.RLIMIT_NOFILE, 0x7ff000}, allow},
		{"prlimit64 get CORE", arch.audit, unix.SYS_PRLIMIT64, []uint64{0, unix.RLIMIT_CORE, 0, 0x7ff000}, allow},
		{"prlimit64 set CORE", arch.audit, unix.SYS_PRLIMIT64, []uint64{0, unix.RLIMIT_CORE, 0x7ff000, 0}, eperm},
		{"prlimit64 set CORE high pointer", arch.audit, unix.SYS_PRLIMIT64, []uint64{0, unix.RLIMIT_CORE, 0x7fff00000000, 0}, eperm},
		{"prlimit64 set CORE of pid 1", arch.audit, unix.SYS_PRLIMIT64, []uint64{1, 1<<32 | unix.RLIMIT_CORE, 0x7ff000, 0}, eperm},
		{"prlimit64 set NOFILE", arch.audit, unix.SYS_PRLIMIT64, []uint64{0, unix.RLIMIT_NOFILE, 0x7ff000, 0}, allow},
		{"i386 write", unix.AUDIT_ARCH_I386, 4, nil, kill},
		{"i386 nr 0", unix.AUDIT_ARCH_I386, 0, nil, kill},
		{"arm write", unix.AUDIT_ARCH_ARM, 4, nil, kill},
	}
	if arch.x32 {
		cases = append(cases,
			seccompCase{"x32 0x40000001", arch.audit, 0x40000001, nil, kill},
			seccompCase{"x32 execve", arch.audit, 0x40000000 | 520, nil, kill},
		)
	}
	for _, c := range cases {
		got := runBPF(t, filter, seccompData(c.arch, c.nr, c.args...))
		if got != c.want {
			t.Errorf("%s: got %s, want %s", c.name, seccompRetString(got), seccompRetString(c.want))
		}
	}
}

// TestSeccompFilterMatchesPolicy checks every number against the policy
// lists directly, which covers each branch of the binary search.
func TestSeccompFilterMatchesPolicy(t *testing.T) {
	arch, filter := nativeSeccompFilter(t)
	expect := make(map[uint32]uint32)
	names := make(map[uint32]string)
	for name, nr := range arch.syscalls {
		names[nr] = name
	}
	set := func(list []string, ret uint32) {
		for _, name := range list {
			if nr, ok := arch.syscalls[name]; ok {
				if _, dup := expect[nr]; dup {
					t.Errorf("%s is in more than one list", name)
				}
				expect[nr] = ret
			}
		}
	}
	set(seccompAllow, seccompRetAllow)
	set(seccompDeny, seccompRetEPERM)
	set([]string{"clone3"}, seccompRetENOSYS)
	set(seccompSpecial, seccompRetAllow) // with args 0

	allowed := 0
	for nr := uint32(0); nr < 2048; nr++ {
		want, ok := expect[nr]
		if !ok {
			want = seccompRetENOSYS
		}
		if want == seccompRetAllow {
			allowed++
		}
		if got := runBPF(t, filter, seccompData(arch.audit, nr)); got != want {
			t.Errorf("nr %d (%s): got %s, want %s", nr, names[nr], seccompRetString(got), seccompRetString(want))
		}
	}
	for _, nr := range []uint32{0x3fffffff, 0x40000000, 0x7fffffff, 0xfffffffe, 0xffffffff} {
		want := uint32(seccompRetENOSYS)
		if arch.x32 && nr >= seccompX32Bit {
			want = seccompRetKill
		}
		if got := runBPF(t, filter, seccompData(arch.audit, nr)); got != want {
			t.Errorf("nr %#x: got %s, want %s", nr, seccompRetString(got), seccompRetString(want))
		}
	}
	for _, name := range []string{"read", "write", "execve", "futex", "mmap", "clone", "socket"} {
		if _, ok := arch.syscalls[name]; !ok {
			t.Errorf("table lacks %s", name)
		}
	}
	t.Logf("%s: %d syscalls allowed (clone, socket, personality by argument), %d EPERM, filter %d instructions",
		runtime.GOARCH, allowed, countRet(expect, seccompRetEPERM), len(filter))
}

func countRet(m map[uint32]uint32, ret uint32) int {
	n := 0
	for _, r := range m {
		if r == ret {
			n++
		}
	}
	return n
}

func TestSeccompFilterShape(t *testing.T) {
	_, filter := nativeSeccompFilter(t)
	if len(filter) >= seccompMaxInsns {
		t.Fatalf("filter has %d instructions, BPF_MAXINSNS is %d", len(filter), seccompMaxInsns)
	}
	// What the kernel's checker demands: every jump lands inside the
	// program and the last instruction returns.
	for pc, ins := range filter {
		switch {
		case ins.Code == unix.BPF_JMP|unix.BPF_JA:
			if pc+1+int(ins.K) >= len(filter) {
				t.Errorf("pc %d: jump out of program", pc)
			}
		case ins.Code&0x07 == unix.BPF_JMP:
			if pc+1+int(max(ins.Jt, ins.Jf)) >= len(filter) {
				t.Errorf("pc %d: jump out of program", pc)
			}
		}
	}
	if last := filter[len(filter)-1]; last.Code != unix.BPF_RET|unix.BPF_K {
		t.Errorf("last instruction %#x is not a return", last.Code)
	}
	t.Logf("filter: %d instructions", len(filter))
}

const seccompHelperEnv = "SANDBOX_SECCOMP_HELPER"

// TestSeccompInstalled installs the filter in a child (the test binary run
// again) and checks that it bites while a Go program, threads, fork and exec
// keep working.
func TestSeccompInstalled(t *testing.T) {
	if _, err := seccompFilter(); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestSeccompHelperProcess$", "-test.v")
	cmd.Env = append(os.Environ(), seccompHelperEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.Bytes())
	}
	got := make(map[string]string)
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "seccomp-helper "); ok {
			k, v, _ := strings.Cut(line, "=")
			got[k] = v
		}
	}
	want := map[string]string{
		"install":                      "ok",
		"status":                       "ok",
		"unshare(CLONE_NEWUSER)":       "EPERM",
		"mount":                        "EPERM",
		"personality(0x40000)":         "EPERM",
		"personality(0xffffffff)":      "ok",
		"socket(AF_VSOCK)":             "EPERM",
		"syscall 1000":                 "ENOSYS",
		"get_mempolicy":                "ENOSYS",
		"clone3":                       "ENOSYS",
		"new threads":                  "ok",
		"exec /bin/true":               "ok",
		"exec /bin/sh fork":            "ok",
		"tcp loopback":                 "ok",
		"files":                        "ok",
		"gc":                           "ok",
		"pthread (glibc clone3→clone)": "",
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		w := want[k]
		g, ok := got[k]
		switch {
		case !ok:
			t.Errorf("%s: no result", k)
		case w == "" && g != "ok" && !strings.HasPrefix(g, "skip"):
			t.Errorf("%s: %s", k, g)
		case w != "" && g != w:
			t.Errorf("%s: got %s, want %s", k, g, w)
		default:
			t.Logf("%s: %s", k, g)
		}
	}
	if t.Failed() {
		t.Logf("helper stdout:\n%s\nstderr:\n%s", out, stderr.Bytes())
	}
}

// TestSeccompHelperProcess is the child of TestSeccompInstalled; without
// the marker it does nothing.
func TestSeccompHelperProcess(t *testing.T) {
	if os.Getenv(seccompHelperEnv) != "1" {
		return
	}
	report := func(k string, v any) { fmt.Printf("seccomp-helper %s=%v\n", k, v) }
	errno := func(e error) string {
		if e == nil {
			return "ok"
		}
		if en, ok := e.(unix.Errno); ok {
			if en == 0 {
				return "ok"
			}
			return unix.ErrnoName(en)
		}
		return e.Error()
	}
	before, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	oldThreads := make(map[string]bool)
	for _, d := range before {
		oldThreads[d.Name()] = true
	}

	filter, err := seccompFilter()
	if err == nil {
		err = installSeccomp(filter, true)
	}
	report("install", errno(err))
	if err != nil {
		return
	}

	// TSYNC must have reached every thread, not just the caller.
	status := "ok"
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, d := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + d.Name() + "/status")
		if err != nil {
			continue // the thread exited
		}
		if !bytes.Contains(b, []byte("\nSeccomp:\t2\n")) || !bytes.Contains(b, []byte("\nNoNewPrivs:\t1\n")) {
			status = "thread " + d.Name() + " unfiltered"
		}
	}
	report("status", status)

	_, _, e := unix.RawSyscall(unix.SYS_UNSHARE, unix.CLONE_NEWUSER, 0, 0)
	report("unshare(CLONE_NEWUSER)", errno(e))
	report("mount", errno(unix.Mount("none", "/nonexistent-seccomp-test", "tmpfs", 0, "")))
	_, _, e = unix.RawSyscall(unix.SYS_PERSONALITY, 0x0040000, 0, 0)
	report("personality(0x40000)", errno(e))
	_, _, e = unix.RawSyscall(unix.SYS_PERSONALITY, 0xffffffff, 0, 0)
	report("personality(0xffffffff)", errno(e))
	fd, _, e := unix.RawSyscall(unix.SYS_SOCKET, unix.AF_VSOCK, unix.SOCK_STREAM, 0)
	if e == 0 {
		unix.Close(int(fd))
	}
	report("socket(AF_VSOCK)", errno(e))
	_, _, e = unix.RawSyscall(1000, 0, 0, 0)
	report("syscall 1000", errno(e))
	// Real and unprivileged, but not in the policy.
	_, _, e = unix.RawSyscall6(unix.SYS_GET_MEMPOLICY, 0, 0, 0, 0, 0, 0)
	report("get_mempolicy", errno(e))
	var cloneArgs [88]byte // struct clone_args, zeroed: a plain fork
	r, _, e := unix.RawSyscall(unix.SYS_CLONE3, uintptr(unsafe.Pointer(&cloneArgs)), unsafe.Sizeof(cloneArgs), 0)
	if e == 0 && r == 0 {
		unix.RawSyscall(unix.SYS_EXIT_GROUP, 0, 0, 0) // the filter failed and we are the child
	}
	report("clone3", errno(e))

	// Threads locked and parked at once force the runtime to clone new ones;
	// they exit with their goroutine since they stay locked.
	const n = 8
	var wg, release sync.WaitGroup
	release.Add(1)
	results := make(chan string, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			tid := fmt.Sprint(unix.Gettid())
			b, err := os.ReadFile("/proc/thread-self/status")
			switch {
			case err != nil:
				results <- err.Error()
			case !bytes.Contains(b, []byte("\nSeccomp:\t2\n")):
				results <- "thread " + tid + " unfiltered"
			case oldThreads[tid]:
				results <- "old"
			default:
				results <- "new"
			}
			release.Wait()
		}()
	}
	threads := "no new thread"
	for range n {
		switch r := <-results; r {
		case "new":
			if threads == "no new thread" {
				threads = "ok"
			}
		case "old":
		default:
			threads = r
		}
	}
	release.Done()
	wg.Wait()
	report("new threads", threads)

	report("exec /bin/true", errno(exec.Command("/bin/true").Run()))
	shOut, err := exec.Command("/bin/sh", "-c", "/bin/true && echo forked").Output()
	if err == nil && string(shOut) != "forked\n" {
		err = fmt.Errorf("output %q", shOut)
	}
	report("exec /bin/sh fork", errno(err))
	if py, err := exec.LookPath("python3"); err != nil {
		report("pthread (glibc clone3→clone)", "skip: no python3")
	} else {
		cmd := exec.Command(py, "-c",
			"import threading; t = threading.Thread(target=print, args=('thread',)); t.start(); t.join()")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err == nil && string(out) != "thread\n" {
			err = fmt.Errorf("output %q", out)
		}
		if err != nil {
			err = fmt.Errorf("%v: %s", err, stderr.Bytes())
		}
		report("pthread (glibc clone3→clone)", errno(err))
	}

	report("tcp loopback", errno(tcpRoundTrip()))

	dir, err := os.MkdirTemp("", "seccomp")
	if err == nil {
		p := dir + "/f"
		if err = os.WriteFile(p, []byte("data"), 0o600); err == nil {
			var b []byte
			if b, err = os.ReadFile(p); err == nil && string(b) != "data" {
				err = fmt.Errorf("read %q", b)
			}
		}
		if rmErr := os.RemoveAll(dir); err == nil {
			err = rmErr
		}
	}
	report("files", errno(err))

	garbage := make([][]byte, 0, 64)
	for range 64 {
		garbage = append(garbage, make([]byte, 1<<20))
	}
	runtime.KeepAlive(garbage)
	garbage = nil
	runtime.GC()
	time.Sleep(10 * time.Millisecond)
	report("gc", "ok")
}

func tcpRoundTrip() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 4)
		if _, err := c.Read(buf); err == nil {
			c.Write(buf)
		}
	}()
	c, err := net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("ping")); err != nil {
		return err
	}
	buf := make([]byte, 4)
	if _, err := c.Read(buf); err != nil {
		return err
	}
	if string(buf) != "ping" {
		return fmt.Errorf("echo %q", buf)
	}
	return nil
}
