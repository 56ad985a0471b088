//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/api"
	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// bench --api measures what the HTTP API costs over plain fork/exec of the
// same program, the comparison of the project's acceptance check
// (../shared/acceptance/perf): {"language":"bash","code":"true"} through
// POST /api/sandbox/execute against os/exec of "bash -c true".

func init() { benchAPI = runBenchAPI }

const (
	benchAPIPath = "/api/sandbox/execute"
	benchAPIBody = `{"language":"bash","code":"true"}`

	benchForkBash = "fork/exec bash -c true"
	benchForkTrue = "fork/exec /bin/true"
	benchEngine   = "sandbox.Run bash -c true"
	benchLibrary  = "executor.Execute (no HTTP)"
	benchHandler  = "API handler (no network)"
	benchHTTP     = "API over HTTP"
)

// benchLoadRow is one throughput measurement: clients running one request
// after another for a fixed time.
type benchLoadRow struct {
	Name    string  `json:"name"`
	Clients int     `json:"clients"`
	Runs    int     `json:"runs"` // that succeeded
	Errors  int     `json:"errors"`
	Seconds float64 `json:"seconds"`
	PerSec  float64 `json:"runs_per_s"` // successful runs / seconds
	P50     float64 `json:"p50_ms"`
	P95     float64 `json:"p95_ms"`
	P99     float64 `json:"p99_ms"`
	// CPUms is getrusage(SELF)+getrusage(CHILDREN) per run; MachineCPUms
	// is the busy time of all CPUs from /proc/stat per run (0: unknown).
	CPUms        float64 `json:"cpu_ms_per_run"`
	MachineCPUms float64 `json:"machine_cpu_ms_per_run,omitempty"`
	// VsFork is PerSec over the fork/exec row's with as many clients.
	VsFork     float64 `json:"ratio_runs_per_s_vs_fork,omitempty"`
	FirstError string  `json:"first_error,omitempty"`
}

// benchSplit divides the API's p50 into parts by differences of p50s.
type benchSplit struct {
	ForkMS     float64 `json:"fork_exec_bash_p50_ms"`
	SandboxMS  float64 `json:"sandbox_ms"`  // sandbox.Run - fork/exec
	ExecutorMS float64 `json:"executor_ms"` // executor.Execute - sandbox.Run
	HandlerMS  float64 `json:"api_handler_ms"`
	HTTPMS     float64 `json:"http_ms"`
	APIMS      float64 `json:"api_p50_ms"`
}

type benchAPIReport struct {
	Host        map[string]string `json:"host"`
	Server      string            `json:"server"`
	URL         string            `json:"url"`
	Request     string            `json:"request"`
	ForkArgv    []string          `json:"fork_argv"`
	N           int               `json:"n"`
	Warmup      int               `json:"warmup"`
	PauseMS     float64           `json:"pause_ms"`
	DurationS   float64           `json:"duration_s"`
	Clients     []int             `json:"clients"`
	Sequential  []benchRow        `json:"sequential"`
	Load        []benchLoadRow    `json:"load"`
	Split       *benchSplit       `json:"split,omitempty"`
	Targets     []benchTarget     `json:"targets"`
	Connections int64             `json:"http_connections_opened"`
	CPUCovers   string            `json:"cpu_covers"`
	Notes       []string          `json:"notes,omitempty"`
}

