package sandbox

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/internal/testkit/leakcheck"
)

// testUIDs is the first uid of test engine k in this binary's uid block
// (leakcheck.UIDBlock): the shared engine's 1024 slots (k 0), then 32 uids
// (16 slots) for each engine a test makes of its own. No other test
// binary has uids of the block; the engines of one k are never alive at
// once.
func testUIDs(k int) int {
	lo, hi := leakcheck.UIDBlock(leakcheck.BandSandbox)
	if k == 0 {
		return lo
	}
	if base := lo + 2048 + (k-1)*32; base+32 <= hi {
		return base
	}
	panic("testUIDs: no room for engine " + strconv.Itoa(k))
}

func TestMain(m *testing.M) {
	Init()
	if kind := os.Getenv("SANDBOX_TEST_WORKLOAD"); kind != "" {
		runWorkload(kind)
	}
	flag.Parse()
	// A TMPDIR of our own: the leak checks may count every entry in it,
	// unlike the host's /tmp, which every other program shares.
	_, cleanupTmp, err := leakcheck.PrivateTempDir("sr-sandbox")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Other test binaries run sandboxes at the same time: a uid range of
	// our own lets the leak checks count every process in it as ours.
	testEng, testEngErr = New(Config{UIDBase: testUIDs(0), UIDSlots: 1024})
	if dir := flag.Lookup("test.gocoverdir"); dir != nil && testEngErr == nil {
		testEng.EnableInitCoverage(dir.Value.String())
	}
	code := m.Run()
	// Pooled sandboxes end on their own, so that -cover builds of PID 1
	// write their counters.
	if testEngErr == nil {
		testEng.Close()
	}
	cleanupTmp()
	os.Exit(code)
}

var (
	testEng    *Engine
	testEngErr error
)

func testEngine(t testing.TB) *Engine {
	t.Helper()
	if testEngErr != nil {
		t.Fatalf("engine: %v", testEngErr)
	}
	return testEng
}

func withDefaults(spec *Spec) *Spec {
	if spec.Mounts == nil {
		spec.Mounts = SystemMounts
	}
	if spec.Env == nil {
		spec.Env = []string{"PATH=/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8"}
	}
	return spec
}

func run(t testing.TB, spec *Spec) *Result {
	t.Helper()
	res, err := testEngine(t).Run(context.Background(), withDefaults(spec))
	if err != nil {
		t.Fatalf("run %q: %v", spec.Args, err)
	}
	return res
}

func sh(t testing.TB, script string, l Limits) *Result {
	t.Helper()
	return run(t, &Spec{Args: []string{"bash", "-c", script}, Limits: l})
}

func py(t testing.TB, code string, l Limits) *Result {
	t.Helper()
	return run(t, &Spec{Args: []string{"/usr/bin/python3", "-c", code}, Limits: l})
}

// sandboxProcesses lists host processes owned by any uid of the test engine.
func sandboxProcesses(t testing.TB) []string {
	t.Helper()
	e := testEngine(t)
	return leakcheck.ProgramProcesses(e.cfg.UIDBase, e.cfg.UIDBase+2*e.cfg.UIDSlots, "")
}

// runCgroups lists run cgroups of this process left under the engine's parents.
func runCgroups(t testing.TB) []string {
	t.Helper()
	testEngine(t).Quiesce()
	return leakcheck.RunCgroups(testEngine(t).Cgroups().Parents, os.Getpid())
}

func TestHelloAndExitCode(t *testing.T) {
	res := sh(t, "echo hello; echo err >&2; exit 3", Limits{})
	if string(res.Stdout) != "hello\n" || string(res.Stderr) != "err\n" || res.ExitCode != 3 || res.Limit != LimitNone || res.Signal != "" {
		t.Fatalf("got exit=%d limit=%q signal=%q stdout=%q stderr=%q", res.ExitCode, res.Limit, res.Signal, res.Stdout, res.Stderr)
	}
	if res.WallTime <= 0 || res.PeakMemory <= 0 {
		t.Errorf("metrics missing: wall=%v peak=%d", res.WallTime, res.PeakMemory)
	}
}

func TestUnprivilegedIdentity(t *testing.T) {
	res := sh(t, "id -u; id -g; cat /proc/self/uid_map; grep -E '^(Cap|NoNewPrivs|Seccomp:)' /proc/self/status; hostname", Limits{})
	out := string(res.Stdout)
	lines := strings.Split(out, "\n")
	if lines[0] != "1000" || lines[1] != "1000" {
		t.Fatalf("want uid/gid 1000 inside, got:\n%s", out)
	}
	for _, want := range []string{"CapInh:\t0000000000000000", "CapPrm:\t0000000000000000", "CapEff:\t0000000000000000",
		"CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2", "sandbox"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	// uid_map lines: inside outside count; nothing maps to host root.
	for _, l := range lines[2:4] {
		f := strings.Fields(l)
		if len(f) != 3 || f[1] == "0" {
			t.Errorf("uid_map line %q maps to host root or is malformed", l)
		}
	}
}

func TestHostInvisible(t *testing.T) {
	t.Setenv("SANDBOX_TEST_SECRET", "hunter2")
	script := `
ls -A /root 2>/dev/null | head -3; echo "root:$?"
test -e /etc/shadow && echo SHADOW
env | grep -c SANDBOX_TEST_SECRET
ls /proc | grep -E '^[0-9]+$' | tr '\n' ' '; echo
echo "$$"
test -e /sys/kernel && echo SYS
cat /proc/kcore 2>/dev/null | head -c 1 | wc -c
`
	res := sh(t, script, Limits{})
	out := string(res.Stdout)
	if strings.Contains(out, "SHADOW") || strings.Contains(out, "hunter2") || strings.Contains(out, "SYS") {
		t.Fatalf("host leaked into the sandbox:\n%s", out)
	}
	lines := strings.Split(out, "\n")
	if lines[1] != "0" {
		t.Errorf("the test's environment is visible: %q", lines[1])
	}
	// Only the sandbox's own processes exist, with small pids; ours is not there.
	for _, p := range strings.Fields(lines[2]) {
		if n, _ := strconv.Atoi(p); n > 50 || p == strconv.Itoa(os.Getpid()) {
			t.Errorf("host pid %s visible in /proc: %q", p, lines[2])
		}
	}
	if pid, _ := strconv.Atoi(lines[3]); pid < 2 || pid > runPidBase+10 {
		t.Errorf("program pid %q: not in a fresh pid namespace", lines[3])
	}
	if lines[4] != "0" {
		t.Errorf("/proc/kcore readable")
	}
}

func TestFilesystemPermissions(t *testing.T) {
	script := `
touch /usr/bin/evil 2>/dev/null && echo USR
touch /evil 2>/dev/null && echo ROOT
touch /etc/evil 2>/dev/null && echo ETC
echo x > /work/ok && echo WORK
echo x > /tmp/ok && echo TMP
echo x > /dev/shm/ok && echo SHM
ls /dev | tr '\n' ' '
`
	res := sh(t, script, Limits{})
	out := string(res.Stdout)
	for _, bad := range []string{"USR", "ROOT", "ETC"} {
		if strings.Contains(out, bad+"\n") {
			t.Errorf("%s is writable:\n%s", bad, out)
		}
	}
	for _, good := range []string{"WORK", "TMP", "SHM"} {
		if !strings.Contains(out, good+"\n") {
			t.Errorf("%s is not writable:\n%s%s", good, out, res.Stderr)
		}
	}
	devs := strings.Fields(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:])
	want := map[string]bool{"fd": true, "full": true, "null": true, "random": true, "shm": true, "stderr": true, "stdin": true, "stdout": true, "urandom": true, "zero": true}
	for _, d := range devs {
		if !want[d] {
			t.Errorf("unexpected /dev entry %q", d)
		}
	}
}

