package live_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/live"
	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
	"github.com/sandbox-run/sandbox-run/pkg/local"
)

// sh runs script in s through bash and returns its stdout, stderr and exit
// code.
func sh(t *testing.T, s *live.Sandbox, script string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var mu sync.Mutex
	var out, errb bytes.Buffer
	exit := make(chan agent.Event, 1)
	_, err := s.Client().Start(ctx, agent.Request{Args: []string{"bash", "-c", script}}, func(ev agent.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch ev.Type {
		case agent.EvStdout:
			out.Write(ev.Data)
		case agent.EvStderr:
			errb.Write(ev.Data)
		default:
			exit <- ev
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-exit:
		mu.Lock()
		defer mu.Unlock()
		code := -2
		if ev.Exit != nil {
			code = *ev.Exit
		}
		return out.String(), errb.String(), code
	case <-ctx.Done():
		t.Fatalf("%q did not end", script)
		panic("unreachable")
	}
}

// TestLiveOnExecutor: live sandboxes as the server starts them (the
// executor's toolchains on PATH, the sandbox's limits over all its
// processes), through the Manager: languages run, a process past the
// memory limit is killed and the sandbox lives on, two sandboxes see
// nothing of each other, and killing one ends all its processes.
func TestLiveOnExecutor(t *testing.T) {
	home, _ := os.UserHomeDir()
	cache := filepath.Join(home, ".cache", "sandbox-run-test", "cache")
	os.MkdirAll(cache, 0o755)
	x, err := executor.New(executor.Config{DataDir: t.TempDir(), CacheDir: cache, Engine: live.Engine()})
	if err != nil {
		t.Fatal(err)
	}
	m := live.NewManager(local.LiveStarter(x), live.Config{DefaultMemoryBytes: 256 << 20})
	t.Cleanup(m.Close)
	ctx := context.Background()
	a, err := m.Create(ctx, "k", live.CreateOptions{Env: map[string]string{"GREETING": "hello"}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Create(ctx, "k", live.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if out, errs, code := sh(t, a, `python3 -c 'print(6*7)'; echo $GREETING $HOME; pwd`); out != "42\nhello /home/user\n/work\n" || code != 0 {
		t.Fatalf("%q %q %d", out, errs, code)
	}
	if out, _, code := sh(t, a, `node -e 'console.log(6*7)' 2>/dev/null || echo no-node`); code != 0 || (out != "42\n" && out != "no-node\n") {
		t.Fatalf("node: %q %d", out, code)
	}
	// A background process in a, a file in a: b sees neither.
	if _, _, code := sh(t, a, `echo secret > /work/a.txt; (sleep 600 &) ; true`); code != 0 {
		t.Fatal("a's setup")
	}
	if out, _, _ := sh(t, b, `ls /work; ps -e -o comm= | grep -c sleep`); strings.Contains(out, "a.txt") || !strings.HasSuffix(out, "0\n") {
		t.Fatalf("b sees a's: %q", out)
	}
	// Past the memory limit: that process is killed; the sandbox lives on.
	_, _, code := sh(t, a, `python3 -c 'b = bytearray(600 << 20); print(len(b))'`)
	if code == 0 {
		t.Fatal("600 MiB in a sandbox of 256 MiB")
	}
	if out, _, code := sh(t, a, `cat /work/a.txt`); out != "secret\n" || code != 0 {
		t.Fatalf("after the memory hog: %q %d", out, code)
	}
	if err := m.Kill("k", a.ID); err != nil {
		t.Fatal(err)
	}
	if out, _, _ := sh(t, b, `echo alive`); out != "alive\n" {
		t.Fatalf("b after a was killed: %q", out)
	}
}

// BenchmarkCreateAndRun is what issue 32 measures: a live sandbox created
// and its first command (`true`) run, against a one-shot run of `bash -c
// true` on the same executor, interleaved (docs/BENCHMARKS.md):
//
//	go test -run '^$' -bench CreateAndRun -benchtime 50x ./pkg/live
func BenchmarkCreateAndRun(b *testing.B) {
	home, _ := os.UserHomeDir()
	cache := filepath.Join(home, ".cache", "sandbox-run-test", "cache")
	x, err := executor.New(executor.Config{DataDir: b.TempDir(), CacheDir: cache, Engine: live.Engine()})
	if err != nil {
		b.Fatal(err)
	}
	cfg := live.Config{MaxPerOwner: 1000, MaxTotal: 1000}
	if os.Getenv("LIVE_BENCH_PIPES") == "" {
		cfg.StateDir, cfg.Prewarm = b.TempDir(), 2 // the server's way: sandboxes that outlive it, kept ready
	}
	m := live.NewManager(local.LiveStarter(x), cfg)
	defer m.Close()
	ctx := context.Background()
	var liveT, oneT []time.Duration
	for b.Loop() {
		t0 := time.Now()
		s, err := m.Create(ctx, "k", live.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		exit := make(chan struct{})
		if _, err := s.Client().Start(ctx, agent.Request{Args: []string{"true"}}, func(ev agent.Event) {
			if ev.Type == agent.EvExit || ev.Type == agent.EvError {
				close(exit)
			}
		}); err != nil {
			b.Fatal(err)
		}
		<-exit
		liveT = append(liveT, time.Since(t0))
		if err := m.Kill("k", s.ID); err != nil {
			b.Fatal(err)
		}
		t0 = time.Now()
		res, err := x.Execute(ctx, &executor.Request{Language: "bash", Code: []byte("true")})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("%+v %v", res, err)
		}
		oneT = append(oneT, time.Since(t0))
	}
	p50 := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	l, o := p50(liveT), p50(oneT)
	b.ReportMetric(float64(l.Microseconds())/1000, "ms-p50-create+run")
	b.ReportMetric(float64(o.Microseconds())/1000, "ms-p50-one-shot")
	b.ReportMetric(float64(l)/float64(o), "x-one-shot")
}

// BenchmarkIdleMemory is what an idle live sandbox costs the host: N
// sandboxes (LIVE_IDLE_N, default 50) created the server's way and left
// idle, the host's available memory before and after (per sandbox), their
// own cgroups' memory (agent, PID 1, files), and the CPU they use idle
// (none: nothing polls). docs/BENCHMARKS.md records a run of 1,000:
//
//	LIVE_IDLE_N=1000 go test -run '^$' -bench IdleMemory -benchtime 1x ./pkg/live
func BenchmarkIdleMemory(b *testing.B) {
	n := 50
	if v, err := strconv.Atoi(os.Getenv("LIVE_IDLE_N")); err == nil && v > 0 {
		n = v
	}
	home, _ := os.UserHomeDir()
	cache := filepath.Join(home, ".cache", "sandbox-run-test", "cache")
	e, err := live.BigEngine(n + 8)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	x, err := executor.New(executor.Config{DataDir: b.TempDir(), CacheDir: cache, Engine: e})
	if err != nil {
		b.Fatal(err)
	}
	m := live.NewManager(local.LiveStarter(x), live.Config{MaxPerOwner: n, MaxTotal: n, StateDir: b.TempDir()})
	defer m.Close()
	available := func() int64 {
		data, _ := os.ReadFile("/proc/meminfo")
		for _, line := range strings.Split(string(data), "\n") {
			if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				return kb << 10
			}
		}
		return 0
	}
	for b.Loop() {
		before := available()
		var boxes []*live.Sandbox
		t0 := time.Now()
		for range n {
			s, err := m.Create(context.Background(), "k", live.CreateOptions{Timeout: time.Hour})
			if err != nil {
				b.Fatalf("sandbox %d: %v", len(boxes)+1, err)
			}
			boxes = append(boxes, s)
		}
		created := time.Since(t0)
		time.Sleep(2 * time.Second) // settle: the agents' start-up garbage collected
		after := available()
		var cg, cpu0, cpu1 int64
		for _, s := range boxes {
			st, err := s.Stats()
			if err != nil {
				b.Fatal(err)
			}
			cg += st.Memory
			cpu0 += int64(st.CPU)
		}
		time.Sleep(5 * time.Second)
		for _, s := range boxes {
			st, _ := s.Stats()
			cpu1 += int64(st.CPU)
		}
		b.ReportMetric(float64(before-after)/float64(n)/(1<<20), "MiB-host/sandbox")
		b.ReportMetric(float64(cg)/float64(n)/(1<<20), "MiB-cgroup/sandbox")
		b.ReportMetric(float64(cpu1-cpu0)/float64(n)/5/float64(time.Millisecond), "ms-cpu/s/sandbox-idle")
		b.ReportMetric(float64(created.Milliseconds())/float64(n), "ms-create-each")
		for _, s := range boxes {
			m.Kill("k", s.ID)
		}
	}
}

// TestLiveOutlivesManager: live sandboxes as the server keeps them (a
// state dir: the agent on a socket, the sandbox detached from this
// process, a record of it, warm sandboxes): files of any size in chunks,
// processes with their subscribers, metrics; then the Manager detaches and
// a new one on the same directory takes the sandbox over, with its running
// process, its metadata and its timeout; a kill forgets it.
func TestLiveOutlivesManager(t *testing.T) {
	x, cfg := keptExecutor(t)
	m := live.NewManager(local.LiveStarter(x), cfg)
	ctx := context.Background()
	s, err := m.Create(ctx, "k", live.CreateOptions{Metadata: map[string]string{"role": "kept"}, Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cfg.StateDir, s.ID+".json")); err != nil {
		t.Fatalf("no record: %v", err)
	}
	// A file larger than one chunk, both ways.
	blob := bytes.Repeat([]byte("0123456789abcdef"), (agent.MaxChunk+4096)/16)
	if e, err := s.WriteFile(ctx, "/home/user/blob", bytes.NewReader(blob), 0o600); err != nil || e.Size != int64(len(blob)) {
		t.Fatalf("write: %+v %v", e, err)
	}
	f, err := s.Open(ctx, "/home/user/blob")
	if err != nil {
		t.Fatal(err)
	}
	back, err := io.ReadAll(f)
	if err != nil || !bytes.Equal(back, blob) {
		t.Fatalf("read back %d bytes, %v", len(back), err)
	}
	if _, err := s.Open(ctx, "/home/user/none"); err == nil {
		t.Fatal("opened a file that does not exist")
	}
	if st, err := s.Stats(); err != nil || st.Memory <= 0 || st.Disk < int64(len(blob)) {
		t.Fatalf("stats: %+v %v", st, err)
	}
	// A process that waits for its input, with a second subscriber.
	p, sub, err := s.Start(ctx, agent.Request{Args: []string{"bash", "-c", "read l; echo got $l"}, Stdin: true})
	if err != nil {
		t.Fatal(err)
	}
	sub.Close()
	if q, ok := s.Proc(p.PID); !ok || q != p {
		t.Fatal("the process is not listed")
	}
	if err := m.SetTimeout("k", s.ID, 30*time.Minute); err != nil {
		t.Fatal(err)
	}
	end := s.End()

	m.Detach() // the server stops: the sandbox runs on
	if _, err := m.Create(ctx, "k", live.CreateOptions{}); !errors.Is(err, live.ErrClosed) {
		t.Fatalf("a create after the detach: %v", err)
	}
	m2 := live.NewManager(local.LiveStarter(x), cfg)
	defer m2.Close()
	if n := m2.Reattached(); n != 1 {
		t.Fatalf("taken over: %d", n)
	}
	s2, err := m2.Get("k", s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if s2.Metadata["role"] != "kept" || !s2.End().Equal(end) || s2.Token != s.Token {
		t.Fatalf("taken over as %+v (end %v, was %v)", s2, s2.End(), end)
	}
	p2, ok := s2.Proc(p.PID)
	if !ok {
		t.Fatalf("process %d is not known after the take-over", p.PID)
	}
	sub2 := p2.Subscribe()
	defer sub2.Close()
	if _, err := s2.Client().Call(ctx, agent.Request{Op: agent.OpInput, PID: p.PID, Data: []byte("after\n")}); err != nil {
		t.Fatal(err)
	}
	var out []byte
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		ev, err := sub2.Next(wait)
		if err != nil {
			t.Fatalf("the process's events after the take-over: %v (so far %q)", err, out)
		}
		out = append(out, ev.Data...)
		if ev.Type == agent.EvExit {
			break
		}
	}
	if string(out) != "got after\n" {
		t.Fatalf("the process after the take-over printed %q", out)
	}
	if err := m2.Kill("k", s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cfg.StateDir, s.ID+".json")); !os.IsNotExist(err) {
		t.Fatalf("the record outlived the sandbox: %v", err)
	}
}

// TestReadySandboxes: a persistent Manager with Prewarm keeps sandboxes
// started; a create of the default kind takes one and makes it its
// caller's (owner, environment under each process's own, a record that a
// new Manager takes over with it); a create of another kind starts its
// own; ready sandboxes end with the Manager, nobody's to hand on.
func TestReadySandboxes(t *testing.T) {
	x, cfg := keptExecutor(t)
	m := live.NewManager(local.LiveStarter(x), cfg)
	ctx := context.Background()
	first, err := m.Create(ctx, "k", live.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, taken := m.Ready(); taken != 0 {
		t.Fatalf("the first create took a ready sandbox: none was started before it")
	}
	waitReady := func(m *live.Manager) {
		t.Helper()
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(10 * time.Millisecond) {
			if n, _ := m.Ready(); n == 1 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("no sandbox got ready within 2 minutes")
			}
		}
	}
	waitReady(m)
	s, err := m.Create(ctx, "k", live.CreateOptions{Env: map[string]string{"GREETING": "hello", "OTHER": "x"},
		Metadata: map[string]string{"role": "ready"}, Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, taken := m.Ready(); taken != 1 {
		t.Fatalf("a create of the default kind with one ready took %d", taken)
	}
	if s.ID == first.ID || s.Owner != "k" || s.Metadata["role"] != "ready" || s.Token == "" || s.Token == first.Token {
		t.Fatalf("the sandbox taken: %+v", s)
	}
	if _, err := m.Get("other", s.ID); !errors.Is(err, live.ErrNotFound) {
		t.Fatalf("another owner got it: %v", err)
	}
	env := func(s *live.Sandbox, own ...string) string {
		t.Helper()
		r, err := s.Run(ctx, agent.Request{Args: []string{"bash", "-c", "echo $GREETING/$OTHER"}, Env: own}, live.RunOptions{Timeout: time.Minute})
		if err != nil || r.ExitCode != 0 {
			t.Fatalf("run: %+v %v", r, err)
		}
		return string(r.Stdout)
	}
	if got := env(s); got != "hello/x\n" {
		t.Fatalf("the creator's environment in a ready sandbox: %q", got)
	}
	if got := env(s, "OTHER=mine"); got != "hello/mine\n" {
		t.Fatalf("a process's own environment over the creator's: %q", got)
	}
	// Another kind (its own languages) starts its own.
	waitReady(m)
	own, err := m.Create(ctx, "k", live.CreateOptions{Languages: []string{"bash"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, taken := m.Ready(); taken != 1 {
		t.Fatalf("a create with its own languages took a ready sandbox (%d taken)", taken)
	}
	for _, b := range []*live.Sandbox{first, own} {
		if err := m.Kill("k", b.ID); err != nil {
			t.Fatal(err)
		}
	}

	// The server stops: the given sandbox runs on, the ready one ends.
	m.Detach()
	socks, _ := os.ReadDir(filepath.Join(cfg.StateDir, "sock"))
	if len(socks) != 1 || socks[0].Name() != s.ID {
		t.Fatalf("sockets after the detach: %v (want only %s's)", socks, s.ID)
	}
	m2 := live.NewManager(local.LiveStarter(x), live.Config{StateDir: cfg.StateDir, DefaultMemoryBytes: 256 << 20})
	defer m2.Close()
	s2, err := m2.Get("k", s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := env(s2); got != "hello/x\n" {
		t.Fatalf("the creator's environment after a take-over: %q", got)
	}
}

// keptExecutor is an executor on the test engine and the configuration
// of live sandboxes kept as the server keeps them (a state dir, one ready).
func keptExecutor(t testing.TB) (*executor.Executor, live.Config) {
	t.Helper()
	home, _ := os.UserHomeDir()
	cache := filepath.Join(home, ".cache", "sandbox-run-test", "cache")
	x, err := executor.New(executor.Config{DataDir: t.TempDir(), CacheDir: cache, Engine: live.Engine(), Intercept: local.Intercept})
	if err != nil {
		t.Fatal(err)
	}
	return x, live.Config{StateDir: t.TempDir(), Prewarm: 1, DefaultMemoryBytes: 256 << 20}
}

// TestPause: a paused sandbox's processes are frozen (no CPU however long,
// its timeout stopped), Resume lets them go on where they were, any call
// to its agent resumes it, a paused sandbox is taken over paused by the
// next Manager, its timeout pauses a sandbox made to auto-pause, and a
// paused sandbox is killed as any other.
func TestPause(t *testing.T) {
	x, cfg := keptExecutor(t)
	cfg.Prewarm = 0
	m := live.NewManager(local.LiveStarter(x), cfg)
	ctx := context.Background()
	s, err := m.Create(ctx, "k", live.CreateOptions{Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Start(ctx, agent.Request{Args: []string{"bash", "-c", "i=0; while :; do i=$((i+1)); echo $i > /tmp/count; done"}}); err != nil {
		t.Fatal(err)
	}
	cpu := func(s *live.Sandbox) time.Duration {
		t.Helper()
		st, err := s.Stats()
		if err != nil {
			t.Fatal(err)
		}
		return st.CPU
	}
	// frozen checks that s used no CPU over 300 ms.
	frozen := func(s *live.Sandbox, what string) {
		t.Helper()
		from := cpu(s)
		time.Sleep(300 * time.Millisecond)
		if used := cpu(s) - from; used > 5*time.Millisecond {
			t.Errorf("%s: a paused sandbox used %v of CPU in 300 ms", what, used)
		}
	}
	count := func(s *live.Sandbox) int {
		t.Helper()
		out, _, _ := sh(t, s, "cat /tmp/count")
		n, _ := strconv.Atoi(strings.TrimSpace(out))
		return n
	}
	// counts waits until the counter has gone past n.
	counts := func(s *live.Sandbox, n int, what string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for count(s) <= n {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the counter stays at %d", what, n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	counts(s, 0, "started")
	if err := m.Pause(ctx, "k", s.ID); err != nil {
		t.Fatal(err)
	}
	if err := m.Pause(ctx, "k", s.ID); !errors.Is(err, live.ErrPaused) {
		t.Errorf("a second pause: %v", err)
	}
	if !s.Paused() {
		t.Fatal("not paused")
	}
	frozen(s, "paused")
	if resumed, err := m.Resume("k", s.ID, 0); err != nil || !resumed {
		t.Fatalf("resume: %v %v", resumed, err)
	}
	if left := time.Until(s.End()); left < 50*time.Minute || left > time.Hour {
		t.Errorf("after the resume its timeout ends in %v", left)
	}
	if resumed, err := m.Resume("k", s.ID, 0); err != nil || resumed {
		t.Errorf("a resume of a running sandbox: %v %v", resumed, err)
	}
	n := count(s)
	counts(s, n, "resumed")

	// A call to its agent resumes it.
	if err := m.Pause(ctx, "k", s.ID); err != nil {
		t.Fatal(err)
	}
	if out, _, code := sh(t, s, "echo awake"); out != "awake\n" || code != 0 || s.Paused() {
		t.Errorf("a call to a paused sandbox: %q %d, paused %v", out, code, s.Paused())
	}

	// Taken over paused, its timeout still stopped.
	if err := m.Pause(ctx, "k", s.ID); err != nil {
		t.Fatal(err)
	}
	m.Detach()
	m2 := live.NewManager(local.LiveStarter(x), cfg)
	defer m2.Close()
	s2, err := m2.Get("k", s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !s2.Paused() {
		t.Fatal("taken over running: it was paused")
	}
	frozen(s2, "taken over paused")
	if resumed, err := m2.Resume("k", s.ID, 10*time.Minute); err != nil || !resumed {
		t.Fatalf("resume after the take-over: %v %v", resumed, err)
	}
	if left := time.Until(s2.End()); left < 9*time.Minute || left > 10*time.Minute {
		t.Errorf("resumed for 10 min, it ends in %v", left)
	}
	n = count(s2)
	counts(s2, n, "resumed after the take-over")

	// A paused sandbox is killed as any other.
	if err := m2.Pause(ctx, "k", s.ID); err != nil {
		t.Fatal(err)
	}
	killed := make(chan error, 1)
	go func() { killed <- m2.Kill("k", s.ID) }()
	select {
	case err := <-killed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("a paused sandbox was not killed")
	}

	// Its timeout pauses one made to auto-pause.
	a, err := m2.Create(ctx, "k", live.CreateOptions{Timeout: time.Second, AutoPause: true})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for !a.Paused() {
		if time.Now().After(deadline) {
			t.Fatal("its timeout did not pause it")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := m2.Get("k", a.ID); err != nil {
		t.Errorf("auto-paused, it is gone: %v", err)
	}
	if out, _, _ := sh(t, a, "echo back"); out != "back\n" {
		t.Errorf("an auto-paused sandbox called: %q", out)
	}
}

// TestSnapshotAndFork: a snapshot keeps a sandbox's files at one moment
// (its home and /tmp), under its owner's name only, within the owner's
// quota; a sandbox made from it has them and its environment; a fork
// makes sandboxes with the files, each its own from then on.
func TestSnapshotAndFork(t *testing.T) {
	x, cfg := keptExecutor(t)
	cfg.Prewarm, cfg.MaxSnapshotBytes = 0, 1<<20
	m := live.NewManager(local.LiveStarter(x), cfg)
	defer m.Close()
	ctx := context.Background()
	s, err := m.Create(ctx, "k", live.CreateOptions{Env: map[string]string{"K": "v"}, Timeout: time.Hour, Languages: []string{"python"}})
	if err != nil {
		t.Fatal(err)
	}
	sh(t, s, "echo one > /home/user/f; mkdir -p d; echo deep > d/g; echo tmp > /tmp/t")
	snap, err := m.SnapshotSandbox(ctx, "k", s.ID, "first")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(snap.Names, "first") || snap.Size == 0 || snap.SandboxID != s.ID {
		t.Errorf("snapshot %+v", snap)
	}
	if got := m.Snapshots("k", s.ID); len(got) != 1 || got[0].ID != snap.ID {
		t.Errorf("snapshots of the sandbox: %+v", got)
	}
	if got := m.Snapshots("other", ""); len(got) != 0 {
		t.Errorf("another owner's snapshots: %+v", got)
	}
	if _, err := m.Create(ctx, "other", live.CreateOptions{Snapshot: snap.ID}); !errors.Is(err, live.ErrNoSuchSnapshot) {
		t.Errorf("another owner's create from the snapshot: %v", err)
	}
	sh(t, s, "echo two > /home/user/f")
	from, err := m.Create(ctx, "k", live.CreateOptions{Snapshot: snap.ID})
	if err != nil {
		t.Fatal(err)
	}
	if out, _, _ := sh(t, from, "cat f d/g /tmp/t; echo $K; stat -c %U f"); out != "one\ndeep\ntmp\nv\nsandbox\n" && !strings.HasPrefix(out, "one\ndeep\ntmp\nv\n") {
		t.Errorf("a sandbox from the snapshot: %q", out)
	}
	if !slices.Equal(from.Languages, []string{"python"}) {
		t.Errorf("made from the snapshot with languages %v", from.Languages)
	}
	// Copy-on-write: its home and /tmp are overlays over the snapshot's
	// files, linked (not copied) into a directory of its own.
	if out, _, _ := sh(t, from, "awk '$2 == \"/work\" || $2 == \"/tmp\" {print $2, $3}' /proc/mounts"); out != "/work overlay\n/tmp overlay\n" {
		t.Errorf("a sandbox from the snapshot's mounts: %q", out)
	}
	snapFile, _ := filepath.Glob(filepath.Join(cfg.StateDir, "snapshots", snap.ID, "*", "work", "f"))
	if len(snapFile) != 1 {
		snapFile, _ = filepath.Glob(filepath.Join(cfg.StateDir, "snapshots", snap.ID, "work", "f"))
	}
	a, _ := os.Stat(filepath.Join(cfg.StateDir, "files", from.ID, "work", "f"))
	if len(snapFile) != 1 || a == nil {
		t.Errorf("the snapshot's file %v, the sandbox's lower layer's %v", snapFile, a)
	} else if b, _ := os.Stat(snapFile[0]); !os.SameFile(a, b) {
		t.Error("the sandbox's file is not the snapshot's, linked")
	}
	sh(t, from, "echo changed > f")
	if b, _ := os.ReadFile(snapFile[0]); string(b) != "one\n" {
		t.Errorf("a write in the sandbox reached the snapshot: %q", b)
	}

	kids, errs, err := m.Fork(ctx, "k", s.ID, 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range kids {
		if errs[i] != nil {
			t.Fatalf("child %d: %v", i, errs[i])
		}
		if out, _, _ := sh(t, k, "cat f; echo $K"); out != "two\nv\n" {
			t.Errorf("child %d: %q", i, out)
		}
	}
	sh(t, kids[0], "echo mine > f")
	for _, sb := range []*live.Sandbox{s, kids[1]} {
		if out, _, _ := sh(t, sb, "cat f"); out != "two\n" {
			t.Errorf("a child's write reached %s: %q", sb.ID, out)
		}
	}
	// The children's files are one copy, linked into each.
	a0, _ := os.Stat(filepath.Join(cfg.StateDir, "files", kids[0].ID, "work", "d", "g"))
	a1, _ := os.Stat(filepath.Join(cfg.StateDir, "files", kids[1].ID, "work", "d", "g"))
	if a0 == nil || a1 == nil || !os.SameFile(a0, a1) {
		t.Error("the children's files are not one copy, linked")
	}
	m.Kill("k", kids[1].ID)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(cfg.StateDir, "files", kids[1].ID)); errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a killed child's files are left")
		}
	}
	if _, _, err := m.Fork(ctx, "k", s.ID, 0, 0); !errors.Is(err, live.ErrInvalid) {
		t.Errorf("a fork of none: %v", err)
	}

	// The quota: 1 MiB of snapshots.
	sh(t, s, "head -c 2000000 /dev/zero > big")
	var lim *live.LimitError
	if _, err := m.SnapshotSandbox(ctx, "k", s.ID, ""); !errors.As(err, &lim) || !lim.Full {
		t.Errorf("a snapshot past the quota: %v", err)
	}
	if err := m.DeleteSnapshot("other", snap.ID); !errors.Is(err, live.ErrNoSuchSnapshot) {
		t.Errorf("another owner's delete: %v", err)
	}
	if err := m.DeleteSnapshot("k", snap.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, "k", live.CreateOptions{Snapshot: snap.ID}); !errors.Is(err, live.ErrNoSuchSnapshot) {
		t.Errorf("a create from a deleted snapshot: %v", err)
	}
}

// BenchmarkPauseResume: pausing a sandbox whose process burns CPU and
// resuming it, each timed (ms/pause, ms/resume).
func BenchmarkPauseResume(b *testing.B) {
	x, cfg := keptExecutor(b)
	cfg.Prewarm = 0
	m := live.NewManager(local.LiveStarter(x), cfg)
	defer m.Close()
	ctx := context.Background()
	s, err := m.Create(ctx, "k", live.CreateOptions{Timeout: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	if _, _, err := s.Start(ctx, agent.Request{Args: []string{"bash", "-c", "while :; do :; done"}}); err != nil {
		b.Fatal(err)
	}
	var paused, resumed time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := m.Pause(ctx, "k", s.ID); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := m.Resume("k", s.ID, 0); err != nil {
			b.Fatal(err)
		}
		paused, resumed = paused+t1.Sub(t0), resumed+time.Since(t1)
	}
	b.ReportMetric(float64(paused.Microseconds())/1000/float64(b.N), "ms/pause")
	b.ReportMetric(float64(resumed.Microseconds())/1000/float64(b.N), "ms/resume")
}

// BenchmarkForkStall: a fork of a sandbox with 100 MB of files in its
// home: the parent's stall (its files copied while it is frozen) and the
// fork of 10 children end to end; the children's files copy-on-write
// (cow), and copied into each, as a starter that cannot start from files
// does (copied: the baseline, in the same run).
func BenchmarkForkStall(b *testing.B) {
	x, cfg := keptExecutor(b)
	cfg.Prewarm, cfg.DiskBytes = 0, 256<<20
	start := local.LiveStarter(x)
	b.Run("cow", func(b *testing.B) { forkStall(b, start, cfg) })
	b.Run("copied", func(b *testing.B) {
		cfg.StateDir = b.TempDir()
		forkStall(b, copyingStarter{start, start.(live.Adopter)}, cfg)
	})
}

// copyingStarter is a starter whose sandboxes cannot start from files (not
// a live.FilesStarter): their files are copied in.
type copyingStarter struct {
	live.Starter
	live.Adopter
}

func forkStall(b *testing.B, start live.Starter, cfg live.Config) {
	m := live.NewManager(start, cfg)
	defer m.Close()
	ctx := context.Background()
	s, err := m.Create(ctx, "k", live.CreateOptions{Timeout: time.Hour, MemoryBytes: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	_, sub, err := s.Start(ctx, agent.Request{Args: []string{"bash", "-c", "head -c 100000000 /dev/urandom > /home/user/big; sync"}})
	if err != nil {
		b.Fatal(err)
	}
	for {
		e, err := sub.Next(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if e.Type == agent.EvExit {
			break
		}
	}
	sub.Close()
	var stall, fork time.Duration
	for b.Loop() {
		t0 := time.Now()
		kids, errs, err := m.Fork(ctx, "k", s.ID, 10, time.Minute)
		fork += time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		for i, k := range kids {
			if errs[i] != nil {
				b.Fatal(errs[i])
			}
			m.Kill("k", k.ID)
		}
		t0 = time.Now()
		snap, err := m.SnapshotSandbox(ctx, "k", s.ID, "")
		stall += time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		m.DeleteSnapshot("k", snap.ID)
	}
	b.ReportMetric(float64(stall.Milliseconds())/float64(b.N), "ms/snapshot-100MB")
	b.ReportMetric(float64(fork.Milliseconds())/float64(b.N), "ms/fork-10")
}

// TestIdlePause: a sandbox made with an idle pause is paused once nobody
// uses it for that long, though its processes run; a subscriber waiting for
// a process's output keeps it awake, as an open connection to its port
// would; a call resumes it and its idle clock starts again.
func TestIdlePause(t *testing.T) {
	x, cfg := keptExecutor(t)
	cfg.Prewarm = 0
	m := live.NewManager(local.LiveStarter(x), cfg)
	defer m.Close()
	ctx := context.Background()
	const idle = 2 * time.Second
	s, err := m.Create(ctx, "k", live.CreateOptions{Timeout: time.Hour, IdlePause: idle})
	if err != nil {
		t.Fatal(err)
	}
	waitPaused := func(what string) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); !s.Paused(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not paused after a minute idle", what)
			}
		}
	}
	// A process that runs by itself does not keep it awake.
	if _, _, err := s.Start(ctx, agent.Request{Args: []string{"bash", "-c", "while :; do sleep 0.1; done"}}); err != nil {
		t.Fatal(err)
	}
	waitPaused("running by itself")
	// A call resumes it; its idle clock starts again.
	if out, _, _ := sh(t, s, "echo awake"); out != "awake\n" || s.Paused() {
		t.Fatalf("a call to the paused sandbox: %q, paused %v", out, s.Paused())
	}
	// A subscriber that waits for a process's output keeps it awake for
	// three idle times.
	_, sub, err := s.Start(ctx, agent.Request{Args: []string{"bash", "-c", "sleep 6; echo done"}})
	if err != nil {
		t.Fatal(err)
	}
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		ev, err := sub.Next(wait)
		if err != nil {
			t.Fatal(err)
		}
		if s.Paused() {
			t.Fatal("paused while a subscriber waited for its output")
		}
		if ev.Type == agent.EvExit {
			break
		}
	}
	sub.Close()
	waitPaused("after the subscriber")
	// Taken over by the next Manager, it keeps its idle pause.
	m.Detach()
	m2 := live.NewManager(local.LiveStarter(x), cfg)
	defer m2.Close()
	s2, err := m2.Get("k", s.ID)
	if err != nil || s2.IdlePause != idle {
		t.Fatalf("taken over: %v, idle pause %v", err, s2.IdlePause)
	}
}

// noCowStarter is a FilesStarter on a host that cannot start from files
// copy-on-write (live.ErrNoCopyOnWrite, as a kernel before 6.15 gives).
type noCowStarter struct {
	live.Starter
	live.Adopter
	tried *atomic.Int32
}

func (noCowStarter) StartsFromFiles() {}

func (s noCowStarter) StartLive(ctx context.Context, o live.StartOptions, req io.Reader, events io.Writer) (live.Running, error) {
	if o.Files != "" {
		s.tried.Add(1)
		return nil, fmt.Errorf("%w: no overlays here", live.ErrNoCopyOnWrite)
	}
	return s.Starter.StartLive(ctx, o, req, events)
}

// TestFilesCopiedWithoutCopyOnWrite: where sandboxes cannot start from
// files copy-on-write, a sandbox from a snapshot and a fork's children get
// the files copied in; the Manager tries once, then copies.
func TestFilesCopiedWithoutCopyOnWrite(t *testing.T) {
	x, cfg := keptExecutor(t)
	cfg.Prewarm = 0
	start := local.LiveStarter(x)
	tried := &atomic.Int32{}
	m := live.NewManager(noCowStarter{start, start.(live.Adopter), tried}, cfg)
	defer m.Close()
	ctx := context.Background()
	s, err := m.Create(ctx, "k", live.CreateOptions{Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	sh(t, s, "echo one > f")
	snap, err := m.SnapshotSandbox(ctx, "k", s.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	from, err := m.Create(ctx, "k", live.CreateOptions{Snapshot: snap.ID})
	if err != nil {
		t.Fatal(err)
	}
	kids, errs, err := m.Fork(ctx, "k", s.ID, 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for i, sb := range append([]*live.Sandbox{from}, kids...) {
		if i > 0 && errs[i-1] != nil {
			t.Fatal(errs[i-1])
		}
		if out, _, _ := sh(t, sb, "cat f; awk '$2 == \"/work\" {print $3}' /proc/mounts"); out != "one\ntmpfs\n" {
			t.Errorf("sandbox %d: %q", i, out)
		}
		if _, err := os.Stat(filepath.Join(cfg.StateDir, "files", sb.ID)); err == nil {
			t.Errorf("sandbox %d has a directory of files it did not start from", i)
		}
	}
	if n := tried.Load(); n != 1 {
		t.Errorf("copy-on-write tried %d times, want once", n)
	}
}
