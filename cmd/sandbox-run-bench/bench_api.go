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
	neturl "net/url"
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
	"github.com/sandbox-run/sandbox-run/pkg/local"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// bench --api measures what the HTTP API costs over plain fork/exec of the
// same program, the comparison of the project's acceptance check
// (../shared/acceptance/perf): {"language":"bash","code":"true"} through
// POST /api/sandbox/execute against os/exec of "bash -c true" (and of
// /bin/true), and the same for {"language":"bash","code":"echo hi"}
// against "bash -c 'echo hi'".

func init() { benchAPI = runBenchAPI }

const (
	benchAPIPath     = "/api/sandbox/execute"
	benchAPIBody     = `{"language":"bash","code":"true"}`
	benchAPIEchoBody = `{"language":"bash","code":"echo hi"}`

	benchForkBash = "fork/exec bash -c true"
	benchForkTrue = "fork/exec /bin/true"
	benchForkEcho = "fork/exec bash -c 'echo hi'"
	benchEngine   = "sandbox.Run bash -c true"
	benchLibrary  = "executor.Execute (no HTTP)"
	benchHandler  = "API handler (no network)"
	benchHTTP     = "API over HTTP"
	benchHTTPEcho = "API over HTTP, echo hi"
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
	// VsFork is PerSec over the fork/exec row's of the same program (bash
	// -c true or bash -c 'echo hi') with as many clients; VsTrue over fork/exec
	// /bin/true's.
	VsFork     float64 `json:"ratio_runs_per_s_vs_fork,omitempty"`
	VsTrue     float64 `json:"ratio_runs_per_s_vs_bin_true,omitempty"`
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
	Request2    string            `json:"request_echo"`
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

// benchServer is the API a bench measures: a server in this process,
// configured like "sandbox-run serve", or a running one at -url. Every
// request goes through one client that keeps a connection per client
// alive; dials counts the connections it opened.
type benchServer struct {
	url  string // the execute endpoint
	base string // scheme://host:port
	key  string // sent as a Bearer token (with -url only)
	desc string

	// In-process only (nil with -url).
	srv    *api.Server
	x      *executor.Executor
	engine *sandbox.Engine
	cfg    api.Config

	transport *http.Transport
	client    *http.Client
	dials     atomic.Int64
	stop      func()
}

// startBenchServer starts the in-process server, on a free loopback port,
// without API keys and with its log discarded, unless o.url names one. On
// failure it has printed why and returns the exit code.
func startBenchServer(o *benchOptions) (*benchServer, int) {
	b := &benchServer{url: o.url, stop: func() {}}
	if b.url == "" {
		cfg, err := api.LoadConfig("", os.Getenv)
		if err != nil {
			return nil, fatalf(exitUsage, "config: %v", err)
		}
		cfg.Addr, cfg.Keys = "127.0.0.1:0", nil
		if err := cfg.Validate(); err != nil {
			return nil, fatalf(exitUsage, "config: %v", err)
		}
		if b.x, err = local.NewExecutor(cfg); err != nil {
			return nil, fatalf(exitSetup, "bench: cannot sandbox on this host: %v", err)
		}
		b.engine = b.x.Engine()
		ln, err := net.Listen("tcp", cfg.Addr)
		if err != nil {
			return nil, fatalf(exitSetup, "bench: %v", err)
		}
		b.cfg = cfg
		b.srv = api.New(cfg, local.New(b.x), slog.New(slog.NewJSONHandler(io.Discard, nil)))
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- b.srv.Serve(ctx, ln) }()
		b.stop = func() { stop(); <-done }
		b.url = "http://" + ln.Addr().String() + benchAPIPath
		b.desc = fmt.Sprintf("in-process on %s: workers %d, queue %d, no API keys, log discarded", ln.Addr(), cfg.Workers, cfg.Queue)
	} else {
		b.key = o.key
		b.desc = "running server at " + b.url
	}
	if u, err := neturl.Parse(b.url); err == nil {
		b.base = u.Scheme + "://" + u.Host
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	idle := max(slices.Max(o.clients), 4) + 4
	b.transport = &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			b.dials.Add(1)
			return dialer.DialContext(ctx, network, addr)
		},
		MaxIdleConns:        idle,
		MaxIdleConnsPerHost: idle,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	b.client = &http.Client{Transport: b.transport, Timeout: 5 * time.Minute}
	return b, 0
}