func TestFdsClosed(t *testing.T) {
	res := py(t, `
import os
open_fds = []
for fd in range(3, 1024):
    try:
        os.fstat(fd)
        open_fds.append(fd)
    except OSError:
        pass
print(open_fds)`, Limits{})
	if strings.TrimSpace(string(res.Stdout)) != "[]" {
		t.Fatalf("descriptors above 2 reached the program: %s %s", res.Stdout, res.Stderr)
	}
}

// TestNestedNamespacesDenied: a run cannot make namespaces of its own. The
// control comes first: unshare is there and runs in the sandbox, so its
// refusals below are the sandbox's, not a missing or crashing binary.
func TestNestedNamespacesDenied(t *testing.T) {
	res := sh(t, `unshare --version >/dev/null && echo CONTROL-RAN
unshare -U true; echo "userns=$?"
unshare -m true; echo "mntns=$?"`, Limits{})
	out, errs := string(res.Stdout), string(res.Stderr)
	if !strings.Contains(out, "CONTROL-RAN") {
		t.Fatalf("unshare does not run in the sandbox, so the test proves nothing: %q %q", out, errs)
	}
	if !strings.Contains(out, "userns=1\n") || !strings.Contains(out, "mntns=1\n") || strings.Count(errs, "Operation not permitted") != 2 {
		t.Fatalf("nested namespaces: want both refused with EPERM; got %q %q", out, errs)
	}
}

func TestNoNetwork(t *testing.T) {
	tcp, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := tcp.Accept(); err == nil {
			accepted <- struct{}{}
			c.Close()
		}
	}()
	udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	tcpPort := tcp.Addr().(*net.TCPAddr).Port
	udpPort := udp.LocalAddr().(*net.UDPAddr).Port
	res := py(t, fmt.Sprintf(`
import socket
print(sorted(n for _, n in socket.if_nameindex()))
s = socket.socket(); s.settimeout(2)
try:
    s.connect(("127.0.0.1", %d)); print("TCP REACHED")
except OSError as e:
    print("tcp", type(e).__name__)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.sendto(b"ping", ("127.0.0.1", %d))
print("udp sent")
`, tcpPort, udpPort), Limits{})
	out := string(res.Stdout)
	if !strings.HasPrefix(out, "['lo']\n") || strings.Contains(out, "REACHED") {
		t.Fatalf("network not isolated:\n%s%s", out, res.Stderr)
	}
	udp.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, _, err := udp.ReadFrom(make([]byte, 16)); err == nil {
		t.Fatalf("host UDP listener received %d bytes from the sandbox", n)
	}
	select {
	case <-accepted:
		t.Fatal("host TCP listener accepted a connection from the sandbox")
	default:
	}
}

