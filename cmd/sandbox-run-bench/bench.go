package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// The bench command measures what a sandbox costs over plain fork/exec of
// the same program, with every variant measured in one run and interleaved
// round-robin (A, B, C, A, B, C, ...), so that noise on the machine lands on
// all of them alike. Only ratios and differences taken within one run mean
// anything; absolute times move with the machine and the hour.

const benchUsage = `Usage: sandbox-run bench [-n 200] [-warmup 20] [-pause 0] [--output-format text|json]
       sandbox-run bench --api [-url URL] [-n 300] [-clients 1,2,4] [-duration 5s] [--output-format text|json]
       sandbox-run bench --suite [-parts api,interp,compile,docker,memory] [-docker auto|off] [--api's flags] [...]

Without --api: measures the latency of /bin/true and of a python hello world
run plainly (fork/exec, no isolation) and through the sandbox library with
its default engine, plus /bin/true under bubblewrap when bwrap is on PATH.
Variants are interleaved round-robin; every run's result is checked. Prints
p50, p95, p99, mean and sequential runs/s of each, the ratios to plain
fork/exec, and whether the project's latency targets are met.

"sandbox /bin/true, back-to-back" is a second sandboxed /bin/true started
right after the first one of each round (never paused): on cgroup v1 the
first write of a fresh process into a cgroup after an idle gap waits for an
RCU grace period (~10 ms), and this row shows the cost without that wait.

With --api: measures {"language":"bash","code":"true"} through the HTTP API
(POST /api/sandbox/execute, keep-alive) against plain fork/exec of
"bash -c true", the comparison of the acceptance check: sequentially with
one client, interleaved with fork/exec of bash -c true and of /bin/true and
with the same work a layer lower each (sandbox.Run of bash -c true, the
executor library, the API handler without a network), then with each
-clients count for -duration. The API
server runs in this process on 127.0.0.1:0, configured like "sandbox-run
serve" (SANDBOX_RUN_* variables apply), unless -url names a running one.
The same rows are measured for {"language":"bash","code":"echo hi"} against
"bash -c 'echo hi'". Prints latency, throughput and CPU per run, and the
two HTTP targets (p50 within 2.5x of fork/exec, throughput at least 0.40 of
fork/exec).

With --suite: every comparison of docs/BENCHMARKS.md in one run, each
against baselines measured in the same run. The parts (-parts):
  api      the --api measurements above
  interp   python and node hello through the API against /usr/bin/python3 -c
           and node -e run plainly (p50 within 2 ms?)
  compile  go, rust, java and cpp hello: a request with a never-seen comment
           (cold compile) against identical repeats (compile cache hit? the
           compile step's cache_hit is shown when the server gives it;
           repeat/cold below 10%?)
  docker   /bin/true and python hello under "docker run --rm --network none"
           with an image imported from this host's files, against the
           sandbox: the speedup. Skipped when no docker engine answers (or
           -docker off)
  memory   RSS of a "sandbox-run serve" process (this binary, 127.0.0.1, one
           worker) idle, and with -jobs async executions queued behind a
           job that holds the worker (idle below 40 MB? queued below 200 MB?)

Flags:
`

// benchRow is one measured variant.
type benchRow struct {
	Name   string  `json:"name"`
	Runs   int     `json:"runs"`
	Errors int     `json:"errors"`
	P50    float64 `json:"p50_ms"`
	P95    float64 `json:"p95_ms"`
	P99    float64 `json:"p99_ms"`
	Mean   float64 `json:"mean_ms"`
	Min    float64 `json:"min_ms"`
	Max    float64 `json:"max_ms"`
	PerSec float64 `json:"runs_per_s"` // sequential: 1 / mean
	// ProgP50 is the median of the sandbox's own Result.WallTime (from the
	// program's start to the end of its tree): what is left of P50 is the
	// sandbox's set-up and tear-down.
	ProgP50 float64 `json:"program_wall_p50_ms,omitempty"`
	// CPUms is CPU time per run from getrusage (bench --api only; what it
	// covers is in the report's cpu_covers).
	CPUms float64 `json:"cpu_ms_per_run,omitempty"`
	// MachineCPUms is the busy time of all CPUs (/proc/stat, 10 ms ticks)
	// per run (bench --api and --suite).
	MachineCPUms float64 `json:"machine_cpu_ms_per_run,omitempty"`
	// VsFork is P50 over the plain fork/exec P50 (bench --api: of the same
	// bash program); VsTrue over fork/exec /bin/true's (bench --api);
	// DeltaMS is P50 minus the P50 of the unsandboxed variant (python
	// rows).
	VsFork     float64 `json:"ratio_p50_vs_fork,omitempty"`
	VsTrue     float64 `json:"ratio_p50_vs_bin_true,omitempty"`
	DeltaMS    float64 `json:"delta_p50_ms,omitempty"`
	FirstError string  `json:"first_error,omitempty"`
	Note       string  `json:"note,omitempty"`
}