func (b *benchServer) close() {
	b.transport.CloseIdleConnections()
	b.stop()
	if b.x != nil {
		// Nothing of the in-process server's sandboxes outlives the bench.
		b.x.Engine().Close()
	}
}

// do sends one request and reads the whole answer.
func (b *benchServer) do(method, url string, body []byte) (int, []byte, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if b.key != "" {
		req.Header.Set("Authorization", "Bearer "+b.key)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// answer posts body to the execute endpoint and checks the answer: 200,
// status completed, exit code 0 and stdout want.
func (b *benchServer) answer(body []byte, want string) (*benchAnswer, error) {
	code, out, err := b.do(http.MethodPost, b.url, body)
	if err != nil {
		return nil, err
	}
	return benchParseAnswer(code, out, want)
}

// execute is a run of body over HTTP, checked by answer; it gives the
// program's own time.
func (b *benchServer) execute(body []byte, want string) func() (time.Duration, error) {
	return func() (time.Duration, error) {
		a, err := b.answer(body, want)
		if err != nil {
			return 0, err
		}
		return a.prog(), nil
	}
}

// benchAnswer is what bench reads of an execution's answer.
type benchAnswer struct {
	Status     string  `json:"status"`
	ExitCode   *int    `json:"exit_code"`
	Stdout     string  `json:"stdout"`
	Stderr     string  `json:"stderr"`
	DurationMs float64 `json:"duration_ms"`
	Error      string  `json:"error"`
	Compile    *struct {
		Status     string  `json:"status"`
		ExitCode   int     `json:"exit_code"`
		Stderr     string  `json:"stderr"`
		DurationMs float64 `json:"duration_ms"`
		CacheHit   *bool   `json:"cache_hit"` // the compile cache's flag, when the server has one
	} `json:"compile"`
}

func (a *benchAnswer) prog() time.Duration {
	return time.Duration(a.DurationMs * float64(time.Millisecond))
}

// benchParseAnswer checks an answer: HTTP 200, status completed, exit code
// 0, standard output want.
func benchParseAnswer(code int, b []byte, want string) (*benchAnswer, error) {
	var a benchAnswer
	if err := json.Unmarshal(b, &a); err != nil || code != http.StatusOK || a.Status != "completed" || a.ExitCode == nil || *a.ExitCode != 0 || a.Stdout != want {
		return nil, fmt.Errorf("HTTP %d: %.300s", code, bytes.TrimSpace(b))
	}
	return &a, nil
}

func runBenchAPI(o *benchOptions) int {
	b, code := startBenchServer(o)
	if b == nil {
		return code
	}
	defer b.close()
	report, code := measureBenchAPI(o, b)
	if report == nil {
		return code
	}
	return benchEnd(o.format, report, func(w io.Writer) { printBenchAPI(w, report) }, report.errors() > 0)
}

// measureBenchAPI makes the measurements of bench --api against b.
func measureBenchAPI(o *benchOptions, b *benchServer) (*benchAPIReport, int) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		return nil, fatalf(exitSetup, "bench: %v", err)
	}
	report := &benchAPIReport{
		Host: benchHost(b.engine), Server: b.desc, URL: b.url,
		Request:  "POST " + benchAPIPath + " " + benchAPIBody,
		Request2: "POST " + benchAPIPath + " " + benchAPIEchoBody, ForkArgv: []string{bash, "-c", "true"},
		N: o.n, Warmup: o.warmup, PauseMS: benchMS(o.pause), DurationS: o.duration.Seconds(), Clients: o.clients,
	}
	if b.srv == nil {
		report.Notes = append(report.Notes, "the sandbox.Run, executor.Execute and API handler rows need the in-process server: not measured with -url")
	}
	overHTTP := b.execute([]byte(benchAPIBody), "")
	echoHTTP := b.execute([]byte(benchAPIEchoBody), "hi\n")
	forkBash, forkTrue := benchFork(bash, "-c", "true"), benchFork("/bin/true")
	forkEcho := benchForkOut([]string{bash, "-c", "echo hi"}, "hi\n")

	variants := []*benchVariant{
		{name: benchForkBash, run: forkBash},
		{name: benchForkTrue, run: forkTrue},
		{name: benchForkEcho, run: forkEcho},
	}
	if b.srv != nil {
		body := []byte(benchAPIBody)
		handler := b.srv.Handler()
		inHandler := func() (time.Duration, error) {
			req := httptest.NewRequest(http.MethodPost, benchAPIPath, bytes.NewReader(body))
			req.Host = "127.0.0.1" // a keyless server answers loopback names only
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			handler.ServeHTTP(rec, req)
			a, err := benchParseAnswer(rec.Code, rec.Body.Bytes(), "")
			if err != nil {
				return 0, err
			}
			return a.prog(), nil
		}
		// What the handler gives the executor for this body (toExecutor).
		d := b.cfg.Defaults
		xreq := func() *executor.Request {
			return &executor.Request{Language: "bash", Code: []byte("true"),
				Limits: executor.Limits{WallTime: seconds(d.TimeoutSeconds), CPUTime: seconds(d.CPUTimeSeconds),
					OutputBytes: d.OutputBytes},
				CompileLimits: executor.Limits{WallTime: seconds(d.CompileTimeoutSeconds)}}
		}
		library := func() (time.Duration, error) {
			res, err := b.x.Execute(context.Background(), xreq())
			if err != nil {
				return 0, err
			}
			if res.Status != executor.StatusCompleted || res.ExitCode != 0 || res.Stdout != "" {
				return 0, fmt.Errorf("status %s, exit code %d, stdout %.100q: %.200s%.200s", res.Status, res.ExitCode, res.Stdout, res.Stderr, res.Error)
			}
			return time.Duration(res.DurationMs * float64(time.Millisecond)), nil
		}
		// The sandbox library alone, as "bench" without --api runs it.
		sandboxed := benchSandboxed(b.engine, []string{bash, "-c", "true"}, "")
		variants = append(variants,
			&benchVariant{name: benchEngine, run: sandboxed},
			&benchVariant{name: benchLibrary, run: library},
			&benchVariant{name: benchHandler, run: inHandler})
	}
	variants = append(variants,
		&benchVariant{name: benchHTTP, run: overHTTP},
		&benchVariant{name: benchHTTPEcho, run: echoHTTP})

	// Sequential: one client, every variant once per round. The fork/exec
	// rows come first and the sandboxed rows follow in an order shuffled
	// per round, so that the one after the fork/exec gap (a cgroup v1 join
	// after a gap can wait for an RCU grace period) is any of them.
	if o.format == "text" {
		fmt.Fprintf(os.Stderr, "bench --api: %s\n", report.Server)
		fmt.Fprintf(os.Stderr, "bench --api: %d variants, %d warm-up + %d measured runs each, interleaved...\n", len(variants), o.warmup, o.n)
	}
	benchInterleave(variants, o.n, o.warmup, o.pause, 3, rand.New(rand.NewPCG(1, 2)))
	rows := map[string]*benchRow{}
	for _, v := range variants {
		report.Sequential = append(report.Sequential, benchRowOf(v))
	}
	for i := range report.Sequential {
		rows[report.Sequential[i].Name] = &report.Sequential[i]
	}
	fork, forkT, forkE := rows[benchForkBash], rows[benchForkTrue], rows[benchForkEcho]
	for i := range report.Sequential {
		r := &report.Sequential[i]
		base := fork
		if r.Name == benchForkEcho || r.Name == benchHTTPEcho {
			base = forkE
		}
		if base.Runs > 0 && r.Runs > 0 {
			r.VsFork = r.P50 / base.P50
		}
		if forkT.Runs > 0 && r.Runs > 0 {
			r.VsTrue = r.P50 / forkT.P50
		}
	}

	// Throughput: for each client count, the fork/exec rows and then the
	// API's.
	if o.format == "text" {
		fmt.Fprintf(os.Stderr, "bench --api: throughput, %d rows of %s...\n", 5*len(o.clients), o.duration)
	}
	for _, c := range o.clients {
		ft := benchLoad(benchForkBash, c, o.duration, forkBash)
		f1 := benchLoad(benchForkTrue, c, o.duration, forkTrue)
		fe := benchLoad(benchForkEcho, c, o.duration, forkEcho)
		at := benchLoad(benchHTTP, c, o.duration, overHTTP)
		ae := benchLoad(benchHTTPEcho, c, o.duration, echoHTTP)
		for _, p := range []struct{ r, base *benchLoadRow }{{&ft, &ft}, {&fe, &fe}, {&at, &ft}, {&ae, &fe}} {
			if p.base.PerSec > 0 {
				p.r.VsFork = p.r.PerSec / p.base.PerSec
			}
			if f1.PerSec > 0 {
				p.r.VsTrue = p.r.PerSec / f1.PerSec
			}
		}
		f1.VsTrue = 1
		report.Load = append(report.Load, ft, f1, fe, at, ae)
	}
	report.Connections = b.dials.Load()

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
	if b.srv != nil {
		report.CPUCovers = "getrusage(RUSAGE_SELF) + getrusage(RUSAGE_CHILDREN) of this process per run: the HTTP client, the in-process server and executor, and every reaped child (fork/exec children; sandbox inits with their programs). Not kernel threads (network namespace clean-up runs in kworkers) and not other processes. machine cpu: busy time of all CPUs from /proc/stat (10 ms ticks) over the row, per run: that plus everything else on the machine."
	} else {
		report.CPUCovers = "getrusage(RUSAGE_SELF) + getrusage(RUSAGE_CHILDREN) of this process per run: for API rows only the client, not the server or its sandboxes; for fork/exec rows the client and its children. machine cpu: busy time of all CPUs from /proc/stat (10 ms ticks) over the row, per run, server included when it runs on this machine."
	}
	return report, 0
}