// TestConcurrentRunsIsolated: a run sees nothing of another that runs at
// the same time. The order is made, not hoped for: the reader starts once
// the writer has said (on its live stdout) that its secrets are written,
// and the writer ends only when the test closes its stdin after the reader.
func TestConcurrentRunsIsolated(t *testing.T) {
	written := make(chan struct{})
	stdinR, stdinW := io.Pipe()
	defer stdinW.Close()
	type outcome struct {
		res *Result
		err error
	}
	wdone := make(chan outcome, 1)
	go func() {
		var once sync.Once
		spec := withDefaults(&Spec{Args: []string{"bash", "-c", "echo secret > /work/secret; echo secret > /tmp/secret; echo s > /dev/shm/secret; echo written; read -r _; echo done"},
			Stdin: stdinR, Stdout: writerFunc(func(p []byte) (int, error) {
				if strings.Contains(string(p), "written") {
					once.Do(func() { close(written) })
				}
				return len(p), nil
			})})
		res, err := testEngine(t).Run(context.Background(), spec)
		wdone <- outcome{res, err} // no t.Fatal off the test's goroutine
	}()
	select {
	case <-written:
	case o := <-wdone:
		t.Fatalf("the writer ended before it wrote: %+v %v", o.res, o.err)
	case <-time.After(2 * time.Minute):
		t.Fatal("the writer never said its secrets were written")
	}
	reader := sh(t, "ls -A /work /tmp /dev/shm; cat /work/secret /tmp/secret 2>/dev/null; echo read", Limits{})
	stdinW.Close()
	o := <-wdone
	if o.err != nil {
		t.Fatal(o.err)
	}
	if !strings.Contains(string(reader.Stdout), "read") || strings.Contains(string(reader.Stdout), "secret") || !strings.HasSuffix(string(o.res.Stdout), "done\n") {
		t.Fatalf("runs share files: reader=%q writer=%q", reader.Stdout, o.res.Stdout)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestDaemonDoesNotSurvive(t *testing.T) {
	res := sh(t, "(setsid sleep 60 >/dev/null 2>&1 &); (nohup sleep 60 >/dev/null 2>&1 &); echo started", Limits{})
	if string(res.Stdout) != "started\n" {
		t.Fatalf("got %q %q", res.Stdout, res.Stderr)
	}
	if left := sandboxProcesses(t); len(left) > 0 {
		t.Fatalf("processes survived the run: %v", left)
	}
	if left := runCgroups(t); len(left) > 0 {
		t.Fatalf("cgroups left: %v", left)
	}
}

// TestNothingLeftBehind: runs that write to their /work and /tmp and leave
// a process behind leave nothing on the host: nothing in this binary's
// TMPDIR (all ours), nothing in the host's /tmp that a sandbox could have
// made (owned by its uids; other programs' entries there are not ours),
// no cgroup, process or mount.
func TestNothingLeftBehind(t *testing.T) {
	e := testEngine(t)
	lo, hi := e.cfg.UIDBase, e.cfg.UIDBase+2*e.cfg.UIDSlots
	before, beforeHost := leakcheck.Entries(os.TempDir()), leakcheck.HostTemp(lo, hi)
	for i := 0; i < 3; i++ {
		sh(t, "echo x > /work/f; echo y > /tmp/g; sleep 0.01 &", Limits{})
	}
	for _, left := range leakcheck.NewIn(before, leakcheck.Entries(os.TempDir())) {
		t.Errorf("new entry in the test's TMPDIR: %s", left)
	}
	for _, left := range leakcheck.NewIn(beforeHost, leakcheck.HostTemp(lo, hi)) {
		t.Errorf("new entry in the host's /tmp: %s", left)
	}
	if left := runCgroups(t); len(left) > 0 {
		t.Errorf("cgroups left: %v", left)
	}
	if left := sandboxProcesses(t); len(left) > 0 {
		t.Errorf("processes left: %v", left)
	}
	// A sandbox's /work seen on the host would be a mount point of a
	// sandbox's root ending in /work (gVisor's live sandboxes mount
	// theirs in their own directories on purpose: .../live/srl-ID/work).
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasSuffix(f[4], "/work") && strings.Contains(f[4], "sandbox") &&
			!strings.Contains(f[4], "/live/srl-") {
			t.Errorf("a sandbox's mount visible on the host: %s", f[4])
		}
	}
}

func TestMemoryLimit(t *testing.T) {
	// 256 MiB: more than the limit, less than a small VM's RAM (a larger
	// request could fail in malloc before the cgroup limit is reached).
	res := py(t, "x = bytearray(256 << 20)\nprint('allocated')", Limits{Memory: 64 << 20})
	if res.Limit != LimitMemory || strings.Contains(string(res.Stdout), "allocated") {
		t.Fatalf("limit=%q exit=%d signal=%q stdout=%q", res.Limit, res.ExitCode, res.Signal, res.Stdout)
	}
	if res.PeakMemory > 64<<20+(1<<20) {
		t.Errorf("peak memory %d above the 64 MiB limit", res.PeakMemory)
	}
}

func TestForkBomb(t *testing.T) {
	res := py(t, `
import os, time
n = 0
while True:
    try:
        if os.fork() == 0:
            time.sleep(30); os._exit(0)
        n += 1
    except OSError:
        print("fork refused after", n); break
`, Limits{Processes: 16, WallTime: 10 * time.Second})
	if res.Limit != LimitProcesses || !strings.HasPrefix(string(res.Stdout), "fork refused after 1") {
		t.Fatalf("limit=%q stdout=%q stderr=%q", res.Limit, res.Stdout, res.Stderr)
	}
	if left := sandboxProcesses(t); len(left) > 0 {
		t.Fatalf("processes left after a fork bomb: %v", left)
	}
}

func TestShellForkBomb(t *testing.T) {
	res := sh(t, ":(){ :|:& };:; sleep 1", Limits{Processes: 20, WallTime: 3 * time.Second})
	if res.Limit != LimitProcesses {
		t.Fatalf("limit=%q exit=%d", res.Limit, res.ExitCode)
	}
	if left := sandboxProcesses(t); len(left) > 0 {
		t.Fatalf("processes left after a fork bomb: %v", left)
	}
}

// TestCPULimit: a 1 s CPU limit stops the tree, also when two processes
// burn in parallel, having let it use its second and not much more: a
// margin that holds beside other CPU hogs (TestCPULimitPrecise holds the
// precision, where the machine is quiet).
func TestCPULimit(t *testing.T) {
	cpuLimit(t, 990*time.Millisecond, 1500*time.Millisecond)
}

// TestCPULimitPrecise: the same, stopped within [0.99 s, 1.01 s] of CPU. It
// times a machine that must be quiet: CI runs it as a step of its own
// (SANDBOX_TEST_PRECISE=1); elsewhere it says so and skips.
func TestCPULimitPrecise(t *testing.T) {
	if os.Getenv("SANDBOX_TEST_PRECISE") != "1" {
		t.Skip("a precision measurement: run with SANDBOX_TEST_PRECISE=1 on a quiet machine (CI's own step)")
	}
	// The watchdog aims a millisecond early (cpuKillMargin).
	cpuLimit(t, 990*time.Millisecond, 1010*time.Millisecond)
}

func cpuLimit(t *testing.T, lo, hi time.Duration) {
	for _, c := range []struct {
		name   string
		script string
		cpus   float64
	}{
		{"one process", "while :; do :; done", 1},
		{"two processes", "while :; do :; done & while :; do :; done", 2},
	} {
		res := sh(t, c.script, Limits{CPUTime: time.Second, CPUs: c.cpus, WallTime: 30 * time.Second})
		t.Logf("%s: cpu=%v wall=%v", c.name, res.CPUTime, res.WallTime)
		if res.Limit != LimitCPUTime {
			t.Errorf("%s: limit=%q", c.name, res.Limit)
		}
		if res.CPUTime < lo || res.CPUTime > hi {
			t.Errorf("%s: CPU time %v, want within [%v, %v]", c.name, res.CPUTime, lo, hi)
		}
	}
}

func TestWallLimit(t *testing.T) {
	res := sh(t, "trap '' TERM; sleep 5", Limits{WallTime: 300 * time.Millisecond})
	if res.Limit != LimitWallTime || res.WallTime > 1*time.Second {
		t.Fatalf("limit=%q wall=%v", res.Limit, res.WallTime)
	}
}

func TestStoppedProcessStillDies(t *testing.T) {
	res := sh(t, "kill -STOP $$", Limits{WallTime: 300 * time.Millisecond})
	if res.Limit != LimitWallTime {
		t.Fatalf("limit=%q", res.Limit)
	}
}

func TestOutputFlood(t *testing.T) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	res := run(t, &Spec{Args: []string{"yes"}})
	runtime.ReadMemStats(&after)
	// The host keeps the capped 1 MiB and a read buffer, whatever is printed.
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
		t.Errorf("the host allocated %d bytes for a flood capped at 1 MiB", grew)
	}
	if res.Limit != LimitOutput || !res.StdoutTruncated || int64(len(res.Stdout)) != DefaultLimits.OutputBytes {
		t.Fatalf("limit=%q truncated=%v len=%d", res.Limit, res.StdoutTruncated, len(res.Stdout))
	}
	res = sh(t, "head -c 100000 /dev/zero >&2", Limits{OutputBytes: 1000})
	if res.Limit != LimitOutput || !res.StderrTruncated || len(res.Stderr) != 1000 {
		t.Fatalf("stderr: limit=%q truncated=%v len=%d", res.Limit, res.StderrTruncated, len(res.Stderr))
	}
}

func TestFileSizeLimit(t *testing.T) {
	res := sh(t, "head -c 100000 /dev/zero > /work/big", Limits{FileSize: 1000})
	if res.Limit != LimitFileSize {
		t.Fatalf("shell: limit=%q exit=%d", res.Limit, res.ExitCode)
	}
	// CPython ignores SIGXFSZ and sees EFBIG instead.
	res = py(t, "open('/work/big','wb').write(b'x'*100000)", Limits{FileSize: 1000})
	if res.Limit != LimitFileSize {
		t.Fatalf("python: limit=%q exit=%d stderr=%q", res.Limit, res.ExitCode, res.Stderr)
	}
}

func TestWorkDirFull(t *testing.T) {
	res := sh(t, "head -c 10000000 /dev/zero > /work/x", Limits{WorkSize: 1 << 20})
	if res.Limit != LimitDisk || res.ExitCode == 0 {
		t.Fatalf("limit=%q stderr=%q", res.Limit, res.Stderr)
	}
	res = sh(t, "for i in $(seq 200); do : > /work/f$i || exit 7; done", Limits{Inodes: 64})
	if res.Limit != LimitDisk || res.ExitCode != 7 {
		t.Fatalf("inodes: limit=%q exit=%d", res.Limit, res.ExitCode)
	}
}

func TestOpenFilesLimit(t *testing.T) {
	res := py(t, `
import os
fds = []
try:
    while True: fds.append(os.open("/dev/null", os.O_RDONLY))
except OSError as e:
    print(len(fds) + 3, e.errno)`, Limits{OpenFiles: 50})
	if strings.TrimSpace(string(res.Stdout)) != "50 24" { // EMFILE
		t.Fatalf("got %q %q", res.Stdout, res.Stderr)
	}
}

