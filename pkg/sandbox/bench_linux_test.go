package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Benchmarks of what a sandbox costs over plain fork/exec of the same
// program, all through the public API:
//
//	go test -run '^$' -bench . -benchtime 200x ./pkg/sandbox/
//
// Besides ns/op (the mean), each benchmark reports the p50, p95 and p99 of
// its per-run latencies in ms. Every run's result is checked (exit code,
// stdout); no absolute time is ever asserted, because these machines are
// noisy: compare the figures of one run with each other, never with another
// day's. BenchmarkInterleaved takes the ratios the targets in ANCHORS.md are
// about with the variants interleaved, so noise hits them alike.

const benchPython = "/usr/bin/python3"

var (
	benchEnv       = []string{"PATH=/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8"}
	benchTrueArgv  = []string{"/bin/true"}
	benchPythonArg = []string{benchPython, "-c", `print("hello")`}
)

// benchIdleGap is long enough for the cgroup v1 fast path to lapse: the
// first migration into a cgroup after it waits for an RCU grace period.
const benchIdleGap = 50 * time.Millisecond

func benchEngine(b *testing.B) *Engine {
	b.Helper()
	e, err := Default()
	if err != nil {
		b.Skipf("no sandbox on this host: %v", err)
	}
	return e
}

func benchNeedPython(b *testing.B) {
	b.Helper()
	if _, err := os.Stat(benchPython); err != nil {
		b.Skipf("%s not found: %v", benchPython, err)
	}
}

// benchLatencies records the latency of each run of a benchmark.
type benchLatencies []time.Duration

func (l *benchLatencies) add(d time.Duration) { *l = append(*l, d) }