// errors counts the failed runs of every row.
func (r *benchAPIReport) errors() int {
	errs := 0
	for _, row := range r.Sequential {
		errs += row.Errors
	}
	for _, row := range r.Load {
		errs += row.Errors
	}
	return errs
}

// benchInterleave runs each variant once per round: warmup rounds
// unmeasured, then n measured ones. From index fixed on, the variants run
// in an order rng shuffles each round (rng nil: always in the order given).
// It records each run's latency, the CPU time of this process and its
// reaped children, and the busy time of the machine's CPUs.
func benchInterleave(variants []*benchVariant, n, warmup int, pause time.Duration, fixed int, rng *rand.Rand) {
	order := slices.Clone(variants)
	for round := 0; round < warmup+n; round++ {
		measured := round >= warmup
		if rng != nil && fixed < len(order) {
			s := order[fixed:]
			rng.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
		}
		for _, v := range order {
			if measured && pause > 0 && !v.noPause {
				time.Sleep(pause)
			}
			busy0, ok0 := benchBusy()
			cpu0 := benchCPU()
			start := time.Now()
			prog, err := v.run()
			elapsed := time.Since(start)
			cpu := benchCPU() - cpu0
			busy1, ok1 := benchBusy()
			if measured {
				v.cpu += cpu
				if ok0 && ok1 {
					v.busy += busy1 - busy0
					v.busyRuns++
				}
				v.record(elapsed, prog, err)
			}
		}
	}
}