func TestInputAndOutputFiles(t *testing.T) {
	res := run(t, &Spec{
		Args:  []string{"bash", "-c", "cat data/in.txt; ./tool.sh; mkdir -p out; echo result > out/r.txt; ln -s /etc/passwd link.txt; mkfifo fifo; head -c 2000 /dev/zero > big.bin"},
		Files: []File{{Path: "data/in.txt", Data: []byte("input\n")}, {Path: "tool.sh", Data: []byte("#!/bin/sh\necho tool\n"), Mode: 0o755}},
		Collect: Collect{Patterns: []string{"out/*", "link.txt", "fifo", "big.bin", "missing.txt", "data/in.txt"},
			MaxFileBytes: 1000},
	})
	if string(res.Stdout) != "input\ntool\n" {
		t.Fatalf("stdout=%q stderr=%q", res.Stdout, res.Stderr)
	}
	got := map[string]string{}
	for _, f := range res.Files {
		got[f.Path] = string(f.Data)
	}
	if len(got) != 2 || got["out/r.txt"] != "result\n" || got["data/in.txt"] != "input\n" {
		t.Errorf("files: %v", got)
	}
	skipped := map[string]string{}
	for _, s := range res.SkippedFiles {
		skipped[s.Path] = s.Reason
	}
	for path, why := range map[string]string{"link.txt": "not a regular file", "fifo": "not a regular file", "missing.txt": "not found", "big.bin": "cap"} {
		if !strings.Contains(skipped[path], why) {
			t.Errorf("%s: skipped reason %q, want %q (all: %v)", path, skipped[path], why, skipped)
		}
	}
}

func TestStdinAndLiveOutput(t *testing.T) {
	var live bytes.Buffer
	res := run(t, &Spec{Args: []string{"cat"}, Stdin: strings.NewReader("streamed input\n"), Stdout: &live})
	if string(res.Stdout) != "streamed input\n" || live.String() != "streamed input\n" {
		t.Fatalf("stdout=%q live=%q", res.Stdout, live.String())
	}
}

func TestCancelAndKill(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	res, err := testEngine(t).Run(ctx, withDefaults(&Spec{Args: []string{"sleep", "10"}}))
	if err != nil || res.Limit != LimitCanceled || res.WallTime > 2*time.Second {
		t.Fatalf("cancel: err=%v res=%+v", err, res)
	}
	p, err := testEngine(t).Start(context.Background(), withDefaults(&Spec{Args: []string{"sleep", "10"}}))
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(100*time.Millisecond, p.Kill)
	res, err = p.Wait()
	if err != nil || res.Limit != LimitCanceled {
		t.Fatalf("kill: err=%v res=%+v", err, res)
	}
}

func TestSetupErrors(t *testing.T) {
	e := testEngine(t)
	ctx := context.Background()
	_, err := e.Run(ctx, withDefaults(&Spec{Args: []string{"no-such-program"}}))
	var se *SetupError
	if !errors.As(err, &se) || se.Step != "exec" {
		t.Errorf("missing program: %v", err)
	}
	for _, spec := range []*Spec{
		{},
		{Args: []string{"true\x00"}},
		{Args: []string{"true"}, Env: []string{"NOEQUALS"}},
		{Args: []string{"true"}, Mounts: []Mount{{Source: "relative"}}},
		{Args: []string{"true"}, Mounts: []Mount{{Source: "/usr", Target: "/work"}}},
		{Args: []string{"true"}, Files: []File{{Path: "../escape"}}},
		{Args: []string{"true"}, Mounts: []Mount{{Source: "/nonexistent-dir"}}},
	} {
		if _, err := e.Run(ctx, withDefaults(spec)); err == nil {
			t.Errorf("spec %+v: no error", spec)
		}
	}
}

