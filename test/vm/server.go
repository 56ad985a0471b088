package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	readyTimeout    = 4 * time.Minute // the server prewarms a sandbox per language first
	shutdownTimeout = 2 * time.Minute // its grace period is 30 s; nothing runs by then
	requestTimeout  = 5 * time.Minute
)

// server is a running sandbox-run serve.
type server struct {
	cmd  *exec.Cmd
	unit *unit
	url  string
	log  *syncBuffer
	done chan struct{} // closed when it has exited
	err  error         // its exit, once done
	http *http.Client
}

// syncBuffer is the server's output, written by the exec package's copier
// and read by the checks.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func (sv *server) exited() bool {
	select {
	case <-sv.done:
		return true
	default:
		return false
	}
}

// logTail is the end of the server's log, for failure messages.
func (sv *server) logTail() string {
	l := strings.TrimSpace(sv.log.String())
	lines := strings.Split(l, "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return "server log (last lines):\n" + strings.Join(lines, "\n")
}

// kill ends the server and its process group hard (after a failed check).
func (sv *server) kill() {
	if sv.cmd.Process != nil && !sv.exited() {
		syscall.Kill(-sv.cmd.Process.Pid, syscall.SIGKILL)
		<-sv.done
	}
}

func (d *driver) startServer() (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	u, err := d.newUnit("serve.service", "sandbox-run serve --addr "+addr)
	if err != nil {
		return nil, err
	}
	sv := &server{unit: u, url: "http://" + addr, log: &syncBuffer{}, done: make(chan struct{}),
		http: &http.Client{Timeout: requestTimeout}}
	sv.cmd = d.command(u, "serve", "--addr", addr)
	sv.cmd.Stdout, sv.cmd.Stderr = sv.log, sv.log
	if err := sv.cmd.Start(); err != nil {
		u.remove()
		return nil, err
	}
	go func() { sv.err = sv.cmd.Wait(); close(sv.done) }()
	info("sandbox-run serve --addr %s: pid %d", addr, sv.cmd.Process.Pid)

	start := time.Now()
	for {
		if sv.exited() {
			return sv, fmt.Errorf("the server exited before it was ready (%v)\n%s", sv.err, sv.logTail())
		}
		if time.Since(start) > readyTimeout {
			return sv, fmt.Errorf("not ready within %s\n%s", readyTimeout, sv.logTail())
		}
		code, body, err := sv.get("/readyz")
		if err == nil && code == http.StatusOK {
			info("ready after %s: %s", time.Since(start).Round(100*time.Millisecond), strings.TrimSpace(string(body)))
			return sv, nil
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (sv *server) get(path string) (int, []byte, error) {
	resp, err := sv.http.Get(sv.url + path)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// post sends body as JSON to path.
func (sv *server) post(path string, body any, header map[string]string) (*http.Response, []byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, nil, err
	}
	req, err := http.NewRequest(http.MethodPost, sv.url+path, bytes.NewReader(b))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := sv.http.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp, out, err
}

// execute posts one execution and decodes its result (HTTP 200 expected).
func (sv *server) execute(req map[string]any) (*result, error) {
	resp, body, err := sv.post("/api/sandbox/execute", req, nil)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, clip(string(body)))
	}
	var r result
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("not a JSON result (%v): %s", err, clip(string(body)))
	}
	return &r, nil
}

func (d *driver) serverChecks() {
	s := d.s
	var sv *server
	started := false
	s.run("server: starts and becomes ready", func() error {
		var err error
		sv, err = d.startServer()
		started = err == nil
		return err
	})
	if !started {
		if sv == nil {
			s.skip("server: the other server checks", "the server did not start")
			return
		}
		sv.kill()
		s.skip("server: the other server checks", "the server did not start")
		s.run("server: nothing left behind after it was killed", func() error { return d.checkUnits([]*unit{sv.unit}) })
		return
	}

	// Executions the server ran, by language and status, for /metrics.
	ran := map[[2]string]int{}
	var limits []string

	s.run("server: /healthz and /api/sandbox/languages", func() error { return d.checkLanguages(sv) })
	seen := map[string]int{}
	s.run(fmt.Sprintf("server: %d concurrent executions, all exact", d.cfg.concurrency), func() error {
		return d.checkConcurrent(sv, ran, seen)
	})
	s.run("server: the engine's cgroups are in the layout's hierarchies and held the sandboxes", func() error {
		return d.checkEngineCgroups(sv.unit, seen)
	})
	s.run("server: limits (wall time, memory)", func() error { return d.checkServerLimits(sv, ran, &limits) })
	s.run("server: an unknown language is refused with 400", func() error {
		resp, body, err := sv.post("/api/sandbox/execute", map[string]any{"language": "klingon", "code": "x"}, nil)
		if err != nil {
			return err
		}
		var p problems
		p.eq("HTTP status", resp.StatusCode, http.StatusBadRequest)
		p.contains("error", string(body), "klingon")
		return p.err()
	})
	if d.has("python") {
		s.run("server: streamed execution (text/event-stream)", func() error { return d.checkStream(sv, ran) })
	} else {
		s.skip("server: streamed execution (text/event-stream)", "python is not among the languages to check")
	}
	s.run("server: /metrics and /readyz agree with what ran", func() error { return d.checkMetrics(sv, ran, limits) })
	s.run("server: SIGTERM during an execution: it completes, then exit status 0", func() error { return d.checkShutdown(sv) })
	s.run("server: nothing left behind (processes, cgroups, mounts)", func() error { return d.checkUnits([]*unit{sv.unit}) })
}

func (d *driver) checkLanguages(sv *server) error {
	var p problems
	code, body, err := sv.get("/healthz")
	if err != nil {
		return err
	}
	p.eq("/healthz status", code, http.StatusOK)
	code, body, err = sv.get("/api/sandbox/languages")
	if err != nil {
		return err
	}
	p.eq("/api/sandbox/languages status", code, http.StatusOK)
	var langs []struct {
		Name     string `json:"name"`
		Version  string `json:"version"`
		Compiled bool   `json:"compiled"`
	}
	if err := json.Unmarshal(body, &langs); err != nil {
		return fmt.Errorf("languages: %v: %s", err, clip(string(body)))
	}
	have := map[string]bool{}
	var list []string
	for _, l := range langs {
		have[l.Name] = true
		list = append(list, l.Name+" "+l.Version)
	}
	info("languages: %s", strings.Join(list, ", "))
	for _, l := range d.cfg.languages {
		if !have[l] {
			p.addf("language %s is not listed", l)
		}
	}
	return p.err()
}

// checkConcurrent sends the requests at once: the square program of each
// language in turn, each with its own input, and checks every answer.
// seen gets the most sandbox cgroups seen in each engine parent meanwhile.
func (d *driver) checkConcurrent(sv *server, ran map[[2]string]int, seen map[string]int) error {
	var langs []string
	for _, l := range []string{"python", "bash", "c", "javascript"} {
		if d.has(l) {
			langs = append(langs, l)
		}
	}
	if len(langs) == 0 {
		return fmt.Errorf("none of python, bash, c, javascript is among the languages to check")
	}
	n := d.cfg.concurrency
	type answer struct {
		r    *result
		err  error
		took time.Duration
	}
	answers := make([]answer, n)
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lang := langs[i%len(langs)]
			<-gate
			start := time.Now()
			r, err := sv.execute(map[string]any{"language": lang, "code": square[lang],
				"input_data": fmt.Sprintf("req%d %d", i, 100+i), "timeout_seconds": 60})
			answers[i] = answer{r, err, time.Since(start)}
		}()
	}
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			for dir, n := range sandboxCount(sv.unit.engineParents()) {
				seen[dir] = max(seen[dir], n)
			}
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	close(gate)
	wg.Wait()
	close(stop)
	<-sampled
	var p problems
	for i, a := range answers {
		lang := langs[i%len(langs)]
		if a.err != nil {
			p.addf("request %d (%s): %v", i, lang, a.err)
			continue
		}
		ran[[2]string{lang, a.r.Status}]++
		info("request %d (%s) answered in %s: %s", i, lang, a.took.Round(10*time.Millisecond), a.r.summary())
		p.eq(fmt.Sprintf("request %d (%s) status", i, lang), a.r.Status, "completed")
		p.eq(fmt.Sprintf("request %d (%s) exit_code", i, lang), a.r.ExitCode, 0)
		p.eq(fmt.Sprintf("request %d (%s) stdout", i, lang), a.r.Stdout, squareOut(fmt.Sprintf("req%d", i), 100+i))
		p.eq(fmt.Sprintf("request %d (%s) stderr", i, lang), a.r.Stderr, "")
		p.eq(fmt.Sprintf("request %d language", i), a.r.Language, lang)
	}
	return p.err()
}