// benchTarget is one of the targets in ANCHORS.md, checked in this run.
type benchTarget struct {
	Target string  `json:"target"`
	Value  float64 `json:"value"`
	Limit  float64 `json:"limit"`
	Unit   string  `json:"unit"`
	Met    bool    `json:"met"`
	Known  bool    `json:"known"` // false when a row it needs could not be measured
}

type benchReport struct {
	Host    map[string]string `json:"host"`
	N       int               `json:"n"`
	Warmup  int               `json:"warmup"`
	PauseMS float64           `json:"pause_ms"`
	Rows    []benchRow        `json:"rows"`
	Targets []benchTarget     `json:"targets"`
	Notes   []string          `json:"notes,omitempty"`
}

// benchVariant is one way of running a program once.
type benchVariant struct {
	name    string
	noPause bool // follows the previous variant immediately, whatever -pause says
	// run executes the program once and checks what it did; prog is the
	// program's own wall time as the sandbox measured it (0 when unknown).
	run func() (prog time.Duration, err error)

	lat, progs []time.Duration
	errs       int
	firstErr   string
	cpu        time.Duration // getrusage over the measured runs (bench --api)
	busy       time.Duration // busy time of all CPUs over busyRuns measured runs
	busyRuns   int
}

// benchOptions are the bench command's flags.
type benchOptions struct {
	n, warmup int
	pause     time.Duration
	format    string
	python    string

	// --api only.
	api      bool
	url      string
	key      string
	clients  []int
	duration time.Duration

	// --suite only.
	suite          bool
	parts          []string
	interpN        int
	compileRounds  int
	compileRepeats int
	docker         string // auto or off
	dockerImage    string
	dockerN        int
	jobs           int
}

// benchAPIOnly are the flags that mean something only with --api or
// --suite; benchSuiteOnly only with --suite.
var (
	benchAPIOnly   = []string{"url", "api-key", "clients", "duration"}
	benchSuiteOnly = []string{"parts", "interp-n", "compile-rounds", "compile-repeats", "docker", "docker-image", "docker-n", "jobs"}
	// benchParts are the parts of --suite, in the order they run.
	benchParts = []string{"api", "interp", "compile", "docker", "memory"}
)

// benchAPI runs "bench --api" and benchSuite "bench --suite"; they are set
// where the platform has getrusage (bench_api.go, bench_suite.go) and nil
// elsewhere.
var benchAPI, benchSuite func(o *benchOptions) int