// A sandbox whose build fails is destroyed once: a second destroy closed
// descriptor numbers another run had since been given (its control socket
// then failed with ENOTSOCK) and put the uid slot back twice, so that two
// sandboxes could later share a uid.
func TestFailedBuildFreesOnce(t *testing.T) {
	e, err := New(Config{UIDBase: testUIDs(11), UIDSlots: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for range 3 {
		if _, err := e.Run(context.Background(), withDefaults(&Spec{Args: []string{"true"}, Mounts: []Mount{{Source: "/nonexistent-dir"}}})); err == nil {
			t.Fatal("a mount of a missing directory ran")
		}
	}
	e.Quiesce()
	e.uids.mu.Lock()
	free := slices.Clone(e.uids.free)
	e.uids.mu.Unlock()
	slices.Sort(free)
	if !slices.Equal(free, []int{0, 1}) {
		t.Fatalf("free uid slots after failed builds: %v, want [0 1]", free)
	}
}

func TestValidatePath(t *testing.T) {
	for _, bad := range []string{"", "/abs", "..", "../x", "a/../../x", "a\x00b", "a\nb", "a\u0085b", "evil\u202etxt.exe", "\xff", strings.Repeat("a/", 20) + "f", strings.Repeat("x", 300)} {
		if _, err := ValidatePath(bad); err == nil {
			t.Errorf("ValidatePath(%q) accepted", bad)
		}
	}
	for _, good := range []string{"a", "a/b/c.txt", "./x", "a/../b", "ü.txt"} {
		if _, err := ValidatePath(good); err != nil {
			t.Errorf("ValidatePath(%q): %v", good, err)
		}
	}
}

func TestOverlayAndWritableMounts(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	if err := os.WriteFile(filepath.Join(dir, "base.txt"), []byte("base"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := run(t, &Spec{
		Args:   []string{"bash", "-c", "cat /ovl/base.txt; echo new > /ovl/new.txt && cat /ovl/new.txt; echo w > /rw/written"},
		Mounts: append(append([]Mount(nil), SystemMounts...), Mount{Source: dir, Target: "/ovl", Overlay: true}, Mount{Source: dir, Target: "/rw", Writable: true}),
	})
	if string(res.Stdout) != "basenew\n" {
		t.Fatalf("stdout=%q stderr=%q", res.Stdout, res.Stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "new.txt")); err == nil {
		t.Errorf("an overlay write reached the host directory")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "written")); string(b) != "w\n" {
		t.Errorf("writable mount: %q", b)
	}
}

func TestPackageRunAndHelpers(t *testing.T) {
	res, err := Run(context.Background(), withDefaults(&Spec{Args: []string{"sh", "-c", "kill -TERM $$"}}))
	if err != nil || res.Signal != "SIGTERM" || res.ExitCode != -1 || SignalNumber(res.Signal) != 15 {
		t.Fatalf("err=%v res=%+v", err, res)
	}
	se := &SetupError{Step: "x", Err: os.ErrNotExist}
	if !errors.Is(se, os.ErrNotExist) || !strings.Contains(se.Error(), "x") {
		t.Errorf("SetupError does not wrap: %v", se)
	}
}

func TestUIDSlotsExhausted(t *testing.T) {
	e, err := New(Config{UIDBase: testUIDs(1), UIDSlots: 1})
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.Start(context.Background(), withDefaults(&Spec{Args: []string{"sleep", "10"}}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Start(context.Background(), withDefaults(&Spec{Args: []string{"true"}})); !errors.Is(err, ErrBusy) {
		t.Errorf("second concurrent run: %v, want ErrBusy", err)
	}
	p.Kill()
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if res, err := e.Run(context.Background(), withDefaults(&Spec{Args: []string{"true"}})); err != nil || res.ExitCode != 0 {
		t.Errorf("slot not returned: %v", err)
	}
	// An idle pooled sandbox holds the only slot; a run that needs another
	// kind of sandbox evicts it.
	if res, err := e.Run(context.Background(), withDefaults(&Spec{Args: []string{"true"}, Hostname: "other"})); err != nil || res.ExitCode != 0 {
		t.Errorf("idle sandbox not evicted for a new one: %v", err)
	}
	e.Close()
}

// TestSeccompIsNecessary shows each layer against nested namespaces and
// kernel attack surface holds on its own: with the filter off, the user
// namespace limit still refuses a nested user namespace, and the keyring
// calls that only the filter denies go through.
func TestSeccompIsNecessary(t *testing.T) {
	script := `unshare -U true 2>&1 && echo NESTED || echo REFUSED; grep Seccomp: /proc/self/status
/usr/bin/python3 -c '
import ctypes, platform
libc = ctypes.CDLL(None, use_errno=True)
nr = {"x86_64": 250, "aarch64": 219}[platform.machine()]
r = libc.syscall(nr, 0, -3, 1)
print("KEYCTL", "OK" if r >= 0 else "ERR%d" % ctypes.get_errno())'`
	withFilter := sh(t, script, Limits{})
	out := string(withFilter.Stdout)
	if !strings.Contains(out, "REFUSED") || !strings.Contains(out, "KEYCTL ERR") || strings.Contains(out, "Seccomp:\t0") {
		t.Fatalf("with the filter: %q %q", withFilter.Stdout, withFilter.Stderr)
	}
	e, err := New(Config{UIDBase: testUIDs(4), UIDSlots: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	e.seccomp = false // never do this outside this test
	res, err := e.Run(context.Background(), withDefaults(&Spec{Args: []string{"bash", "-c", script}}))
	if err != nil {
		t.Fatal(err)
	}
	out = string(res.Stdout)
	if !strings.Contains(out, "KEYCTL OK") || !strings.Contains(out, "Seccomp:\t0") {
		t.Fatalf("without the filter keyctl should work (else this test proves nothing): %q %q", res.Stdout, res.Stderr)
	}
	if !strings.Contains(out, "No space left on device") || !strings.Contains(out, "REFUSED") {
		t.Fatalf("without the filter the user namespace limit must still refuse: %q %q", res.Stdout, res.Stderr)
	}
}

// TestPooledSandboxIsReset runs twice in the same pooled sandbox: nothing
// the first run leaves (files in /work, /tmp and /dev/shm, a daemon, an
// abstract socket, its pid numbers) reaches the second. A run that leaves
// what PID 1 cannot clear (a SysV segment, a message queue, a TCP
// connection in TIME_WAIT) retires its sandbox.
func TestPooledSandboxIsReset(t *testing.T) {
	e, err := New(Config{UIDBase: testUIDs(5), UIDSlots: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	run := func(script string) (*Result, *container, bool) {
		t.Helper()
		p, err := e.Start(context.Background(), withDefaults(&Spec{Args: []string{"bash", "-c", script}}))
		if err != nil {
			t.Fatal(err)
		}
		c := p.c
		res, err := p.Wait()
		if err != nil {
			t.Fatal(err)
		}
		// The verdict may follow the result (the next run reads it then).
		return res, c, c.settle()
	}
	dirty := `echo secret > /work/left; echo secret > /tmp/left; echo secret > /dev/shm/left
(setsid sleep 60 >/dev/null 2>&1 &)
/usr/bin/python3 -c '
import socket, os
s = socket.socket(socket.AF_UNIX); s.bind("\0leftover"); s.listen()
if os.fork() == 0:
    os.setsid(); import time; time.sleep(60)'
echo $$`
	first, c1, clean := run(dirty)
	if !clean {
		t.Fatalf("first run: %q %q clean=%v", first.Stdout, first.Stderr, clean)
	}
	look := `ls -A /work /tmp /dev/shm; ipcs -m | grep -c 0x; ls /proc | grep -cE '^[0-9]+$'
/usr/bin/python3 -c '
import socket
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("\0leftover"); print("ABSTRACT SOCKET LEFT")
except OSError: print("no socket")'
echo $$`
	second, c2, _ := run(look)
	if c1 != c2 {
		t.Fatal("the second run did not reuse the pooled sandbox")
	}
	out := string(second.Stdout)
	if strings.Contains(out, "left") || strings.Contains(out, "ABSTRACT") || !strings.Contains(out, "no socket") {
		t.Errorf("the first run's leftovers reached the second:\n%s", out)
	}
	// Pids start at runPidBase+1 again: the count of earlier runs does not
	// show (see runPidBase for the few above it).
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if pid, _ := strconv.Atoi(lines[len(lines)-1]); pid < runPidBase+1 || pid > runPidBase+4 {
		t.Errorf("pid of the second run: %q", lines[len(lines)-1])
	}
	for _, leave := range []string{"ipcmk -M 4096", "ipcmk -Q", `/usr/bin/python3 -c '
import ctypes, os
librt = ctypes.CDLL("librt.so.1", use_errno=True)
fd = librt.mq_open(b"/left", os.O_CREAT | os.O_RDWR, 0o600, None)
print("mq", fd)'`, `/usr/bin/python3 -c '
import socket
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen()
c = socket.create_connection(l.getsockname()); a, _ = l.accept()
c.close(); a.close(); l.close()
print("connected")'`} {
		res, c3, clean := run(leave)
		if c3 != c2 || clean || res.ExitCode != 0 {
			t.Fatalf("%s: must leave the sandbox unclean: same=%v clean=%v %q %q", leave, c3 == c2, clean, res.Stdout, res.Stderr)
		}
		_, c4, _ := run("true")
		if c4 == c3 {
			t.Errorf("%s: an unclean sandbox served again", leave)
		}
		c2 = c4
	}
	e.Drain()
	testEngine(t).Drain() // the other sandboxes of this process
	if d, err := Default(); err == nil {
		d.Drain()
	}
	if left := leakcheck.Processes(e.cfg.UIDBase, e.cfg.UIDBase+2*e.cfg.UIDSlots, ""); len(left) > 0 {
		t.Errorf("processes left after Drain: %v", left)
	}
	if left := leakcheck.SandboxCgroups(e.Cgroups().Parents, os.Getpid()); len(left) > 0 {
		t.Errorf("cgroups left after Drain: %v", left)
	}
}

// TestPooledLimitsChange: a pooled sandbox (and the cgroups it prepared
// for its next run) serves runs whose limits differ from the last one's,
// lower and higher, and each run gets its own.
func TestPooledLimitsChange(t *testing.T) {
	e, err := New(Config{UIDBase: testUIDs(7), UIDSlots: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	const alloc = "x = bytearray(96 << 20); print('allocated')"
	for i, c := range []struct {
		mem       int64
		wantLimit Limit
	}{{64 << 20, LimitMemory}, {256 << 20, LimitNone}, {64 << 20, LimitMemory}, {512 << 20, LimitNone}} {
		res, err := e.Run(context.Background(), withDefaults(&Spec{Args: []string{"/usr/bin/python3", "-c", alloc}, Limits: Limits{Memory: c.mem}}))
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if res.Limit != c.wantLimit {
			t.Errorf("run %d with %d MiB: limit %q, want %q (stdout %q)", i, c.mem>>20, res.Limit, c.wantLimit, res.Stdout)
		}
		e.Quiesce()
	}
	for i, n := range []int{4, 40, 4} {
		res, err := e.Run(context.Background(), withDefaults(&Spec{Args: []string{"bash", "-c", "for i in $(seq 20); do sleep 1 & done; wait"}, Limits: Limits{Processes: n, WallTime: 5 * time.Second}}))
		if err != nil {
			t.Fatalf("pids run %d: %v", i, err)
		}
		if got := res.Limit == LimitProcesses; got != (n < 20) {
			t.Errorf("pids run %d with %d processes: limit %q", i, n, res.Limit)
		}
		e.Quiesce()
	}
}

// TestPrewarmAndExpiry: Prewarm builds sandboxes ahead and keeps as many
// ready as runs take them; idle ones go after PoolIdle; specs that cannot
// be pooled cannot be prepared.
//
// The counts are checked on an engine whose PoolIdle no test outlasts, so
// that a busy machine (slow builds, late wake-ups) cannot expire a sandbox
// between two counts; expiry is checked on a second engine with a short
// PoolIdle, waiting for it with a deadline far above PoolIdle.
func TestPrewarmAndExpiry(t *testing.T) {
	uidBase := testUIDs(19)
	newEngine := func(idle time.Duration) (*Engine, func() int) {
		e, err := New(Config{UIDBase: uidBase, UIDSlots: 8, PoolIdle: idle})
		if err != nil {
			t.Fatal(err)
		}
		return e, func() int {
			e.pool.mu.Lock()
			defer e.pool.mu.Unlock()
			return e.pool.n
		}
	}
	// building counts the sandboxes being built: replacements are built in
	// the background, and one must not outlive the test.
	building := func(e *Engine) int {
		e.pool.mu.Lock()
		defer e.pool.mu.Unlock()
		n := 0
		for _, s := range e.pool.starting {
			n += s
		}
		return n
	}
	lo, hi := uidBase, uidBase+2*8
	spec := withDefaults(&Spec{Args: []string{"true"}})

	e, idle := newEngine(time.Hour)
	if err := e.Prewarm(spec, 2); err != nil {
		t.Fatal(err)
	}
	if n := idle(); n != 2 {
		t.Fatalf("%d idle after Prewarm(2)", n)
	}
	p, err := e.Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	// Taking one below the wanted number builds a replacement meanwhile.
	if !waitUntil(60*time.Second, func() bool { return idle() == 2 }) {
		t.Errorf("%d idle while a run holds one, want 2 (replaced)", idle())
	}
	if res, err := p.Wait(); err != nil || res.ExitCode != 0 {
		t.Fatalf("run: %v %+v", err, res)
	}
	e.Quiesce()
	if n := idle(); n != 3 {
		t.Errorf("%d idle after the run came back, want 3", n)
	}
	overlay := withDefaults(&Spec{Args: []string{"true"}, Mounts: []Mount{{Source: t.TempDir(), Target: "/ovl", Overlay: true}}})
	if err := e.Prewarm(overlay, 1); err == nil {
		t.Error("an overlay spec was prepared ahead")
	}
	e.Close()
	if !waitUntil(60*time.Second, func() bool { return len(leakcheck.Processes(lo, hi, "")) == 0 }) {
		t.Fatalf("closed engine's sandboxes still running: %v", leakcheck.Processes(lo, hi, ""))
	}

	// Expiry: prepared sandboxes and one a run brought back alike.
	const poolIdle = 300 * time.Millisecond
	e, idle = newEngine(poolIdle)
	defer e.Close()
	if err := e.Prewarm(spec, 2); err != nil {
		t.Fatal(err)
	}
	if res, err := e.Run(context.Background(), spec); err != nil || res.ExitCode != 0 {
		t.Fatalf("run: %v %+v", err, res)
	}
	e.Quiesce()
	if !waitUntil(60*time.Second, func() bool { return idle() == 0 && building(e) == 0 }) {
		t.Errorf("%d idle sandboxes outlived PoolIdle (%v) by a minute (%d being built)", idle(), poolIdle, building(e))
	}
	e.Quiesce()
	if !waitUntil(60*time.Second, func() bool { return len(leakcheck.Processes(lo, hi, "")) == 0 }) {
		t.Errorf("expired sandboxes still running: %v", leakcheck.Processes(lo, hi, ""))
	}
}

// TestPrewarmSlowerThanIdle: on a machine where building a sandbox takes
// longer than PoolIdle, each prepared sandbox expires while the next is
// built; Prewarm and the refill a run starts build what was missing and
// stop, instead of chasing expiry for ever.
func TestPrewarmSlowerThanIdle(t *testing.T) {
	uidBase := testUIDs(20)
	e, err := New(Config{UIDBase: uidBase, UIDSlots: 8, PoolIdle: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var builds atomic.Int32
	// Each build takes at least 500 ms, ten times PoolIdle: the one built
	// before it has expired by the time it is done.
	testHookPrewarmBuild = func() {
		builds.Add(1)
		time.Sleep(500 * time.Millisecond)
	}
	defer func() { testHookPrewarmBuild = nil }()
	state := func() (idle, building int) {
		e.pool.mu.Lock()
		defer e.pool.mu.Unlock()
		for _, s := range e.pool.starting {
			building += s
		}
		return e.pool.n, building
	}
	spec := withDefaults(&Spec{Args: []string{"true"}})
	done := make(chan error, 1)
	go func() { done <- e.Prewarm(spec, 2) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("Prewarm(2) still building after two minutes: %d builds", builds.Load())
	}
	if n := builds.Load(); n != 2 {
		t.Errorf("Prewarm(2) from nothing built %d sandboxes", n)
	}
	// A run takes one (or none, if both expired) and starts a refill of
	// at most two more.
	if res, err := e.Run(context.Background(), spec); err != nil || res.ExitCode != 0 {
		t.Fatalf("run: %v %+v", err, res)
	}
	if !waitUntil(2*time.Minute, func() bool { idle, building := state(); return idle == 0 && building == 0 }) {
		idle, building := state()
		t.Fatalf("two minutes after the run: %d idle, %d being built, %d builds: the refill chases expiry", idle, building, builds.Load())
	}
	if n := builds.Load(); n > 4 {
		t.Errorf("%d builds for Prewarm(2) and one run's refill, want at most 4", n)
	}
}

func waitUntil(d time.Duration, ok func() bool) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(10 * time.Millisecond) {
		if ok() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// TestResultPipe: with ResultPipe the program's descriptor 3 is a channel
// apart from its output; without it, descriptor 3 is closed.
func TestResultPipe(t *testing.T) {
	script := `echo '{"forged": true}'; echo '{"value": 2}' >&3 && echo WROTE || echo NOFD3`
	res := run(t, &Spec{Args: []string{"bash", "-c", script}, ResultPipe: true})
	if string(res.ResultData) != "{\"value\": 2}\n" || !strings.Contains(string(res.Stdout), "WROTE") {
		t.Errorf("with the pipe: result %q stdout %q stderr %q", res.ResultData, res.Stdout, res.Stderr)
	}
	res = run(t, &Spec{Args: []string{"bash", "-c", script}})
	if len(res.ResultData) != 0 || !strings.Contains(string(res.Stdout), "NOFD3") {
		t.Errorf("without the pipe: result %q stdout %q", res.ResultData, res.Stdout)
	}
	big := run(t, &Spec{Args: []string{"bash", "-c", "head -c 100000 /dev/zero >&3"}, ResultPipe: true, Limits: Limits{OutputBytes: 1000}})
	if len(big.ResultData) != 1000 || !big.ResultTruncated || big.Limit != LimitOutput {
		t.Errorf("over the output limit: %d bytes, truncated %v, limit %q", len(big.ResultData), big.ResultTruncated, big.Limit)
	}
}

// TestDeadPooledSandboxSkipped: a pooled sandbox whose PID 1 was killed
// while idle is not handed to the next run.
func TestDeadPooledSandboxSkipped(t *testing.T) {
	e, err := New(Config{UIDBase: testUIDs(8), UIDSlots: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	spec := withDefaults(&Spec{Args: []string{"true"}})
	p, err := e.Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	c := p.c
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	e.Quiesce()
	c.cmd.Process.Kill() // from outside, while idle
	<-c.exited
	res, err := e.Run(context.Background(), spec)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("the run after PID 1 died: %v %+v", err, res)
	}
}

func TestPoolKey(t *testing.T) {
	base := initConfig{Mounts: []mountConfig{{Source: "/usr", Target: "/usr"}}, Hostname: "sandbox", FileSize: 1, NoFile: 2, Stack: 3, CPUSecs: 4, Seccomp: true}
	variants := []func(c *initConfig){
		func(c *initConfig) { c.Mounts = []mountConfig{{Source: "/usr", Target: "/usr2"}} },
		func(c *initConfig) { c.Mounts = []mountConfig{{Source: "/us", Target: "r/usr"}} },
		func(c *initConfig) { c.Mounts = nil },
		func(c *initConfig) { c.Hostname = "other" },
		func(c *initConfig) { c.FileSize = 9 },
		func(c *initConfig) { c.NoFile = 9 },
		func(c *initConfig) { c.Stack = 9 },
		func(c *initConfig) { c.CPUSecs = 9 },
		func(c *initConfig) { c.Seccomp = false },
		func(c *initConfig) { c.PTY = true },
	}
	seen := map[string]int{poolKey(&base): -1}
	for i, change := range variants {
		c := base
		change(&c)
		k := poolKey(&c)
		if j, dup := seen[k]; dup {
			t.Errorf("variant %d has the key of %d", i, j)
		}
		seen[k] = i
	}
	if k := poolKey(&initConfig{Mounts: []mountConfig{{Source: "/x", Writable: true}}}); k != "" {
		t.Errorf("a writable mount is pooled: %q", k)
	}
}

// TestWallTimeFromPID1: the wall time is the program's, measured by PID 1,
// even when the caller waits late for the end of a run.
func TestWallTimeFromPID1(t *testing.T) {
	p, err := testEngine(t).Start(context.Background(), withDefaults(&Spec{Args: []string{"sleep", "0.2"}}))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the program is long done
	res, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if res.WallTime < 200*time.Millisecond || res.WallTime > 450*time.Millisecond {
		t.Errorf("wall time %v for sleep 0.2 waited for late", res.WallTime)
	}
}

// TestReopenStdio: the program may reopen its standard streams by path,
// as programs that read /dev/stdin or write /dev/stdout do.
func TestReopenStdio(t *testing.T) {
	res := run(t, &Spec{Args: []string{"bash", "-c", "cat /dev/stdin > /dev/stdout; echo err > /dev/stderr"}, Stdin: strings.NewReader("through /dev/stdin\n")})
	if string(res.Stdout) != "through /dev/stdin\n" || string(res.Stderr) != "err\n" {
		t.Errorf("stdout %q stderr %q", res.Stdout, res.Stderr)
	}
}

// TestDiagnose: on this host every required check holds, the trial run
// included; a cgroup parent the engine cannot use fails the cgroups check
// with a message, and leaves nothing.
func TestDiagnose(t *testing.T) {
	checks := Diagnose(Config{UIDBase: testUIDs(12), UIDSlots: 1, PoolSize: NoPool})
	names := map[string]bool{}
	for _, c := range checks {
		names[c.Name] = true
		if c.Required && !c.OK {
			t.Errorf("%s: %s", c.Name, c.Detail)
		}
	}
	for _, want := range []string{"kernel", "privileges", "user namespaces", "seccomp", "landlock", "cgroups", "trial run", "network access"} {
		if !names[want] {
			t.Errorf("no %q check in %+v", want, checks)
		}
	}
	if _, err := os.Stat("/dev/net/tun"); err == nil {
		for _, c := range checks {
			if c.Name == "network access" && !c.OK {
				t.Errorf("network access on a host with TUN devices: %s", c.Detail)
			}
		}
	}
	// A parent that would leave the hierarchy is refused, and nothing is
	// made outside it (v1: /sys/fs/cgroup/<name>; v2: /sys/fs/<name>).
	name := fmt.Sprintf("sandbox-run-escape-test-%d", os.Getpid())
	checks = Diagnose(Config{UIDBase: testUIDs(12), UIDSlots: 1, PoolSize: NoPool, CgroupParent: "../" + name})
	last := checks[len(checks)-1]
	if last.OK || !last.Required || !strings.Contains(last.Detail, "cgroup parent") {
		t.Errorf("a cgroup parent outside the hierarchy: %+v", last)
	}
	for _, p := range []string{"/sys/fs/cgroup/" + name, "/sys/fs/" + name} {
		if _, err := os.Stat(p); err == nil {
			os.RemoveAll(p)
			t.Errorf("%s was made outside the cgroup hierarchy", p)
		}
	}
}

// TestDrainWaitsForCleanup: a sandbox back in the pool while its last
// run's cgroup is still being removed (in the background) and drained at
// that moment leaves nothing: destroying it waited for the clean-up, which
// removes the run's cgroup through the sandbox's directories.
func TestDrainWaitsForCleanup(t *testing.T) {
	e, err := New(Config{UIDBase: testUIDs(13), UIDSlots: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	testHookRelease = func() { time.Sleep(300 * time.Millisecond) }
	defer func() { testHookRelease = nil }()
	for range 3 {
		if _, err := e.Run(context.Background(), withDefaults(&Spec{Args: []string{"true"}})); err != nil {
			t.Fatal(err)
		}
		e.Drain()
	}
	testHookRelease = nil
	testEngine(t).Drain() // the other sandboxes of this process
	if d, err := Default(); err == nil {
		d.Drain()
	}
	if left := leakcheck.SandboxCgroups(e.Cgroups().Parents, os.Getpid()); len(left) > 0 {
		t.Errorf("cgroups left after Drain: %v", left)
	}
}

// A pooled sandbox's next /work, /tmp and /dev/shm are ready ahead with the
// last run's sizes (that run's own, emptied, or new ones): a run that asks
// for other sizes gets them, and no run sees the files of another.
func TestFilesystemsMadeAheadFitTheRun(t *testing.T) {
	e, err := New(Config{UIDBase: testUIDs(6), UIDSlots: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var first *container
	for i, size := range []int64{8 << 20, 8 << 20, 24 << 20, 24 << 20, 8 << 20} {
		spec := withDefaults(&Spec{Args: []string{"bash", "-c", `ls -A /work /tmp /dev/shm; df -k /work /tmp | while read -r fs size rest; do [ "$size" = 1K-blocks ] || echo "$size"; done
echo left > /work/left-$RANDOM; echo left > /tmp/left; echo left > /dev/shm/left`}})
		spec.Limits.WorkSize, spec.Limits.TmpSize = size, 2*size
		p, err := e.Start(context.Background(), spec)
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = p.c
		} else if p.c != first {
			t.Fatalf("run %d did not reuse the pooled sandbox", i)
		}
		res, err := p.Wait()
		if err != nil {
			t.Fatal(err)
		}
		e.Quiesce() // the next run's filesystems are made
		first.fsMu.Lock()
		ahead := first.nextFS != nil && first.nextFS.fits(p.limits) || first.keptFS != nil && first.keptFS.fits(p.limits)
		first.fsMu.Unlock()
		if !ahead {
			t.Errorf("run %d: no filesystems made ahead with its sizes", i)
		}
		want := fmt.Sprintf("/dev/shm:\n\n/tmp:\n\n/work:\n%d\n%d\n", size>>10, 2*size>>10)
		if got := string(res.Stdout); got != want || res.ExitCode != 0 {
			t.Errorf("run %d (%d MiB): got %q (exit %d, %s), want %q", i, size>>20, got, res.ExitCode, res.Stderr, want)
		}
	}
}

// rootProbe is a static program that says what it sees of its root.
const rootProbe = `package main

import (
	"fmt"
	"os"
	"strings"
)

func main() {
	entries, _ := os.ReadDir("/")
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	link, err := os.Readlink("/lib64")
	fmt.Println("root:", strings.Join(names, " "))
	fmt.Println("lib64:", link, err)
	release, err := os.ReadFile("/etc/os-release")
	fmt.Printf("os-release: %q %v\n", release, err)
	passwd, _ := os.ReadFile("/etc/passwd")
	fmt.Println("sandbox user:", strings.Contains(string(passwd), "sandbox:x:1000"))
	_, err = os.Stat("/usr/bin/bash")
	fmt.Println("host usr:", err == nil)
	fmt.Println("write:", os.WriteFile("/bin/x", nil, 0o644) != nil)
}
`

// A Spec.Root is the sandbox's root instead of the host's: its entries
// bound read-only, its symlinks recreated as they are (an absolute one is
// not followed on the host), /etc's own files but passwd, group and hosts.
func TestSpecRoot(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go toolchain to build the probe")
	}
	root := t.TempDir()
	src := filepath.Join(t.TempDir(), "probe.go")
	if err := os.WriteFile(src, []byte(rootProbe), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"bin", "etc", "usr/share", "tmp", "proc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	build := exec.Command(gobin, "build", "-o", filepath.Join(root, "bin", "probe"), src)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the probe: %v\n%s", err, out)
	}
	// An absolute link that, followed on the host, would show the host's.
	if err := os.Symlink("/usr/lib/x86_64-linux-gnu", filepath.Join(root, "lib64")); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"etc/os-release": "ID=probe\n", "etc/passwd": "intruder:x:0:0::/:/bin/sh\n"} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res := run(t, &Spec{Args: []string{"/bin/probe"}, Root: root, Mounts: []Mount{}, Env: []string{"PATH=/bin"}})
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	out := string(res.Stdout)
	for _, want := range []string{
		"root: bin dev etc lib64 proc tmp usr work\n",
		"lib64: /usr/lib/x86_64-linux-gnu <nil>\n",
		`os-release: "ID=probe\n" <nil>` + "\n",
		"sandbox user: true\n",
		"host usr: false\n",
		"write: true\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}

// staticBusybox is the host's busybox when it is statically linked (the
// busybox-static package), for roots that need a shell; "" otherwise.
func staticBusybox(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("busybox")
	if err != nil {
		return ""
	}
	out, _ := exec.Command("ldd", p).CombinedOutput()
	if !strings.Contains(string(out), "not a dynamic executable") && !strings.Contains(string(out), "statically linked") {
		return ""
	}
	return p
}

// The spec's mounts go inside a Root's directories (the image's /opt holds
// the entry point runners' mount point) without those directories losing
// their other entries, and a symlink of the Root never leads a mount or
// the sandbox's own /etc onto the host's tree while the root is built.
func TestSpecRootMountsInside(t *testing.T) {
	bb := staticBusybox(t)
	if bb == "" {
		t.Skip("no static busybox (Debian's busybox-static)")
	}
	root, host, extra := t.TempDir(), t.TempDir(), t.TempDir()
	for _, d := range []string{"bin", "opt/keep"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "busybox"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("busybox", filepath.Join(root, "bin", "sh")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "opt", "keep", "file"), []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(extra, "mounted"), []byte("mounted\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// /etc and /srv lead to a host directory: followed before pivot_root,
	// the sandbox would write its passwd there, or mount over it.
	for _, l := range []string{"etc", "srv"} {
		if err := os.Symlink(host, filepath.Join(root, l)); err != nil {
			t.Fatal(err)
		}
	}
	res := run(t, &Spec{
		Args:   []string{"/bin/sh", "-c", "cat /opt/keep/file /opt/m/mounted /srv/data/mounted; grep -c sandbox /etc/passwd; ls -ld /etc /srv | cut -c1"},
		Root:   root,
		Mounts: []Mount{{Source: extra, Target: "/opt/m"}, {Source: extra, Target: "/srv/data"}},
		Env:    []string{"PATH=/bin"},
	})
	if got, want := string(res.Stdout), "kept\nmounted\nmounted\n1\nd\nd\n"; res.ExitCode != 0 || got != want {
		t.Errorf("exit %d, stdout %q (want %q), stderr %s", res.ExitCode, got, want, res.Stderr)
	}
	if entries, _ := os.ReadDir(host); len(entries) != 0 {
		t.Errorf("the host directory the root's links name got %d entries", len(entries))
	}
}

// TestSandboxesOutOfTheCallersProcessGroup: a sandbox's PID 1 is in a
// session of its own, so the SIGINT a terminal sends its foreground
// process group on Ctrl-C (a `serve` or `repl` started from a shell)
// reaches the caller only, never its pooled sandboxes.
func TestSandboxesOutOfTheCallersProcessGroup(t *testing.T) {
	p, err := testEngine(t).Start(context.Background(), withDefaults(&Spec{Args: []string{"sleep", "10"}}))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Wait()
	defer p.Kill()
	ours := unix.Getpgrp()
	entries, _ := os.ReadDir("/proc")
	var inits int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		status, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil || !strings.Contains(string(status), fmt.Sprintf("\nPPid:\t%d\n", os.Getpid())) {
			continue
		}
		pgid, err := unix.Getpgid(pid)
		if err != nil {
			continue // gone meanwhile
		}
		inits++
		if pgid == ours {
			t.Errorf("the sandbox PID 1 %d is in the caller's process group %d", pid, ours)
		}
	}
	if inits == 0 {
		t.Fatal("no sandbox PID 1 among this process's children")
	}
}