// pct returns the nearest-rank percentile p (0-100).
func (l benchLatencies) pct(p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(l))
	i := int(float64(len(s))*p/100+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func (l benchLatencies) mean() time.Duration {
	if len(l) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range l {
		sum += d
	}
	return sum / time.Duration(len(l))
}

// report adds p50, p95 and p99 in ms, with an optional name prefix.
func (l benchLatencies) report(b *testing.B, prefix string) {
	if len(l) == 0 {
		return
	}
	b.ReportMetric(benchMS(l.pct(50)), prefix+"p50-ms")
	b.ReportMetric(benchMS(l.pct(95)), prefix+"p95-ms")
	b.ReportMetric(benchMS(l.pct(99)), prefix+"p99-ms")
}

func benchMS(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// benchCPU samples CPU time spent: busy is the whole machine's (from
// /proc/stat, so kernel workers such as network namespace clean-up count),
// proc is this process's and its reaped children's (sandbox inits and what
// they reaped).
type benchCPU struct{ busy, proc time.Duration }

func benchCPUNow() benchCPU {
	var c benchCPU
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := bytes.Cut(b, []byte("\n"))
		for i, f := range bytes.Fields(line)[1:] {
			if i == 3 || i == 4 { // idle, iowait
				continue
			}
			v, _ := strconv.ParseInt(string(f), 10, 64)
			c.busy += time.Duration(v) * 10 * time.Millisecond // USER_HZ is 100
		}
	}
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if syscall.Getrusage(who, &ru) == nil {
			c.proc += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	return c
}

// report adds cpu-ms/op (whole machine) and proc-cpu-ms/op (this process
// tree) for the n runs since c was taken.
func (c benchCPU) report(b *testing.B, n int) {
	now := benchCPUNow()
	if n > 0 {
		b.ReportMetric(benchMS(now.busy-c.busy)/float64(n), "cpu-ms/op")
		b.ReportMetric(benchMS(now.proc-c.proc)/float64(n), "proc-cpu-ms/op")
	}
}

// benchPlain runs argv with os/exec, no isolation, and checks it exits 0
// and, when want is set, prints exactly want.
func benchPlain(want string, argv []string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = benchEnv
	var stdout, stderr bytes.Buffer
	if want != "" {
		cmd.Stdout = &stdout
	}
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%q: %v: %.200s", argv, err, stderr.Bytes())
	}
	if want != "" && stdout.String() != want {
		return fmt.Errorf("%q: stdout %.100q, want %q", argv, stdout.Bytes(), want)
	}
	return nil
}

// benchSandboxed runs argv through e with the system mounts and default
// limits, and checks it as benchPlain does.
func benchSandboxed(e *Engine, want string, argv []string) (*Result, error) {
	res, err := e.Run(context.Background(), &Spec{Args: argv, Env: benchEnv, Mounts: SystemMounts})
	switch {
	case err != nil:
		return nil, fmt.Errorf("%q: %w", argv, err)
	case res.Limit != LimitNone || res.ExitCode != 0:
		return nil, fmt.Errorf("%q: exit %d, signal %q, limit %q: %.200s", argv, res.ExitCode, res.Signal, res.Limit, res.Stderr)
	case want != "" && string(res.Stdout) != want:
		return nil, fmt.Errorf("%q: stdout %.100q, want %q", argv, res.Stdout, want)
	}
	return res, nil
}

func benchPlainLoop(b *testing.B, want string, argv []string) {
	var lat benchLatencies
	cpu := benchCPUNow()
	for b.Loop() {
		start := time.Now()
		if err := benchPlain(want, argv); err != nil {
			b.Fatal(err)
		}
		lat.add(time.Since(start))
	}
	cpu.report(b, len(lat))
	lat.report(b, "")
}

// benchSandboxLoop also reports prog-ms, the mean of the program's own wall
// time as the sandbox measured it, and outside-ms, the mean of the rest of
// each run: building and removing the sandbox.
func benchSandboxLoop(b *testing.B, want string, argv []string, gap time.Duration) {
	e := benchEngine(b)
	if _, err := benchSandboxed(e, want, argv); err != nil { // warm the engine
		b.Fatal(err)
	}
	var lat, prog benchLatencies
	cpu := benchCPUNow()
	for b.Loop() {
		if gap > 0 {
			b.StopTimer()
			time.Sleep(gap)
			b.StartTimer()
		}
		start := time.Now()
		res, err := benchSandboxed(e, want, argv)
		if err != nil {
			b.Fatal(err)
		}
		lat.add(time.Since(start))
		prog.add(res.WallTime)
	}
	if gap == 0 { // over the pauses, the machine figure would gather other processes' CPU
		cpu.report(b, len(lat))
	}
	lat.report(b, "")
	b.ReportMetric(benchMS(prog.mean()), "prog-ms")
	b.ReportMetric(benchMS(lat.mean()-prog.mean()), "outside-ms")
}

// BenchmarkForkExecTrue is the baseline: os/exec of /bin/true, no isolation.
func BenchmarkForkExecTrue(b *testing.B) { benchPlainLoop(b, "", benchTrueArgv) }

// BenchmarkSandboxTrue runs /bin/true through Engine.Run, back to back.
func BenchmarkSandboxTrue(b *testing.B) { benchSandboxLoop(b, "", benchTrueArgv, 0) }

// BenchmarkSandboxTrueAfterIdle sleeps (untimed) before each run, as a
// server between sporadic requests does. On cgroup v1 the first migration
// of a process into a cgroup after an idle gap waits for an RCU grace
// period, which BenchmarkSandboxTrue's back-to-back runs mostly avoid.
func BenchmarkSandboxTrueAfterIdle(b *testing.B) {
	benchSandboxLoop(b, "", benchTrueArgv, benchIdleGap)
}

// BenchmarkPythonHelloPlain is python3 -c 'print("hello")', no isolation.
func BenchmarkPythonHelloPlain(b *testing.B) {
	benchNeedPython(b)
	benchPlainLoop(b, "hello\n", benchPythonArg)
}

// BenchmarkPythonHelloSandbox is the same through Engine.Run.
func BenchmarkPythonHelloSandbox(b *testing.B) {
	benchNeedPython(b)
	benchSandboxLoop(b, "hello\n", benchPythonArg, 0)
}

// BenchmarkForkExecNamespaces clones /bin/true into fresh user, pid, mount,
// net, ipc, uts and cgroup namespaces (as the sandbox does) and nothing
// else: no cgroup, no mounts, no second exec. It is the floor of any
// namespace sandbox on this host.
func BenchmarkForkExecNamespaces(b *testing.B) {
	var lat benchLatencies
	for b.Loop() {
		start := time.Now()
		cmd := exec.Command("/bin/true")
		cmd.Env = benchEnv
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNS | syscall.CLONE_NEWNET |
				syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | syscall.CLONE_NEWCGROUP,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
		}
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
		lat.add(time.Since(start))
	}
	lat.report(b, "")
}