func cmdBench(args []string) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), benchUsage)
		fs.PrintDefaults()
	}
	var o benchOptions
	clients := "1,2,4"
	fs.IntVar(&o.n, "n", 0, "measured runs of each variant (default 200; 300 with --api)")
	fs.IntVar(&o.warmup, "warmup", 20, "unmeasured runs of each variant first")
	fs.DurationVar(&o.pause, "pause", 0, "idle time before each measured run (e.g. 50ms), to see what an idle gap costs")
	fs.StringVar(&o.format, "output-format", "text", "output format: text or json")
	fs.StringVar(&o.format, "o", "text", "shorthand for --output-format")
	fs.StringVar(&o.python, "python", "/usr/bin/python3", "the python interpreter for the hello rows (not with --api)")
	fs.BoolVar(&o.api, "api", false, "benchmark the HTTP API against plain fork/exec of bash -c true (and echo hi)")
	fs.StringVar(&o.url, "url", "", "--api: the execute endpoint of a running server (default: serve in this process)")
	fs.StringVar(&o.key, "api-key", os.Getenv("SANDBOX_RUN_API_KEY"), "--api with -url: API key sent as a Bearer token")
	fs.StringVar(&clients, "clients", clients, "--api: comma-separated client counts of the throughput rows")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "--api: how long each throughput row runs")
	parts := strings.Join(benchParts, ",")
	fs.BoolVar(&o.suite, "suite", false, "run every comparison: the --api rows, python and node hello, the compile cache, docker run, the server's memory")
	fs.StringVar(&parts, "parts", parts, "--suite: comma-separated parts to run")
	fs.IntVar(&o.interpN, "interp-n", 100, "--suite: measured runs of each python/node hello row")
	fs.IntVar(&o.compileRounds, "compile-rounds", 2, "--suite: cold compiles of each language (each a new program)")
	fs.IntVar(&o.compileRepeats, "compile-repeats", 5, "--suite: identical requests after each cold compile")
	fs.StringVar(&o.docker, "docker", "auto", "--suite: auto (compare with docker run when a docker engine answers) or off")
	fs.StringVar(&o.dockerImage, "docker-image", "sandbox-run-bench:host", "--suite: the image bench imports from this host's files for docker run")
	fs.IntVar(&o.dockerN, "docker-n", 20, "--suite: measured runs of each docker comparison row")
	fs.IntVar(&o.jobs, "jobs", 1000, "--suite: async executions queued for the memory part")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitUsage
	}
	if o.format != "text" && o.format != "json" {
		return fatalf(exitUsage, "--output-format must be text or json, not %q", o.format)
	}
	if o.n < 0 || o.warmup < 0 || o.pause < 0 || fs.NArg() > 0 {
		return fatalf(exitUsage, "bench: -n must be at least 1, -warmup and -pause not negative, and no arguments")
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if !o.suite {
		for _, name := range benchSuiteOnly {
			if given[name] {
				return fatalf(exitUsage, "bench: -%s applies only with --suite", name)
			}
		}
	} else {
		o.api = true
		for _, p := range strings.Split(parts, ",") {
			p = strings.TrimSpace(p)
			if !slices.Contains(benchParts, p) {
				return fatalf(exitUsage, "bench: -parts: unknown part %q (have %s)", p, strings.Join(benchParts, ","))
			}
			if !slices.Contains(o.parts, p) {
				o.parts = append(o.parts, p)
			}
		}
		if o.docker != "auto" && o.docker != "off" {
			return fatalf(exitUsage, "bench: -docker must be auto or off, not %q", o.docker)
		}
		if o.interpN < 1 || o.compileRounds < 1 || o.compileRepeats < 1 || o.dockerN < 1 || o.jobs < 1 {
			return fatalf(exitUsage, "bench: -interp-n, -compile-rounds, -compile-repeats, -docker-n and -jobs must be at least 1")
		}
	}
	if o.api {
		if given["python"] {
			return fatalf(exitUsage, "bench: -python does not apply with --api")
		}
		for _, c := range strings.Split(clients, ",") {
			var k int
			if _, err := fmt.Sscan(strings.TrimSpace(c), &k); err != nil || k < 1 || k > 1024 {
				return fatalf(exitUsage, "bench: -clients must be comma-separated counts from 1 to 1024, not %q", clients)
			}
			o.clients = append(o.clients, k)
		}
		if o.duration <= 0 {
			return fatalf(exitUsage, "bench: -duration must be positive")
		}
		if o.n == 0 {
			o.n = 300
		}
		if o.suite {
			if benchSuite == nil {
				return fatalf(exitSetup, "bench --suite: not supported on %s", runtime.GOOS)
			}
			return benchSuite(&o)
		}
		if benchAPI == nil {
			return fatalf(exitSetup, "bench --api: not supported on %s", runtime.GOOS)
		}
		return benchAPI(&o)
	}
	for _, name := range benchAPIOnly {
		if given[name] {
			return fatalf(exitUsage, "bench: -%s applies only with --api", name)
		}
	}
	if o.n == 0 {
		o.n = 200
	}
	n, warmup, pause, format, python := o.n, o.warmup, o.pause, o.format, o.python
	// Pooled, as a server's: its idle sandboxes go when the bench ends.
	engine, err := sandbox.New(sandbox.Config{CgroupParent: os.Getenv("SANDBOX_RUN_CGROUP_PARENT")})
	if err != nil {
		return fatalf(exitSetup, "bench: %v", err)
	}
	defer engine.Close()

	report := &benchReport{Host: benchHost(engine), N: n, Warmup: warmup, PauseMS: benchMS(pause)}
	plain := func(argv []string, want string) func() (time.Duration, error) {
		return func() (time.Duration, error) {
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Env = benchEnv
			if want != "" {
				cmd.Stdout = &stdout
			}
			cmd.Stderr = &stderr
			err := cmd.Run()
			code := 0
			if err != nil {
				var ee *exec.ExitError
				if !errors.As(err, &ee) {
					return 0, err
				}
				code = ee.ExitCode()
			}
			return 0, benchCheck(code, "", stdout.Bytes(), stderr.Bytes(), want)
		}
	}

	trueArgv := []string{"/bin/true"}
	pyArgv := []string{python, "-c", `print("hello")`}
	variants := []*benchVariant{
		{name: "fork/exec /bin/true", run: plain(trueArgv, "")},
		{name: "sandbox /bin/true", run: benchSandboxed(engine, trueArgv, "")},
		{name: "sandbox /bin/true, back-to-back", noPause: true, run: benchSandboxed(engine, trueArgv, "")},
	}
	if _, err := os.Stat(python); err == nil {
		variants = append(variants,
			&benchVariant{name: "python hello plain", run: plain(pyArgv, "hello\n")},
			&benchVariant{name: "python hello sandbox", run: benchSandboxed(engine, pyArgv, "hello\n")})
	} else {
		report.Notes = append(report.Notes, fmt.Sprintf("python rows skipped: %s not found (set -python)", python))
	}
	if bwrap, err := exec.LookPath("bwrap"); err == nil {
		argv := []string{bwrap, "--unshare-all", "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin",
			"--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--dev", "/dev", "/bin/true"}
		variants = append(variants, &benchVariant{name: "bwrap --unshare-all /bin/true", run: plain(argv, "")})
	} else {
		report.Notes = append(report.Notes, "bwrap row skipped: bwrap is not on PATH (apt-get install bubblewrap)")
	}

	if format == "text" {
		fmt.Fprintf(os.Stderr, "bench: %d variants, %d warm-up + %d measured runs each, interleaved...\n", len(variants), warmup, n)
	}
	for round := 0; round < warmup+n; round++ {
		measured := round >= warmup
		for _, v := range variants {
			if measured && pause > 0 && !v.noPause {
				time.Sleep(pause)
			}
			start := time.Now()
			prog, err := v.run()
			elapsed := time.Since(start)
			if measured {
				v.record(elapsed, prog, err)
			}
		}
	}

	report.Rows = make([]benchRow, len(variants))
	rows := make(map[string]*benchRow)
	for i, v := range variants {
		report.Rows[i] = benchSummary(v)
		rows[v.name] = &report.Rows[i]
	}
	fork := rows["fork/exec /bin/true"]
	for i := range report.Rows {
		r := &report.Rows[i]
		if fork.Runs > 0 && r.Runs > 0 && !strings.HasPrefix(r.Name, "python") {
			r.VsFork = r.P50 / fork.P50
		}
	}
	pyPlain, pySandbox := rows["python hello plain"], rows["python hello sandbox"]
	if pyPlain != nil && pySandbox != nil && pyPlain.Runs > 0 && pySandbox.Runs > 0 {
		pySandbox.DeltaMS = pySandbox.P50 - pyPlain.P50
	}

	sbTrue := rows["sandbox /bin/true"]
	t1 := benchTarget{Target: "/bin/true through the library within 2x plain fork/exec at p50", Limit: 2, Unit: "x"}
	if sbTrue.VsFork > 0 {
		t1.Known, t1.Value, t1.Met = true, sbTrue.VsFork, sbTrue.VsFork <= 2
	}
	t2 := benchTarget{Target: "python hello within 2 ms of unsandboxed at p50", Limit: 2, Unit: "ms"}
	if pySandbox != nil && pySandbox.Runs > 0 && pyPlain.Runs > 0 {
		t2.Known, t2.Value, t2.Met = true, pySandbox.DeltaMS, pySandbox.DeltaMS <= 2
	}
	report.Targets = []benchTarget{t1, t2}

	errs := 0
	for _, r := range report.Rows {
		errs += r.Errors
	}
	return benchEnd(format, report, func(w io.Writer) { printBench(w, report) }, errs > 0)
}