func (d *driver) checkServerLimits(sv *server, ran map[[2]string]int, limits *[]string) error {
	type limitReq struct {
		lang   string
		req    map[string]any
		status string
		limit  string
		stdout string
	}
	var cases []limitReq
	if d.has("bash") {
		cases = append(cases, limitReq{"bash", map[string]any{"language": "bash", "code": "echo start; sleep 60; echo end",
			"timeout_seconds": 2}, "timeout", "wall_time", "start\n"})
	}
	if d.has("python") {
		cases = append(cases, limitReq{"python", map[string]any{"language": "python",
			"code": "x = b'x' * (200 << 20)\nprint('allocated', len(x))\n", "max_memory_mb": 64}, "error_runtime", "memory", ""})
	}
	if len(cases) == 0 {
		return fmt.Errorf("needs bash or python")
	}
	var p problems
	for _, c := range cases {
		r, err := sv.execute(c.req)
		if err != nil {
			p.addf("%s limit: %v", c.limit, err)
			continue
		}
		info("%s limit (%s): %s", c.limit, c.lang, r.summary())
		ran[[2]string{c.lang, r.Status}]++
		*limits = append(*limits, c.limit)
		p.eq(c.limit+": status", r.Status, c.status)
		p.eq(c.limit+": limit_reason", r.LimitReason, c.limit)
		p.eq(c.limit+": stdout", r.Stdout, c.stdout)
	}
	return p.err()
}

