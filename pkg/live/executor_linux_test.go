package live_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
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
	home, _ := os.UserHomeDir()
	cache := filepath.Join(home, ".cache", "sandbox-run-test", "cache")
	x, err := executor.New(executor.Config{DataDir: t.TempDir(), CacheDir: cache, Engine: live.Engine()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := live.Config{StateDir: t.TempDir(), Prewarm: 1, DefaultMemoryBytes: 256 << 20}
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
