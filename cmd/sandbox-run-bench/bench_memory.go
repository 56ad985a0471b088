//go:build unix

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/api"
)

// The memory part of bench --suite: the resident set of a "sandbox-run
// serve" process started for it (this binary, on 127.0.0.1 with a port of
// its choosing, one worker, a private data dir), idle after a few runs and
// with -jobs async executions queued. A first async job, "sleep 300",
// holds the only worker so that the others stay queued; the server is
// stopped (SIGTERM, its PID) when the measurement is over, and the queued
// jobs go with its data dir.

// benchRSS is a process's memory from /proc/PID/status, in KiB.
type benchRSS struct {
	RSS   int64 `json:"rss_kib"`
	Anon  int64 `json:"rss_anon_kib"`
	File  int64 `json:"rss_file_kib"`
	Shmem int64 `json:"rss_shmem_kib"`
	HWM   int64 `json:"vm_hwm_kib"`
}

func (m benchRSS) String() string {
	return fmt.Sprintf("%.1f MB (anon %.1f, file %.1f, shmem %.1f)", benchMB(m.RSS), benchMB(m.Anon), benchMB(m.File), benchMB(m.Shmem))
}

// benchMB is KiB in MB (MiB, as /proc counts).
func benchMB(kib int64) float64 { return float64(kib) / 1024 }

// benchReadRSS reads the memory of process pid.
func benchReadRSS(pid int) (benchRSS, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return benchRSS{}, err
	}
	return benchParseStatus(string(b)), nil
}

// benchParseStatus takes the memory fields of a /proc/PID/status.
func benchParseStatus(status string) benchRSS {
	var m benchRSS
	for _, line := range strings.Split(status, "\n") {
		k, v, _ := strings.Cut(line, ":")
		n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			m.RSS = n
		case "RssAnon":
			m.Anon = n
		case "RssFile":
			m.File = n
		case "RssShmem":
			m.Shmem = n
		case "VmHWM":
			m.HWM = n
		}
	}
	return m
}

// benchTree is the memory of a process's descendants (sandbox inits and
// their programs, a pool of ready sandboxes): how many, and the sum of
// their VmRSS in KiB, which counts pages they share once for each.
type benchTree struct {
	Procs int   `json:"processes"`
	RSS   int64 `json:"rss_sum_kib"`
}

// benchDescendants sums the VmRSS of pid's descendants.
func benchDescendants(pid int) benchTree {
	entries, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		_, rest, ok := strings.Cut(string(b), ") ")
		f := strings.Fields(rest)
		if !ok || len(f) < 2 {
			continue
		}
		if pp, err := strconv.Atoi(f[1]); err == nil {
			parent[p] = pp
		}
	}
	var t benchTree
	for p := range parent {
		for a, hops := parent[p], 0; a > 1 && hops < 64; a, hops = parent[a], hops+1 {
			if a == pid {
				if m, err := benchReadRSS(p); err == nil {
					t.Procs++
					t.RSS += m.RSS
				}
				break
			}
		}
	}
	return t
}

type benchMemReport struct {
	Command  []string `json:"command"`
	Workers  int      `json:"workers"`
	Jobs     int      `json:"jobs"`
	WarmRuns int      `json:"warm_runs"`
	// Start is the RSS once the server answers /readyz; Idle after the
	// warm runs and IdleWait without requests; Queued once every job was
	// submitted and a second has passed; PeakKiB is the highest RSS
	// sampled (every 10 ms) from the first submission to then.
	Start     benchRSS `json:"after_start"`
	Idle      benchRSS `json:"idle"`
	IdleWaitS float64  `json:"idle_wait_seconds"`
	Queued    benchRSS `json:"queued"`
	PeakKiB   int64    `json:"peak_rss_kib"`
	// The server's descendants at the idle and queued readings.
	IdleTree   benchTree `json:"idle_descendants"`
	QueuedTree benchTree `json:"queued_descendants"`
	// Accepted jobs answered 202; Refused did not.
	Accepted   int     `json:"accepted"`
	Refused    int     `json:"refused"`
	FirstError string  `json:"first_error,omitempty"`
	SubmitS    float64 `json:"submit_seconds"`
	// LastStatus is what the server said of the last job submitted, once
	// all were.
	LastStatus string        `json:"last_job_status,omitempty"`
	PerJobKiB  float64       `json:"kib_per_queued_job"`
	Error      string        `json:"error,omitempty"`
	Targets    []benchTarget `json:"targets"`
	ServerLog  []string      `json:"server_log,omitempty"` // its last lines, when something failed
}