// sseEvent is one Server-Sent Event.
type sseEvent struct{ name, data string }

func (d *driver) checkStream(sv *server, ran map[[2]string]int) error {
	resp, body, err := sv.post("/api/sandbox/execute", map[string]any{"language": "python",
		"code": "import time\nprint('first', flush=True)\ntime.sleep(0.5)\nprint('second')\n"},
		map[string]string{"Accept": "text/event-stream"})
	if err != nil {
		return err
	}
	var p problems
	p.eq("HTTP status", resp.StatusCode, http.StatusOK)
	p.contains("Content-Type", resp.Header.Get("Content-Type"), "text/event-stream")
	var events []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.name != "" || cur.data != "" {
				events = append(events, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "event:"):
			cur.name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			cur.data += strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")
		}
	}
	if cur.name != "" {
		events = append(events, cur)
	}
	var names []string
	var streamed string
	var final *result
	for _, e := range events {
		names = append(names, e.name)
		switch e.name {
		case "stdout":
			var c struct {
				Data string `json:"data"`
			}
			if err := json.Unmarshal([]byte(e.data), &c); err != nil {
				p.addf("stdout event %q: %v", e.data, err)
			}
			streamed += c.Data
		case "result":
			final = &result{}
			if err := json.Unmarshal([]byte(e.data), final); err != nil {
				p.addf("result event: %v", err)
			}
		}
	}
	info("events: %s", strings.Join(names, " "))
	p.eq("stdout of the stdout events", streamed, "first\nsecond\n")
	if len(names) == 0 || names[len(names)-1] != "result" {
		p.addf("the last event is not the result: %v", names)
	}
	if final != nil {
		ran[[2]string{"python", final.Status}]++
		p.eq("result status", final.Status, "completed")
		p.eq("result stdout", final.Stdout, "first\nsecond\n")
	}
	return p.err()
}

// metric is one sample of the Prometheus text format.
type metric struct {
	name   string
	labels map[string]string
	value  float64
}

func parseMetrics(text string) []metric {
	var out []metric
	for _, line := range strings.Split(text, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		m := metric{name: line[:sp], labels: map[string]string{}, value: v}
		if i := strings.IndexByte(m.name, '{'); i >= 0 {
			for _, kv := range strings.Split(strings.TrimSuffix(m.name[i+1:], "}"), ",") {
				if k, v, ok := strings.Cut(kv, "="); ok {
					m.labels[k] = strings.Trim(v, `"`)
				}
			}
			m.name = m.name[:i]
		}
		out = append(out, m)
	}
	return out
}