// benchEnd prints the report, as JSON or as text, and gives bench's exit
// code: 1 when any run failed.
func benchEnd(format string, report any, printText func(io.Writer), failed bool) int {
	if format == "json" {
		printJSON(report)
	} else {
		printText(os.Stdout)
	}
	if failed {
		return 1
	}
	return 0
}

// benchEnv is the environment of the programs bench starts itself, plainly
// or sandboxed.
var benchEnv = []string{"PATH=/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8"}

// benchSandboxed is one run of argv through engine, as a library user
// makes it, checked with benchCheck.
func benchSandboxed(engine *sandbox.Engine, argv []string, want string) func() (time.Duration, error) {
	return func() (time.Duration, error) {
		res, err := engine.Run(context.Background(), &sandbox.Spec{Args: argv, Env: benchEnv, Mounts: sandbox.SystemMounts})
		if err != nil {
			return 0, err
		}
		return res.WallTime, benchCheck(res.ExitCode, string(res.Limit), res.Stdout, res.Stderr, want)
	}
}

// record adds one measured run's outcome to v.
func (v *benchVariant) record(elapsed, prog time.Duration, err error) {
	if err != nil {
		v.errs++
		if v.firstErr == "" {
			v.firstErr = err.Error()
		}
		return
	}
	v.lat = append(v.lat, elapsed)
	if prog > 0 {
		v.progs = append(v.progs, prog)
	}
}