// benchRowOf summarises a variant measured by benchInterleave.
func benchRowOf(v *benchVariant) benchRow {
	row := benchSummary(v)
	if runs := len(v.lat) + v.errs; runs > 0 {
		row.CPUms = benchMS(v.cpu) / float64(runs)
	}
	if v.busyRuns > 0 {
		row.MachineCPUms = benchMS(v.busy) / float64(v.busyRuns)
	}
	return row
}

// benchFork runs argv with os/exec, as the acceptance check's load
// generator does (environment inherited, standard streams /dev/null).
func benchFork(argv ...string) func() (time.Duration, error) {
	return func() (time.Duration, error) {
		return 0, exec.Command(argv[0], argv[1:]...).Run()
	}
}

// benchForkOut is benchFork with standard output read and checked: it
// must be want.
func benchForkOut(argv []string, want string) func() (time.Duration, error) {
	return func() (time.Duration, error) {
		var stdout bytes.Buffer
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdout = &stdout
		if err := cmd.Run(); err != nil {
			return 0, err
		}
		if stdout.String() != want {
			return 0, fmt.Errorf("stdout %.100q, want %q", stdout.Bytes(), want)
		}
		return 0, nil
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

// printBenchRows prints sequential rows with their CPU per run and their
// ratios; withDelta adds the p50 difference from the unsandboxed row.
func printBenchRows(w io.Writer, rows []benchRow, withDelta bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "variant\truns\terrors\tp50 ms\tp95 ms\tp99 ms\tmean ms\truns/s\tcpu ms/run\tmachine cpu ms/run\tprogram p50 ms\t"
	if withDelta {
		head += "p50 - plain ms\t"
	} else {
		head += "vs fork p50\tvs /bin/true p50\t"
	}
	fmt.Fprintln(tw, head)
	for _, row := range rows {
		if row.Runs == 0 {
			fmt.Fprintf(tw, "%s\t%d\t%d\t-\t-\t-\t-\t-\t-\t-\t-\t-\t", row.Name, row.Runs, row.Errors)
			if !withDelta {
				fmt.Fprint(tw, "-\t")
			}
			fmt.Fprintln(tw)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.0f\t%.2f\t%s\t%s\t", row.Name, row.Runs, row.Errors, row.P50, row.P95, row.P99, row.Mean, row.PerSec, row.CPUms, benchCell(row.MachineCPUms), benchCell(row.ProgP50))
		if withDelta {
			d := "-"
			if row.DeltaMS != 0 {
				d = fmt.Sprintf("%+.2f", row.DeltaMS)
			}
			fmt.Fprintf(tw, "%s\t\n", d)
		} else {
			fmt.Fprintf(tw, "%s\t%s\t\n", benchRatio(row.VsFork), benchRatio(row.VsTrue))
		}
	}
	tw.Flush()
	printBenchErrors(w, rows)
}

// benchRatio is a ratio cell: "2.50x", or "-" when not measured.
func benchRatio(v float64) string {
	if v > 0 {
		return fmt.Sprintf("%.2fx", v)
	}
	return "-"
}

func printBenchAPI(w io.Writer, r *benchAPIReport) {
	printBenchHost(w, r.Host)
	fmt.Fprintf(w, "server: %s\n", r.Server)
	fmt.Fprintf(w, "requests: %s and %s (keep-alive); baselines: %s, bash -c 'echo hi', /bin/true\n", r.Request, r.Request2, strings.Join(r.ForkArgv, " "))
	fmt.Fprintf(w, "sequential, 1 client: %d measured (+%d warm-up) runs of each variant, interleaved, pause %gms\n", r.N, r.Warmup, r.PauseMS)
	fmt.Fprintf(w, "vs fork p50: over fork/exec bash -c true, or for the echo rows over fork/exec bash -c 'echo hi'\n\n")
	printBenchRows(w, r.Sequential, false)
	fmt.Fprintf(w, "\nthroughput: each row runs its clients back to back for %gs; vs fork: over fork/exec of the same bash program with as many clients\n\n", r.DurationS)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "variant\tclients\truns\terrors\truns/s\tp50 ms\tp95 ms\tp99 ms\tcpu ms/run\tmachine cpu ms/run\tvs fork runs/s\tvs /bin/true runs/s\t")
	for _, row := range r.Load {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.0f\t%.2f\t%.2f\t%.2f\t%.2f\t%s\t%s\t%s\t\n", row.Name, row.Clients, row.Runs, row.Errors, row.PerSec, row.P50, row.P95, row.P99, row.CPUms, benchCell(row.MachineCPUms), benchCell(row.VsFork), benchCell(row.VsTrue))
	}
	tw.Flush()
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
