package sandbox

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// poolRun starts spec on e and returns its result and the sandbox that
// served it.
func poolRun(t *testing.T, e *Engine, spec *Spec) (*Result, *container) {
	t.Helper()
	p, err := e.Start(context.Background(), withDefaults(spec))
	if err != nil {
		t.Fatal(err)
	}
	c := p.c
	res, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	e.Quiesce() // the sandbox is back in the pool, its next cgroups made
	return res, c
}

// sockFill opens loopback TCP connections in the sandbox's network
// namespace and writes into them without ever reading, until it holds
// argv[1] bytes in their buffers or no buffer takes more for 3 s. It prints
// what it holds as it goes: the last line counts if the run is killed.
const sockFill = `
import socket, sys, time
cap = int(sys.argv[1])
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 30)
l.bind(("127.0.0.1", 0)); l.listen(128)
buf = b"x" * (1 << 16)
conns, held, idle = [], 0, 0
def fill(c):
    n = 0
    while True:
        try:
            k = c.send(buf)
        except OSError:
            return n
        if k <= 0:
            return n
        n += k
while held < cap and idle < 30:
    if len(conns) < 100:
        try:
            c = socket.socket()
            c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 30)
            c.connect(l.getsockname())
            a, _ = l.accept()
            c.setblocking(False)
            conns.append((c, a))
        except OSError as e:
            print("connect:", e, flush=True)
    got = 0
    for c, _ in conns:
        got += fill(c)
        if held + got >= cap:
            break
    held += got
    print("held", held, flush=True)
    idle = 0 if got else idle + 1
    if not got:
        time.sleep(0.1)
print("done", held, flush=True)
`