// benchCheck says whether a run did what the program should: exit 0, no
// limit hit, and the expected standard output when one is given.
func benchCheck(code int, limit string, stdout, stderr []byte, want string) error {
	switch {
	case limit != "":
		return fmt.Errorf("limit %s hit (exit %d): %.200s", limit, code, stderr)
	case code != 0:
		return fmt.Errorf("exit code %d: %.200s", code, stderr)
	case want != "" && string(stdout) != want:
		return fmt.Errorf("stdout %.100q, want %q", stdout, want)
	}
	return nil
}

func benchSummary(v *benchVariant) benchRow {
	row := benchRow{Name: v.name, Runs: len(v.lat), Errors: v.errs, FirstError: v.firstErr}
	if v.noPause {
		row.Note = "follows a sandbox run at once"
	}
	if len(v.lat) == 0 {
		return row
	}
	lat := slices.Clone(v.lat)
	slices.Sort(lat)
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	mean := sum / time.Duration(len(lat))
	row.P50, row.P95, row.P99 = benchPercentiles(lat)
	row.Mean, row.Min, row.Max = benchMS(mean), benchMS(lat[0]), benchMS(lat[len(lat)-1])
	row.PerSec = 1 / mean.Seconds()
	if len(v.progs) > 0 {
		progs := slices.Clone(v.progs)
		slices.Sort(progs)
		row.ProgP50 = benchMS(benchPercentile(progs, 50))
	}
	return row
}