func (d *driver) checkMetrics(sv *server, ran map[[2]string]int, limits []string) error {
	var p problems
	code, body, err := sv.get("/metrics")
	if err != nil {
		return err
	}
	p.eq("/metrics status", code, http.StatusOK)
	got := map[[2]string]int{}
	kills := map[string]float64{}
	found := map[string]bool{}
	for _, m := range parseMetrics(string(body)) {
		found[m.name] = true
		switch m.name {
		case "sandbox_run_executions_total":
			got[[2]string{m.labels["language"], m.labels["status"]}] += int(m.value)
		case "sandbox_run_limit_kills_total":
			kills[m.labels["limit"]] += m.value
		case "sandbox_run_executions_in_flight", "sandbox_run_queue_depth":
			p.eq(m.name, m.value, 0.0)
		}
	}
	for _, n := range []string{"sandbox_run_executions_total", "sandbox_run_executions_in_flight", "sandbox_run_queue_depth", "sandbox_run_execution_duration_seconds_count"} {
		if !found[n] {
			p.addf("/metrics has no %s", n)
		}
	}
	var keys [][2]string
	for k := range ran {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := ran[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+keys[i][1] < keys[j][0]+keys[j][1] })
	for _, k := range keys {
		info("executions_total{language=%s,status=%s} = %d (sent %d)", k[0], k[1], got[k], ran[k])
		p.eq(fmt.Sprintf("sandbox_run_executions_total{language=%q,status=%q}", k[0], k[1]), got[k], ran[k])
	}
	want := map[string]float64{}
	for _, l := range limits {
		want[l]++
	}
	for l, n := range want {
		if kills[l] < n {
			p.addf("sandbox_run_limit_kills_total{limit=%q} = %v, want at least %v", l, kills[l], n)
		}
	}

	code, body, err = sv.get("/readyz")
	if err != nil {
		return err
	}
	p.eq("/readyz status", code, http.StatusOK)
	var ready struct {
		Status   string `json:"status"`
		InFlight *int   `json:"in_flight"`
		Queued   *int   `json:"queued"`
		Workers  int    `json:"workers"`
	}
	if err := json.Unmarshal(body, &ready); err != nil {
		p.addf("/readyz: %v: %s", err, body)
	} else {
		info("/readyz: %s", strings.TrimSpace(string(body)))
		p.eq("/readyz status field", ready.Status, "ready")
		if ready.InFlight == nil || *ready.InFlight != 0 || ready.Queued == nil || *ready.Queued != 0 {
			p.addf("/readyz: in_flight and queued should be 0: %s", body)
		}
		if ready.Workers < 1 {
			p.addf("/readyz: workers %d", ready.Workers)
		}
	}
	return p.err()
}

// checkShutdown sends SIGTERM while an execution runs: that execution
// still completes (the grace period), and then the server exits 0.
func (d *driver) checkShutdown(sv *server) error {
	var p problems
	type answer struct {
		r   *result
		err error
	}
	inFlight := make(chan answer, 1)
	if d.has("bash") {
		go func() {
			r, err := sv.execute(map[string]any{"language": "bash", "code": "sleep 3; echo done", "timeout_seconds": 120})
			inFlight <- answer{r, err}
		}()
		// SIGTERM once the server counts it as running.
		deadline := time.Now().Add(time.Minute)
		for {
			_, body, err := sv.get("/readyz")
			var ready struct {
				InFlight int `json:"in_flight"`
			}
			if err == nil && json.Unmarshal(body, &ready) == nil && ready.InFlight > 0 {
				break
			}
			if time.Now().After(deadline) {
				p.addf("the execution never showed in /readyz's in_flight")
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	} else {
		inFlight <- answer{}
	}
	if err := sv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-sv.done:
	case <-time.After(shutdownTimeout):
		sv.kill()
		return fmt.Errorf("still running %s after SIGTERM (killed)\n%s", shutdownTimeout, sv.logTail())
	}
	if a := <-inFlight; a.err != nil {
		p.addf("the execution running at SIGTERM: %v", a.err)
	} else if a.r != nil {
		info("the execution running at SIGTERM: %s", a.r.summary())
		p.eq("status of the execution running at SIGTERM", a.r.Status, "completed")
		p.eq("its stdout", a.r.Stdout, "done\n")
	}
	if sv.err != nil {
		p.addf("exit: %v", sv.err)
	}
	log := sv.log.String()
	p.contains("server log", log, "shutting down")
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, `"level":"ERROR"`) {
			p.addf("error in the server log: %s", line)
		}
	}
	if _, _, err := sv.get("/readyz"); err == nil {
		p.addf("something still answers on %s after the exit", sv.url)
	}
	if len(p) > 0 {
		p.addf("%s", sv.logTail())
	}
	return p.err()
}