// BenchmarkInterleaved runs fork/exec, sandbox, python plain and python
// sandbox round-robin, one of each per iteration, and reports the figures
// of the targets: ratio-p50 (sandbox /bin/true p50 over fork/exec p50,
// target <= 2) and py-delta-ms (sandboxed python p50 minus plain, target
// <= 2 ms). ns/op is the time of one round.
func BenchmarkInterleaved(b *testing.B) {
	e := benchEngine(b)
	_, pyErr := os.Stat(benchPython)
	var fork, sb, py, pysb benchLatencies
	timed := func(l *benchLatencies, f func() error) {
		start := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		l.add(time.Since(start))
	}
	for b.Loop() {
		timed(&fork, func() error { return benchPlain("", benchTrueArgv) })
		timed(&sb, func() error { _, err := benchSandboxed(e, "", benchTrueArgv); return err })
		if pyErr == nil {
			timed(&py, func() error { return benchPlain("hello\n", benchPythonArg) })
			timed(&pysb, func() error { _, err := benchSandboxed(e, "hello\n", benchPythonArg); return err })
		}
	}
	fork.report(b, "fork-")
	sb.report(b, "sandbox-")
	b.ReportMetric(float64(sb.pct(50))/float64(fork.pct(50)), "ratio-p50")
	if pyErr == nil {
		b.ReportMetric(benchMS(py.pct(50)), "py-p50-ms")
		b.ReportMetric(benchMS(pysb.pct(50)), "pysandbox-p50-ms")
		b.ReportMetric(benchMS(pysb.pct(50)-py.pct(50)), "py-delta-ms")
	}
}

// benchParallel runs one at a time in each of GOMAXPROCS goroutines and
// reports runs/s over the whole machine and the p50 and p99 of the runs.
func benchParallel(b *testing.B, run func() error) {
	var (
		mu   sync.Mutex
		lat  benchLatencies
		errs atomic.Int64
		msg  atomic.Value
	)
	cpu := benchCPUNow()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		var mine benchLatencies
		for pb.Next() {
			t := time.Now()
			if err := run(); err != nil {
				if errs.Add(1) == 1 {
					msg.Store(err.Error())
				}
				continue
			}
			mine.add(time.Since(t))
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	elapsed := time.Since(start)
	if n := errs.Load(); n > 0 {
		b.Fatalf("%d of %d runs failed, first: %v", n, b.N, msg.Load())
	}
	cpu.report(b, b.N)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "runs/s")
	b.ReportMetric(benchMS(lat.pct(50)), "p50-ms")
	b.ReportMetric(benchMS(lat.pct(99)), "p99-ms")
}

// BenchmarkForkExecTrueParallel is the throughput baseline.
func BenchmarkForkExecTrueParallel(b *testing.B) {
	benchParallel(b, func() error { return benchPlain("", benchTrueArgv) })
}

// BenchmarkSandboxTrueParallel is the sandbox's throughput on all cores
// (ANCHORS: at least 40% of plain fork/exec's, through the HTTP API).
func BenchmarkSandboxTrueParallel(b *testing.B) {
	e := benchEngine(b)
	benchParallel(b, func() error { _, err := benchSandboxed(e, "", benchTrueArgv); return err })
}

// BenchmarkCgroupJoin times only the move of a fresh process into a new
// cgroup (every v1 hierarchy the engine uses, or the v2 one), which the
// sandbox does once per run on cgroup v1 (v2 clones straight into the
// cgroup). With gap=0 the moves follow each other closely; with a gap the
// first write after it may wait for an RCU grace period on v1.
func BenchmarkCgroupJoin(b *testing.B) {
	e := benchEngine(b)
	var parents []string
	for _, dir := range e.Cgroups().Parents {
		if !slices.Contains(parents, dir) {
			parents = append(parents, dir)
		}
	}
	slices.Sort(parents)
	for _, gap := range []time.Duration{0, benchIdleGap} {
		b.Run("gap="+gap.String(), func(b *testing.B) {
			var lat benchLatencies
			seq := 0
			for b.Loop() {
				b.StopTimer()
				seq++
				name := fmt.Sprintf("bench-join-%d-%d", os.Getpid(), seq)
				var dirs []string
				for _, p := range parents {
					dir := filepath.Join(p, name)
					if err := os.Mkdir(dir, 0o755); err != nil {
						b.Fatal(err)
					}
					dirs = append(dirs, dir)
				}
				cmd := exec.Command("/bin/sleep", "60")
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				pid := []byte(strconv.Itoa(cmd.Process.Pid))
				time.Sleep(gap)
				b.StartTimer()
				start := time.Now()
				var err error
				for _, dir := range dirs {
					if err = os.WriteFile(filepath.Join(dir, "cgroup.procs"), pid, 0); err != nil {
						break
					}
				}
				lat.add(time.Since(start))
				b.StopTimer()
				cmd.Process.Kill()
				cmd.Wait()
				for _, dir := range dirs {
					benchRmdir(dir)
				}
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			lat.report(b, "")
		})
	}
}

// benchRmdir removes an emptied cgroup, waiting a little for its last
// process to be gone.
func benchRmdir(dir string) {
	for wait := 100 * time.Microsecond; wait < time.Second; wait *= 2 {
		if err := os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(wait)
	}
}