// benchPercentile is the nearest-rank percentile of sorted durations.
func benchPercentile(sorted []time.Duration, p float64) time.Duration {
	i := int(float64(len(sorted))*p/100+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// benchPercentiles are the p50, p95 and p99 of sorted durations in ms.
func benchPercentiles(sorted []time.Duration) (p50, p95, p99 float64) {
	return benchMS(benchPercentile(sorted, 50)), benchMS(benchPercentile(sorted, 95)), benchMS(benchPercentile(sorted, 99))
}

func benchMS(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// benchHost describes the machine the numbers come from. The cgroup
// version is engine's, or without an engine (a remote server measured)
// guessed from /sys/fs/cgroup.
func benchHost(engine *sandbox.Engine) map[string]string {
	h := map[string]string{
		"cpus": fmt.Sprint(runtime.NumCPU()),
		"go":   runtime.Version(),
		"os":   runtime.GOOS + "/" + runtime.GOARCH,
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		h["kernel"] = strings.TrimSpace(string(b))
	}
	switch {
	case engine != nil:
		if cg := engine.Cgroups(); cg.Version > 0 {
			h["cgroup"] = fmt.Sprintf("v%d", cg.Version)
		}
	case fileExists("/sys/fs/cgroup/cgroup.controllers"):
		h["cgroup"] = "v2"
	case runtime.GOOS == "linux":
		h["cgroup"] = "v1"
	}
	return h
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func printBenchHost(w io.Writer, host map[string]string) {
	fmt.Fprintf(w, "host: %s, %s CPUs, kernel %s, cgroup %s, %s\n", host["os"], host["cpus"], host["kernel"], host["cgroup"], host["go"])
}

// printBenchErrors tells how many runs of each row failed, and the first
// error.
func printBenchErrors(w io.Writer, rows []benchRow) {
	for _, row := range rows {
		if row.Errors > 0 {
			fmt.Fprintf(w, "errors in %s: %d, first: %s\n", row.Name, row.Errors, row.FirstError)
		}
	}
}

// benchCell is a table cell: v with two decimals, or "-" when it was not
// measured (0).
func benchCell(v float64) string {
	if v > 0 {
		return fmt.Sprintf("%.2f", v)
	}
	return "-"
}

// state is how the target fared, in words.
func (t benchTarget) state() string {
	switch {
	case !t.Known:
		return "unknown (not measured)"
	case t.Met:
		return "met"
	}
	return "not met"
}

func printBench(w io.Writer, r *benchReport) {
	printBenchHost(w, r.Host)
	fmt.Fprintf(w, "runs: %d measured (+%d warm-up) of each variant, interleaved round-robin, pause %gms\n\n", r.N, r.Warmup, r.PauseMS)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "variant\truns\terrors\tp50 ms\tp95 ms\tp99 ms\tmean ms\truns/s\tprogram p50 ms\tvs fork/exec p50\t")
	for _, row := range r.Rows {
		if row.Runs == 0 {
			fmt.Fprintf(tw, "%s\t%d\t%d\t-\t-\t-\t-\t-\t-\t-\t\n", row.Name, row.Runs, row.Errors)
			continue
		}
		prog, vs := benchCell(row.ProgP50), "-"
		switch {
		case row.VsFork > 0:
			vs = fmt.Sprintf("%.2fx", row.VsFork)
		case row.DeltaMS != 0:
			vs = fmt.Sprintf("%+.2f ms vs plain", row.DeltaMS)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.0f\t%s\t%s\t\n", row.Name, row.Runs, row.Errors, row.P50, row.P95, row.P99, row.Mean, row.PerSec, prog, vs)
	}
	tw.Flush()
	printBenchErrors(w, r.Rows)
	fmt.Fprintln(w, "\ntargets (ANCHORS.md):")
	for _, t := range r.Targets {
		value := "-"
		if t.Known {
			value = fmt.Sprintf("%.2f %s", t.Value, t.Unit)
			if t.Unit == "ms" {
				value = fmt.Sprintf("%+.2f ms", t.Value)
			}
		}
		fmt.Fprintf(w, "  %-66s %-10s (limit %g %s)  %s\n", t.Target, value, t.Limit, t.Unit, t.state())
	}
	for _, note := range r.Notes {
		fmt.Fprintln(w, "note:", note)
	}
}