// TestSocketBuffersCharged: the kernel memory a program holds in socket
// buffers counts against its memory limit and in its peak memory. On
// cgroup v1 socket buffers are charged apart from memory.limit_in_bytes,
// and only where memory.kmem.tcp.limit_in_bytes is set: unset, a program
// held 1 GB in unread loopback connections under a 64 MiB limit and
// reported a 13 MB peak. On v2 they count in memory.current. The run goes
// through a pooled sandbox whose next cgroups were made for a larger limit,
// so the limit set when they are taken is what is tested.
func TestSocketBuffersCharged(t *testing.T) {
	e, err := New(Config{UIDBase: testUIDs(9), UIDSlots: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	const limit = 64 << 20
	_, c1 := poolRun(t, e, &Spec{Args: []string{"true"}, Limits: Limits{Memory: 4 * limit}})
	res, c2 := poolRun(t, e, &Spec{Args: []string{"/usr/bin/python3", "-c", sockFill, strconv.Itoa(4 * limit)},
		Limits: Limits{Memory: limit, WallTime: 2 * time.Minute}})
	if c1 != c2 {
		t.Error("the second run did not reuse the pooled sandbox")
	}
	held := int64(-1)
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		if f := strings.Fields(line); len(f) == 2 && (f[0] == "held" || f[0] == "done") {
			held, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	t.Logf("held %d MiB in socket buffers, peak %d MiB, limit %q, exit %d %s", held>>20, res.PeakMemory>>20, res.Limit, res.ExitCode, res.Signal)
	if held < 0 {
		t.Fatalf("no count from the program: limit %q, stdout %q, stderr %q", res.Limit, res.Stdout, res.Stderr)
	}
	// The buffers hold at least the payload: what the program wrote and
	// nobody read must fit in the limit (the margin covers accounting in
	// pages and per-CPU batches).
	if held > limit+8<<20 {
		t.Errorf("the program held %d MiB in socket buffers under a %d MiB memory limit", held>>20, limit>>20)
	}
	if res.Limit == LimitMemory {
		return // killed by the limit: also fine
	}
	if res.Limit != LimitNone || !strings.Contains(string(res.Stdout), "done") {
		t.Fatalf("limit %q, stdout %q, stderr %q", res.Limit, res.Stdout, res.Stderr)
	}
	// The program really held buffers, and its peak shows them.
	if held < limit/4 {
		t.Errorf("the program held only %d MiB: the test proves nothing", held>>20)
	}
	if res.PeakMemory < held {
		t.Errorf("peak memory %d MiB, less than the %d MiB held in socket buffers", res.PeakMemory>>20, held>>20)
	}
}

// lookScript prints what a run can see of the namespaces a pooled sandbox
// keeps between runs: the network counters, the next pids, and the ids the
// next SysV objects get (it makes one of each, and removes them).
const lookScript = `echo "first pid $$"
cat /proc/net/dev /proc/net/snmp /proc/net/netstat /proc/net/snmp6 2>&1
/usr/bin/python3 -c '
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
shm = libc.shmget(0, 4096, 0o1600); msg = libc.msgget(0, 0o1600); sem = libc.semget(0, 1, 0o1600)
shm2 = libc.shmget(0, 4096, 0o1600)
print("sysv ids", shm, msg, sem, shm2)
libc.shmctl(shm, 0, None); libc.shmctl(shm2, 0, None); libc.msgctl(msg, 0, None); libc.semctl(sem, 0, 0)
shm3 = libc.shmget(0, 4096, 0o1600); libc.shmctl(shm3, 0, None)
print("sysv after removal", shm3)'
`

// sysvMakeAndRemove makes SysV objects of each kind and removes them.
const sysvMakeAndRemove = `/usr/bin/python3 -c '
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
for i in range(3):
    shm = libc.shmget(0, 4096, 0o1600); msg = libc.msgget(0, 0o1600); sem = libc.semget(0, 1, 0o1600)
    assert min(shm, msg, sem) >= 0
    libc.shmctl(shm, 0, None); libc.msgctl(msg, 0, None); libc.semctl(sem, 0, 0)'
`

// busyScript leaves nothing behind that the sandbox's checks see (no
// socket, no SysV object), but moves every counter the next run could
// read: loopback TCP (closed with RST, so no TIME_WAIT), UDP, a refused
// connection, 40 processes, SysV objects made and removed. (No send to an
// address without a route, which also moves a counter: were the sandbox
// broken, it would leave the machine.)
const busyScript = `for i in $(seq 40); do /bin/true & done; wait
` + sysvMakeAndRemove + `
/usr/bin/python3 -c '
import socket, struct
linger = struct.pack("ii", 1, 0)
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen()
c = socket.create_connection(l.getsockname()); a, _ = l.accept()
c.sendall(b"x" * 100000); a.recv(1000)
for s in (c, a, l):
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger); s.close()
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); v = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
v.bind(("127.0.0.1", 0)); u.sendto(b"hello", v.getsockname()); v.recv(10)
u.sendto(b"nobody", ("127.0.0.1", 9)); u.close(); v.close()
try:
    socket.create_connection(("127.0.0.1", 9))
except OSError as e: print("refused", e.errno)
print("busy done")'
`

// TestPooledSandboxCountersReset: nothing measurable carries over from one
// tenant's runs to another's in a pooled sandbox. A run that made network
// traffic, processes and SysV objects, and left none of them behind, is
// followed by another tenant's run that sees exactly what the first run of
// a fresh sandbox sees: the network counters, the pids it gets, the ids of
// new SysV objects. Between one tenant's runs the counters tell nothing
// that tenant did not do: its next run keeps the sandbox (checked once the
// tenant changes, container.checkFor), and a run that did none of that
// leaves its sandbox to anyone.
func TestPooledSandboxCountersReset(t *testing.T) {
	e, err := New(Config{UIDBase: testUIDs(10), UIDSlots: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	look := &Spec{Args: []string{"bash", "-c", lookScript}, Tenant: "look"}
	fresh, _ := poolRun(t, e, look)
	if !strings.Contains(string(fresh.Stdout), "sysv ids") || !strings.Contains(string(fresh.Stdout), "Ip:") {
		t.Fatalf("look: %q %q", fresh.Stdout, fresh.Stderr)
	}
	t.Logf("a fresh sandbox's first run sees:\n%s", fresh.Stdout)

	// A run that leaves the namespaces as they were keeps its sandbox.
	_, c1 := poolRun(t, e, &Spec{Args: []string{"bash", "-c", "echo quiet; ls /work /tmp >/dev/null"}, Tenant: "quiet"})
	busy, c2 := poolRun(t, e, &Spec{Args: []string{"bash", "-c", busyScript}, Tenant: "busy"})
	if c1 != c2 {
		t.Error("a run that left no trace retired its sandbox")
	}
	if !strings.Contains(string(busy.Stdout), "busy done") {
		t.Fatalf("busy run: %q %q", busy.Stdout, busy.Stderr)
	}
	// The busy tenant's next run keeps it: what moved is its own doing.
	if _, c3 := poolRun(t, e, &Spec{Args: []string{"true"}, Tenant: "busy"}); c3 != c2 {
		t.Error("the tenant's own next run did not keep its sandbox")
	}
	after, c4 := poolRun(t, e, look)
	if c4 == c2 {
		t.Error("another tenant's run took the sandbox whose counters moved")
	}
	if !sameView(t, after.Stdout, fresh.Stdout) {
		t.Errorf("the run after a busy one sees what that run did; a fresh sandbox's first run sees:\n%s\nthe next run saw:\n%s", fresh.Stdout, after.Stdout)
	}
	// Each kind of trace on its own.
	for _, trace := range []string{
		sysvMakeAndRemove,
		`/usr/bin/python3 -c 'import socket; u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.sendto(b"x", ("127.0.0.1", 9))'`,
		`/usr/bin/python3 -c 'import socket; u = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); u.sendto(b"x", ("::1", 9))'`,
		"for i in $(seq 5); do /bin/true; done",
	} {
		poolRun(t, e, &Spec{Args: []string{"bash", "-c", trace}, Tenant: "busy"})
		if after, _ := poolRun(t, e, look); !sameView(t, after.Stdout, fresh.Stdout) {
			t.Errorf("after %s the next run saw:\n%s", trace, after.Stdout)
		}
	}
}

// sameView compares two outputs of lookScript. The first pid is
// runPidBase+1, or a little more when a thread PID 1's Go runtime added
// during a run holds a pid of the runs' range (a known gap, see
// runPidBase); everything else must be equal.
func sameView(t *testing.T, got, want []byte) bool {
	t.Helper()
	firstPid := func(out []byte) (int, string) {
		line, rest, _ := strings.Cut(string(out), "\n")
		n, err := strconv.Atoi(strings.TrimPrefix(line, "first pid "))
		if err != nil {
			t.Fatalf("no first pid in %q", line)
		}
		return n, rest
	}
	gotPid, gotRest := firstPid(got)
	_, wantRest := firstPid(want)
	if gotPid < runPidBase+1 || gotPid > runPidBase+4 {
		t.Errorf("first pid %d, want %d", gotPid, runPidBase+1)
	}
	return gotRest == wantRest
}

// TestCoreLimitFixed: programs run with RLIMIT_CORE 1, soft and hard, and
// cannot change it (a pipe core_pattern ignores a limit of 0 but aborts at
// exactly 1); a crash leaves no core file (this host's core_pattern names a
// file).
func TestCoreLimitFixed(t *testing.T) {
	script := `import resource, ctypes, os, signal, sys
print("core", resource.getrlimit(resource.RLIMIT_CORE))
for want in ((0, 0), (0, 1), (1, 1), (resource.RLIM_INFINITY, resource.RLIM_INFINITY)):
    try:
        resource.setrlimit(resource.RLIMIT_CORE, want); print("set", want, "ok")
    except (ValueError, OSError) as e: print("set", want, "refused")
try:
    resource.prlimit(0, resource.RLIMIT_CORE, (0, 0)); print("prlimit ok")
except (ValueError, OSError) as e: print("prlimit refused")
print("nofile", resource.getrlimit(resource.RLIMIT_NOFILE))
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64)); print("lower nofile ok")
sys.stdout.flush()
if os.fork() == 0:
    os.chdir("/work"); os.kill(os.getpid(), signal.SIGSEGV)
_, st = os.wait()
print("child signal", os.WTERMSIG(st), "core dumped", os.WCOREDUMP(st))
print("files", sorted(os.listdir("/work")), sorted(os.listdir("/tmp")))
`
	res := run(t, &Spec{Args: []string{"/usr/bin/python3", "-c", script}, Collect: Collect{All: true}})
	out := string(res.Stdout)
	for _, want := range []string{"core (1, 1)", "set (0, 0) refused", "set (0, 1) refused", "set (1, 1) refused",
		"prlimit refused", "lower nofile ok", "child signal 11 core dumped False", "files [] []"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s%s", want, out, res.Stderr)
		}
	}
	if strings.Contains(out, ") ok") {
		t.Errorf("RLIMIT_CORE changed:\n%s", out)
	}
	if len(res.Files) != 0 {
		t.Errorf("files left in /work: %v", res.Files)
	}
	res = sh(t, "ulimit -c 0 && echo LOWERED; ulimit -c unlimited && echo RAISED; ulimit -Hc", Limits{})
	if strings.Contains(string(res.Stdout), "LOWERED") || strings.Contains(string(res.Stdout), "RAISED") {
		t.Errorf("bash changed RLIMIT_CORE: %q %q", res.Stdout, res.Stderr)
	}
}

// TestCorePatternPipe needs a machine of its own (the cgroup v2 VM sets
// SANDBOX_TEST_CORE_PATTERN=1): it points kernel.core_pattern at a helper
// of its own. A crash outside the sandbox runs the helper (so the test
// can fail); no crash in a sandbox does, whatever the program tries first;
// nor does one leave a core file with a file pattern.
func TestCorePatternPipe(t *testing.T) {
	if os.Getenv("SANDBOX_TEST_CORE_PATTERN") != "1" {
		t.Skip("changes kernel.core_pattern: set SANDBOX_TEST_CORE_PATTERN=1 on a throwaway machine (the cgroup v2 VM)")
	}
	const patternFile, pipeLimitFile = "/proc/sys/kernel/core_pattern", "/proc/sys/kernel/core_pipe_limit"
	setSysctl := func(file, value string) {
		t.Helper()
		old, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(value), 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.WriteFile(file, old, 0) })
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	marks := filepath.Join(dir, "invoked")
	helper := filepath.Join(dir, "helper")
	if err := os.WriteFile(helper, []byte("#!/bin/sh\necho \"$*\" >>"+marks+"\ncat >/dev/null\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	invoked := func() string {
		b, _ := os.ReadFile(marks)
		return string(b)
	}
	// With a pipe limit the kernel waits for the helper to finish before
	// the crashed process is gone: when a run has ended, its helper (had
	// there been one) has written its mark.
	setSysctl(pipeLimitFile, "16")
	setSysctl(patternFile, "|"+helper+" %P %s %c %e")
	crashOutside := func() {
		t.Helper()
		out, err := exec.Command("sh", "-c", "ulimit -c unlimited; kill -SEGV $$").CombinedOutput()
		if err == nil {
			t.Fatalf("the crash outside did not crash: %s", out)
		}
	}
	crashOutside()
	if got := invoked(); strings.Count(got, "\n") != 1 || !strings.Contains(got, " 11 ") {
		t.Fatalf("a crash outside the sandbox did not run the helper (so this test proves nothing): %q", got)
	}
	crashes := []*Spec{
		{Args: []string{"bash", "-c", "kill -SEGV $$"}},
		{Args: []string{"bash", "-c", "ulimit -c 0; ulimit -S -c 0; ulimit -c unlimited; kill -ABRT $$"}},
		{Args: []string{"/usr/bin/python3", "-c", `import resource, os, signal
for lim in ((0, 0), (0, 1)):
    try: resource.setrlimit(resource.RLIMIT_CORE, lim)
    except Exception: pass
try: resource.prlimit(0, resource.RLIMIT_CORE, (0, 0))
except Exception: pass
os.kill(os.getpid(), signal.SIGQUIT)`}},
	}
	for _, spec := range crashes {
		res := run(t, spec)
		if res.Signal == "" && res.ExitCode < 128 {
			t.Errorf("%q did not crash: %+v", spec.Args, res)
		}
	}
	if got := invoked(); strings.Count(got, "\n") != 1 {
		t.Errorf("a crash in the sandbox ran the host's core helper: %q", got)
	}
	crashOutside() // the helper still works
	if got := invoked(); strings.Count(got, "\n") != 2 {
		t.Errorf("helper marks after the second crash outside: %q", got)
	}
	// File patterns: relative (the crash's working directory, /work) and
	// absolute (a directory the sandbox cannot see, and one it can).
	for _, pattern := range []string{"core", filepath.Join(dir, "core.%p"), "/tmp/core.%p"} {
		setSysctl(patternFile, pattern)
		res := run(t, &Spec{Args: []string{"bash", "-c", "cd /work && bash -c 'kill -SEGV $$'; ls -A /work /tmp"}, Collect: Collect{All: true}})
		if len(res.Files) != 0 || strings.Contains(string(res.Stdout), "core") {
			t.Errorf("pattern %s: a core file in the sandbox: %q %v", pattern, res.Stdout, res.Files)
		}
		if m, _ := filepath.Glob(filepath.Join(dir, "core*")); len(m) != 0 {
			t.Errorf("pattern %s: a core file on the host: %v", pattern, m)
		}
	}
}