func runBenchAPI(o *benchOptions) int {
	bash, err := exec.LookPath("bash")
	if err != nil {
		return fatalf(exitSetup, "bench: %v", err)
	}
	report := &benchAPIReport{
		Host:    benchHost(nil),
		Request: "POST " + benchAPIPath + " " + benchAPIBody, ForkArgv: []string{bash, "-c", "true"},
		N: o.n, Warmup: o.warmup, PauseMS: benchMS(o.pause), DurationS: o.duration.Seconds(), Clients: o.clients,
	}

	// The in-process server: configured like "sandbox-run serve" without a
	// file, on a free loopback port, without API keys and with its log
	// discarded.
	var (
		srv    *api.Server
		x      *executor.Executor
		engine *sandbox.Engine
		cfg    api.Config
	)
	url := o.url
	if url == "" {
		cfg, err = api.LoadConfig("", os.Getenv)
		if err != nil {
			return fatalf(exitUsage, "config: %v", err)
		}
		cfg.Addr, cfg.Keys = "127.0.0.1:0", nil
		if err := cfg.Validate(); err != nil {
			return fatalf(exitUsage, "config: %v", err)
		}
		if x, err = api.NewExecutor(cfg); err != nil {
			return fatalf(exitSetup, "bench: cannot sandbox on this host: %v", err)
		}
		if engine, err = sandbox.Default(); err != nil { // the executor's engine
			return fatalf(exitSetup, "bench: cannot sandbox on this host: %v", err)
		}
		report.Host = benchHost(engine)
		ln, err := net.Listen("tcp", cfg.Addr)
		if err != nil {
			return fatalf(exitSetup, "bench: %v", err)
		}
		srv = api.New(cfg, x, slog.New(slog.NewJSONHandler(io.Discard, nil)))
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ctx, ln) }()
		defer func() { stop(); <-done }()
		url = "http://" + ln.Addr().String() + benchAPIPath
		report.Server = fmt.Sprintf("in-process on %s: workers %d, queue %d, no API keys, log discarded", ln.Addr(), cfg.Workers, cfg.Queue)
	} else {
		report.Server = "running server at " + url
		report.Notes = append(report.Notes, "the sandbox.Run, executor.Execute and API handler rows need the in-process server: not measured with -url")
	}
	report.URL = url

	// One client for everything, keeping a connection per client alive;
	// dials counts the connections it opened.
	var dials atomic.Int64
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	maxClients := slices.Max(o.clients)
	transport := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return dialer.DialContext(ctx, network, addr)
		},
		MaxIdleConns:        maxClients + 4,
		MaxIdleConnsPerHost: maxClients + 4,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 2 * time.Minute}
	body := []byte(benchAPIBody)
	overHTTP := func() (time.Duration, error) {
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Content-Type", "application/json")
		if o.key != "" && o.url != "" {
			req.Header.Set("Authorization", "Bearer "+o.key)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return 0, err
		}
		return benchCheckResponse(resp.StatusCode, b)
	}
	forkBash, forkTrue := benchFork(bash, "-c", "true"), benchFork("/bin/true")

	variants := []*benchVariant{
		{name: benchForkBash, run: forkBash},
		{name: benchForkTrue, run: forkTrue},
		{name: benchHTTP, run: overHTTP},
	}
	if srv != nil {
		handler := srv.Handler()
		inHandler := func() (time.Duration, error) {
			req := httptest.NewRequest(http.MethodPost, benchAPIPath, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			handler.ServeHTTP(rec, req)
			return benchCheckResponse(rec.Code, rec.Body.Bytes())
		}
		// What the handler gives the executor for this body (toExecutor).
		d := cfg.Defaults
		xreq := func() *executor.Request {
			return &executor.Request{Language: "bash", Code: []byte("true"),
				Limits: executor.Limits{WallTime: seconds(d.TimeoutSeconds), CPUTime: seconds(d.CPUTimeSeconds),
					OutputBytes: d.OutputBytes},
				CompileLimits: executor.Limits{WallTime: seconds(d.CompileTimeoutSeconds)}}
		}
		library := func() (time.Duration, error) {
			res, err := x.Execute(context.Background(), xreq())
			if err != nil {
				return 0, err
			}
			if res.Status != executor.StatusCompleted || res.ExitCode != 0 || res.Stdout != "" {
				return 0, fmt.Errorf("status %s, exit code %d, stdout %.100q: %.200s%.200s", res.Status, res.ExitCode, res.Stdout, res.Stderr, res.Error)
			}
			return time.Duration(res.DurationMs * float64(time.Millisecond)), nil
		}
		// The sandbox library alone, as "bench" without --api runs it.
		sandboxed := benchSandboxed(engine, []string{bash, "-c", "true"}, "")
		variants = []*benchVariant{variants[0], variants[1],
			{name: benchEngine, run: sandboxed},
			{name: benchLibrary, run: library},
			{name: benchHandler, run: inHandler},
			variants[2]}
	}

	// Sequential: one client, every variant once per round. The two
	// fork/exec rows come first and the sandboxed rows follow in an order
	// shuffled per round, so that the one after the fork/exec gap (a cgroup
	// v1 join after a gap can wait for an RCU grace period) is any of them.
	if o.format == "text" {
		fmt.Fprintf(os.Stderr, "bench --api: %s\n", report.Server)
		fmt.Fprintf(os.Stderr, "bench --api: %d variants, %d warm-up + %d measured runs each, interleaved...\n", len(variants), o.warmup, o.n)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	order := slices.Clone(variants)
	for round := 0; round < o.warmup+o.n; round++ {
		measured := round >= o.warmup
		sandboxed := order[2:]
		rng.Shuffle(len(sandboxed), func(i, j int) { sandboxed[i], sandboxed[j] = sandboxed[j], sandboxed[i] })
		for _, v := range order {
			if measured && o.pause > 0 {
				time.Sleep(o.pause)
			}
			cpu0 := benchCPU()
			start := time.Now()
			prog, err := v.run()
			elapsed := time.Since(start)
			cpu := benchCPU() - cpu0
			if measured {
				v.cpu += cpu
				v.record(elapsed, prog, err)
			}
		}
	}
	rows := map[string]*benchRow{}
	for _, v := range variants {
		row := benchSummary(v)
		if runs := len(v.lat) + v.errs; runs > 0 {
			row.CPUms = benchMS(v.cpu) / float64(runs)
		}
		report.Sequential = append(report.Sequential, row)
	}
	for i := range report.Sequential {
		rows[report.Sequential[i].Name] = &report.Sequential[i]
	}
	fork := rows[benchForkBash]
	for i := range report.Sequential {
		if r := &report.Sequential[i]; fork.Runs > 0 && r.Runs > 0 {
			r.VsFork = r.P50 / fork.P50
		}
	}

	// Throughput: for each client count, fork/exec and then the API.
	if o.format == "text" {
		fmt.Fprintf(os.Stderr, "bench --api: throughput, %d rows of %s...\n", 2*len(o.clients), o.duration)
	}
	for _, c := range o.clients {
		f := benchLoad(benchForkBash, c, o.duration, forkBash)
		a := benchLoad(benchHTTP, c, o.duration, overHTTP)
		if f.PerSec > 0 {
			a.VsFork = a.PerSec / f.PerSec
		}
		report.Load = append(report.Load, f, a)
	}
	report.Connections = dials.Load()

	// The targets, as the acceptance check takes them.
	apiRow := rows[benchHTTP]
	t1 := benchTarget{Target: "bash true over HTTP within 2.5x fork/exec bash -c true at p50", Limit: 2.5, Unit: "x"}
	if apiRow.VsFork > 0 {
		t1.Known, t1.Value, t1.Met = true, apiRow.VsFork, apiRow.VsFork <= 2.5 && apiRow.Errors == 0
	}
	var bestFork, bestAPI *benchLoadRow
	apiErrors := 0
	for i := range report.Load {
		r := &report.Load[i]
		if r.Name == benchForkBash && (bestFork == nil || r.PerSec > bestFork.PerSec) {
			bestFork = r
		}
		if r.Name == benchHTTP {
			apiErrors += r.Errors
			if bestAPI == nil || r.PerSec > bestAPI.PerSec {
				bestAPI = r
			}
		}
	}
	t2 := benchTarget{Target: "throughput over HTTP at least 0.40 of fork/exec bash -c true", Limit: 0.4, Unit: ""}
	if bestFork != nil && bestAPI != nil && bestFork.PerSec > 0 {
		ratio := bestAPI.PerSec / bestFork.PerSec
		t2.Target = fmt.Sprintf("throughput over HTTP (best, %d clients) at least 0.40 of fork/exec bash -c true (best, %d clients)", bestAPI.Clients, bestFork.Clients)
		t2.Known, t2.Value, t2.Met = true, ratio, ratio >= 0.4 && apiErrors == 0
	}
	report.Targets = []benchTarget{t1, t2}
	var f2, a4 *benchLoadRow
	for i := range report.Load {
		r := &report.Load[i]
		if r.Name == benchForkBash && r.Clients == 2 {
			f2 = r
		}
		if r.Name == benchHTTP && r.Clients == 4 {
			a4 = r
		}
	}
	if f2 != nil && a4 != nil && f2.PerSec > 0 {
		report.Notes = append(report.Notes, fmt.Sprintf("the acceptance check's pairing, API with 4 clients over fork/exec with 2: %.0f/%.0f runs/s = %.2f", a4.PerSec, f2.PerSec, a4.PerSec/f2.PerSec))
	}

	if sb, lib, h := rows[benchEngine], rows[benchLibrary], rows[benchHandler]; sb != nil && sb.Runs > 0 && lib.Runs > 0 && h.Runs > 0 && apiRow.Runs > 0 && fork.Runs > 0 {
		report.Split = &benchSplit{ForkMS: fork.P50, SandboxMS: sb.P50 - fork.P50, ExecutorMS: lib.P50 - sb.P50,
			HandlerMS: h.P50 - lib.P50, HTTPMS: apiRow.P50 - h.P50, APIMS: apiRow.P50}
	}
	if srv != nil {
		report.CPUCovers = "getrusage(RUSAGE_SELF) + getrusage(RUSAGE_CHILDREN) of this process per run: the HTTP client, the in-process server and executor, and every reaped child (fork/exec children; sandbox inits with their programs). Not kernel threads (network namespace clean-up runs in kworkers) and not other processes. machine cpu: busy time of all CPUs from /proc/stat (10 ms ticks) over the row, per run: that plus everything else on the machine."
	} else {
		report.CPUCovers = "getrusage(RUSAGE_SELF) + getrusage(RUSAGE_CHILDREN) of this process per run: for API rows only the client, not the server or its sandboxes; for fork/exec rows the client and its children. machine cpu: busy time of all CPUs from /proc/stat (10 ms ticks) over the row, per run, server included when it runs on this machine."
	}

	errs := 0
	for _, r := range report.Sequential {
		errs += r.Errors
	}
	for _, r := range report.Load {
		errs += r.Errors
	}
	return benchEnd(o.format, report, func(w io.Writer) { printBenchAPI(w, report) }, errs > 0)
}

// benchCheckResponse checks an answer to benchAPIBody: 200, status
// completed, exit code 0, no output. It returns the program's own time.
func benchCheckResponse(code int, b []byte) (time.Duration, error) {
	var r struct {
		Status     string  `json:"status"`
		ExitCode   *int    `json:"exit_code"`
		Stdout     string  `json:"stdout"`
		DurationMs float64 `json:"duration_ms"`
	}
	if err := json.Unmarshal(b, &r); err != nil || code != http.StatusOK || r.Status != "completed" || r.ExitCode == nil || *r.ExitCode != 0 || r.Stdout != "" {
		return 0, fmt.Errorf("HTTP %d: %.200s", code, bytes.TrimSpace(b))
	}
	return time.Duration(r.DurationMs * float64(time.Millisecond)), nil
}

// benchFork runs argv with os/exec, as the acceptance check's load
// generator does (environment inherited, standard streams /dev/null).
func benchFork(argv ...string) func() (time.Duration, error) {
	return func() (time.Duration, error) {
		return 0, exec.Command(argv[0], argv[1:]...).Run()
	}
}

// benchLoad runs clients loops of run for d and counts what finished.
func benchLoad(name string, clients int, d time.Duration, run func() (time.Duration, error)) benchLoadRow {
	var (
		mu       sync.Mutex
		lat      []time.Duration
		errs     int
		firstErr string
		wg       sync.WaitGroup
	)
	busy0, busyOK := benchBusy()
	cpu0 := benchCPU()
	start := time.Now()
	deadline := start.Add(d)
	for range clients {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				t := time.Now()
				_, err := run()
				el := time.Since(t)
				mu.Lock()
				if err != nil {
					errs++
					if firstErr == "" {
						firstErr = err.Error()
					}
				} else {
					lat = append(lat, el)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	cpu := benchCPU() - cpu0
	busy1, busyOK1 := benchBusy()
	row := benchLoadRow{Name: name, Clients: clients, Runs: len(lat), Errors: errs, Seconds: wall.Seconds(), FirstError: firstErr}
	row.PerSec = float64(len(lat)) / wall.Seconds()
	if runs := len(lat) + errs; runs > 0 {
		row.CPUms = benchMS(cpu) / float64(runs)
		if busyOK && busyOK1 {
			row.MachineCPUms = benchMS(busy1-busy0) / float64(runs)
		}
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		row.P50, row.P95, row.P99 = benchPercentiles(lat)
	}
	return row
}

// benchCPU is the CPU time of this process and of its reaped children.
func benchCPU() time.Duration {
	var self, children syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	return time.Duration(self.Utime.Nano() + self.Stime.Nano() + children.Utime.Nano() + children.Stime.Nano())
}

// benchBusy is the time all CPUs were busy since boot, from /proc/stat
// (Linux; USER_HZ ticks, 10 ms).
func benchBusy() (time.Duration, bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	fields := strings.Fields(line)
	if err != nil || len(fields) < 5 || fields[0] != "cpu" {
		return 0, false
	}
	var busy uint64
	for i, s := range fields[1:] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, false
		}
		if i != 3 && i != 4 && i < 8 { // not idle, iowait, nor guest (counted in user)
			busy += v
		}
	}
	return time.Duration(busy) * 10 * time.Millisecond, true
}

func printBenchAPI(w io.Writer, r *benchAPIReport) {
	printBenchHost(w, r.Host)
	fmt.Fprintf(w, "server: %s\n", r.Server)
	fmt.Fprintf(w, "request: %s (keep-alive); baseline: %s\n", r.Request, strings.Join(r.ForkArgv, " "))
	fmt.Fprintf(w, "sequential, 1 client: %d measured (+%d warm-up) runs of each variant, interleaved, pause %gms\n\n", r.N, r.Warmup, r.PauseMS)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "variant\truns\terrors\tp50 ms\tp95 ms\tp99 ms\tmean ms\truns/s\tcpu ms/run\tprogram p50 ms\tvs fork bash p50\t")
	for _, row := range r.Sequential {
		if row.Runs == 0 {
			fmt.Fprintf(tw, "%s\t%d\t%d\t-\t-\t-\t-\t-\t-\t-\t-\t\n", row.Name, row.Runs, row.Errors)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.0f\t%.2f\t%s\t%.2fx\t\n", row.Name, row.Runs, row.Errors, row.P50, row.P95, row.P99, row.Mean, row.PerSec, row.CPUms, benchCell(row.ProgP50), row.VsFork)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nthroughput: each row runs its clients back to back for %gs\n\n", r.DurationS)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "variant\tclients\truns\terrors\truns/s\tp50 ms\tp95 ms\tp99 ms\tcpu ms/run\tmachine cpu ms/run\tvs fork bash runs/s\t")
	for _, row := range r.Load {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.0f\t%.2f\t%.2f\t%.2f\t%.2f\t%s\t%s\t\n", row.Name, row.Clients, row.Runs, row.Errors, row.PerSec, row.P50, row.P95, row.P99, row.CPUms, benchCell(row.MachineCPUms), benchCell(row.VsFork))
	}
	tw.Flush()
	printBenchErrors(w, r.Sequential)
	for _, row := range r.Load {
		if row.Errors > 0 {
			fmt.Fprintf(w, "errors in %s with %d clients: %d, first: %s\n", row.Name, row.Clients, row.Errors, row.FirstError)
		}
	}
	fmt.Fprintf(w, "HTTP connections opened: %d (keep-alive: at most one per client)\n", r.Connections)
	if s := r.Split; s != nil {
		part := func(name string, ms float64) {
			fmt.Fprintf(w, "  %-44s %6.2f ms  %3.0f%%\n", name, ms, 100*ms/s.APIMS)
		}
		fmt.Fprintln(w, "\nwhere the API's p50 goes (differences of p50s, so approximate):")
		part("fork/exec bash -c true", s.ForkMS)
		part("+ sandbox (sandbox.Run - fork/exec)", s.SandboxMS)
		part("+ executor: /work files, output scan, result", s.ExecutorMS)
		part("+ API handler: JSON, metrics, log, pool", s.HandlerMS)
		part("+ HTTP over loopback (client and server)", s.HTTPMS)
		part("= API over HTTP", s.APIMS)
	}
	fmt.Fprintln(w, "\ntargets (ANCHORS.md, acceptance check perf):")
	for _, t := range r.Targets {
		value, limit := "-", fmt.Sprintf("at least %.2f", t.Limit)
		if t.Unit == "x" {
			limit = fmt.Sprintf("at most %gx", t.Limit)
		}
		if t.Known {
			value = fmt.Sprintf("%.2f%s", t.Value, t.Unit)
		}
		fmt.Fprintf(w, "  %s\n      %-8s (%s)  %s\n", t.Target, value, limit, t.state())
	}
	for _, note := range r.Notes {
		fmt.Fprintln(w, "note:", note)
	}
	fmt.Fprintln(w, "cpu ms/run:")
	line := " "
	for _, word := range strings.Fields(r.CPUCovers) {
		if len(line)+1+len(word) > 100 {
			fmt.Fprintln(w, line)
			line = " "
		}
		line += " " + word
	}
	fmt.Fprintln(w, line)
}