const (
	benchIdleTargetMB   = 40
	benchQueuedTargetMB = 200
)

func measureBenchMemory(o *benchOptions) *benchMemReport {
	rep := &benchMemReport{Workers: 1, Jobs: o.jobs, IdleWaitS: 2}
	t1 := benchTarget{Target: fmt.Sprintf("server RSS idle below %d MB", benchIdleTargetMB), Limit: benchIdleTargetMB, Unit: "MB"}
	t2 := benchTarget{Target: fmt.Sprintf("server RSS with %d async executions queued below %d MB (peak)", o.jobs, benchQueuedTargetMB), Limit: benchQueuedTargetMB, Unit: "MB"}
	defer func() {
		if rep.Idle.RSS > 0 {
			v := benchMB(rep.Idle.RSS)
			t1.Known, t1.Value, t1.Met = true, v, v < benchIdleTargetMB
		}
		if rep.PeakKiB > 0 {
			v := benchMB(rep.PeakKiB)
			t2.Known, t2.Value, t2.Met = true, v, v < benchQueuedTargetMB && rep.Accepted == o.jobs
		}
		rep.Targets = []benchTarget{t1, t2}
	}()
	srv, err := benchStartServe(o.jobs)
	if srv != nil {
		defer srv.stop()
		rep.Command = srv.argv
	}
	if err != nil {
		rep.Error = err.Error()
		if srv != nil {
			rep.ServerLog = srv.log.lines()
		}
		return rep
	}
	pid := srv.cmd.Process.Pid
	fail := func(format string, a ...any) *benchMemReport {
		rep.Error = fmt.Sprintf(format, a...)
		rep.ServerLog = srv.log.lines()
		return rep
	}
	if rep.Start, err = benchReadRSS(pid); err != nil {
		return fail("%v", err)
	}

	// A few runs, synchronous and async, then a quiet spell.
	bash := []byte(benchAPIBody)
	for i := range 10 {
		if _, err := srv.answer(bash, ""); err != nil {
			return fail("warm run %d: %v", i, err)
		}
		rep.WarmRuns++
	}
	if _, err := srv.answer([]byte(`{"language":"python","code":"print(\"hello\")"}`), "hello\n"); err != nil {
		return fail("warm python run: %v", err)
	}
	rep.WarmRuns++
	for i := range 2 {
		id, err := srv.submit([]byte(`{"language":"bash","code":"echo hi","async":true}`))
		if err == nil {
			err = srv.waitStatus(id, "completed", 60*time.Second)
		}
		if err != nil {
			return fail("warm async run %d: %v", i, err)
		}
		rep.WarmRuns++
	}
	time.Sleep(time.Duration(rep.IdleWaitS * float64(time.Second)))
	if rep.Idle, err = benchReadRSS(pid); err != nil {
		return fail("%v", err)
	}
	rep.IdleTree = benchDescendants(pid)

	// The worker busy, then the jobs.
	blocker, err := srv.submit([]byte(`{"language":"bash","code":"sleep 300","timeout_seconds":300,"async":true}`))
	if err == nil {
		err = srv.waitStatus(blocker, "running", 30*time.Second)
	}
	if err != nil {
		return fail("the job that holds the worker: %v", err)
	}
	var peak atomic.Int64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			if m, err := benchReadRSS(pid); err == nil && m.RSS > peak.Load() {
				peak.Store(m.RSS)
			}
			select {
			case <-t.C:
			case <-stopSampling:
				return
			}
		}
	}()
	start := time.Now()
	var (
		mu   sync.Mutex
		last string
		wg   sync.WaitGroup
		next atomic.Int64
	)
	for range 4 {
		wg.Go(func() {
			for {
				i := int(next.Add(1))
				if i > o.jobs {
					return
				}
				id, err := srv.submit([]byte(fmt.Sprintf(`{"language":"bash","code":"echo job %d","async":true}`, i)))
				mu.Lock()
				if err != nil {
					rep.Refused++
					if rep.FirstError == "" {
						rep.FirstError = err.Error()
					}
				} else {
					rep.Accepted++
					if i == o.jobs || last == "" {
						last = id
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	rep.SubmitS = time.Since(start).Seconds()
	time.Sleep(time.Second)
	rep.Queued, err = benchReadRSS(pid)
	rep.QueuedTree = benchDescendants(pid)
	close(stopSampling)
	<-sampled
	if err != nil {
		return fail("%v", err)
	}
	rep.PeakKiB = max(peak.Load(), rep.Queued.RSS)
	if last != "" {
		if st, err := srv.status(last); err == nil {
			rep.LastStatus = st
		}
	}
	if rep.Accepted > 0 {
		rep.PerJobKiB = float64(rep.Queued.RSS-rep.Idle.RSS) / float64(rep.Accepted)
	}
	return rep
}

// benchServe is a "sandbox-run serve" process this bench started.
type benchServe struct {
	cmd    *exec.Cmd
	argv   []string
	dir    string
	base   string
	client *http.Client
	log    *benchLogTail
	exited chan struct{}
}

// benchStartServe starts the sandbox-run binary as "serve" on 127.0.0.1 with one
// worker, a data dir of its own (toolchain caches shared with the usual
// data dir), room for jobs queued async executions and a 2 s shutdown
// grace, and waits until it is ready.
func benchStartServe(jobs int) (*benchServe, error) {
	exe, err := productBinary()
	if err != nil {
		return nil, err
	}
	cfg, err := api.LoadConfig("", os.Getenv)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "sandbox-run-bench-mem-")
	if err != nil {
		return nil, err
	}
	s := &benchServe{dir: dir, log: &benchLogTail{}, exited: make(chan struct{})}
	data, tmp := filepath.Join(dir, "data"), filepath.Join(dir, "tmp")
	cache := filepath.Join(cfg.DataDir, "cache")
	for _, d := range []string{data, tmp, cache} {
		if err == nil {
			err = os.MkdirAll(d, 0o755)
		}
	}
	if err == nil {
		err = os.Symlink(cache, filepath.Join(data, "cache"))
	}
	conf := filepath.Join(dir, "config.yaml")
	if err == nil {
		err = os.WriteFile(conf, fmt.Appendf(nil, "shutdown_grace_seconds: 2\nasync_queue: %d\n", jobs), 0o644)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s.argv = []string{exe, "serve", "--config", conf, "--addr", "127.0.0.1:0", "--workers", "1", "--data-dir", data}
	s.cmd = exec.Command(s.argv[0], s.argv[1:]...)
	// SANDBOX_RUN_CLI makes a test binary run as the CLI (main_test.go).
	s.cmd.Env = append(os.Environ(), "SANDBOX_RUN_CLI=1", "TMPDIR="+tmp)
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	go func() {
		s.cmd.Wait()
		close(s.exited)
	}()
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			s.log.add(string(line))
			var l struct{ Msg, Addr string }
			if json.Unmarshal(line, &l) == nil && l.Msg == "serving" && l.Addr != "" {
				select {
				case addr <- l.Addr:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case a := <-addr:
		s.base = "http://" + a
	case <-s.exited:
		return s, fmt.Errorf("serve exited before it served")
	case <-time.After(60 * time.Second):
		return s, fmt.Errorf("serve did not say where it serves within 60 s")
	}
	s.client = &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 8, DisableCompression: true}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, _, err := s.do(http.MethodGet, "/readyz", nil)
		if err == nil && code == http.StatusOK {
			return s, nil
		}
		if time.Now().After(deadline) {
			return s, fmt.Errorf("/readyz: HTTP %d, %v", code, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop ends the server with SIGTERM, or after 30 s SIGKILL, by its PID,
// and removes its directory.
func (s *benchServe) stop() {
	if s.client != nil {
		s.client.CloseIdleConnections()
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
	os.RemoveAll(s.dir)
}

func (s *benchServe) do(method, path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequest(method, s.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// answer runs body synchronously and checks its answer.
func (s *benchServe) answer(body []byte, want string) (*benchAnswer, error) {
	code, b, err := s.do(http.MethodPost, benchAPIPath, body)
	if err != nil {
		return nil, err
	}
	return benchParseAnswer(code, b, want)
}

// submit queues an async execution and returns its id.
func (s *benchServe) submit(body []byte) (string, error) {
	code, b, err := s.do(http.MethodPost, benchAPIPath, body)
	if err != nil {
		return "", err
	}
	var st benchJobStatus
	if json.Unmarshal(b, &st) != nil || code != http.StatusAccepted || st.ExecutionID == "" {
		return "", fmt.Errorf("HTTP %d: %.200s", code, bytes.TrimSpace(b))
	}
	return st.ExecutionID, nil
}

// benchJobStatus is what bench reads of an async execution's status.
type benchJobStatus struct {
	ExecutionID   string `json:"execution_id"`
	Status        string `json:"status"`
	QueuePosition int    `json:"queue_position"`
}

// status is an async execution's status, with its queue position.
func (s *benchServe) status(id string) (string, error) {
	code, b, err := s.do(http.MethodGet, "/api/sandbox/executions/"+id, nil)
	if err != nil {
		return "", err
	}
	var st benchJobStatus
	if json.Unmarshal(b, &st) != nil || code != http.StatusOK {
		return "", fmt.Errorf("HTTP %d: %.200s", code, bytes.TrimSpace(b))
	}
	if st.QueuePosition > 0 {
		return fmt.Sprintf("%s, position %d", st.Status, st.QueuePosition), nil
	}
	return st.Status, nil
}

// waitStatus polls an async execution until its status is want.
func (s *benchServe) waitStatus(id, want string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		st, err := s.status(id)
		if err != nil {
			return err
		}
		if st == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("execution %s: status %q after %s, want %q", id, st, d, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// benchLogTail keeps the last lines of a log.
type benchLogTail struct {
	mu  sync.Mutex
	buf []string
}

func (l *benchLogTail) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) == 20 {
		l.buf = l.buf[1:]
	}
	l.buf = append(l.buf, line)
}

func (l *benchLogTail) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.buf...)
}

func printBenchMemory(w io.Writer, m *benchMemReport) {
	fmt.Fprintf(w, "server: %s\n", strings.Join(m.Command, " "))
	line := func(what, format string, a ...any) {
		fmt.Fprintf(w, "  %-40s "+format+"\n", append([]any{what}, a...)...)
	}
	if m.Start.RSS > 0 {
		line("after start (answers /readyz):", "%s", m.Start)
	}
	if m.Idle.RSS > 0 {
		line(fmt.Sprintf("idle, after %d runs and %.0f s:", m.WarmRuns, m.IdleWaitS), "%s", m.Idle)
		line("  its descendant processes:", "%d, %.1f MB (sum of their VmRSS)", m.IdleTree.Procs, benchMB(m.IdleTree.RSS))
	}
	if m.Queued.RSS > 0 {
		line(fmt.Sprintf("%d async executions queued:", m.Accepted), "%s", m.Queued)
		line("  its descendant processes:", "%d, %.1f MB (sum of their VmRSS; the sleep 300 job's sandbox)", m.QueuedTree.Procs, benchMB(m.QueuedTree.RSS))
		line("peak, submitting and queued:", "%.1f MB (VmHWM since start %.1f MB)", benchMB(m.PeakKiB), benchMB(m.Queued.HWM))
		line("per queued execution:", "%.1f KB (queued RSS - idle RSS)", m.PerJobKiB)
		line("submitted (4 clients):", "in %.1f s, %d accepted, %d refused; the last one: %s", m.SubmitS, m.Accepted, m.Refused, m.LastStatus)
	}
	if m.FirstError != "" {
		fmt.Fprintf(w, "first refusal: %s\n", m.FirstError)
	}
	if m.Error != "" {
		fmt.Fprintf(w, "error: %s\n", m.Error)
		for _, l := range m.ServerLog {
			fmt.Fprintln(w, "  server:", l)
		}
	}
}
