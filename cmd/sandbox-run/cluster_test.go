package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/testkit/natstest"
	"github.com/sandbox-run/sandbox-run/pkg/client"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// A cluster as users run one: a real 3-node NATS JetStream cluster, API
// nodes (`serve --nats --role api`) and workers (`worker --nats`), each a
// process of its own, driven over HTTP.

// workerProc is a `sandbox-run worker` this test started.
type workerProc struct {
	*serveProc        // the process (no url: a worker's listener is not used)
	data       string // its data directory
}

// secureNATS is a 3-server NATS cluster as `sandbox-run cluster init`
// writes it (per-role users, signing keys, JetStream encrypted), started
// from its files; apiEnv and workerEnv give each role its credentials.
func secureNATS(t testing.TB) (nc *natstest.Cluster, urls string, apiEnv, workerEnv []string) {
	t.Helper()
	dir, base := t.TempDir(), natstest.PortRange(t, 6)
	r := runCLI(t, "", "cluster", "init", "--dir", dir, "--client-port-base", fmt.Sprint(base), "--cluster-port-base", fmt.Sprint(base+3))
	if r.code != 0 {
		t.Fatalf("cluster init: %d %s %s", r.code, r.stdout, r.stderr)
	}
	var confs []string
	for i := 1; i <= 3; i++ {
		confs = append(confs, filepath.Join(dir, fmt.Sprintf("nats-%d.conf", i)))
	}
	nc = natstest.StartFromConfigs(t, confs, []int{base, base + 1, base + 2})
	return nc, nc.URLs(), []string{"SANDBOX_RUN_NATS_CREDS=" + filepath.Join(dir, "api.creds")},
		[]string{"SANDBOX_RUN_NATS_CREDS=" + filepath.Join(dir, "worker.creds")}
}

// startWorker starts `sandbox-run worker --nats URLS --workers SLOTS` and
// waits until it has joined the cluster. It is stopped (SIGTERM, then
// SIGKILL) when the test ends, unless it has exited.
func startWorker(t testing.TB, env []string, urls string, slots int) *workerProc {
	t.Helper()
	data := t.TempDir()
	home, _ := os.UserHomeDir()
	cache := filepath.Join(home, ".cache", "sandbox-run-test", "cache")
	os.MkdirAll(cache, 0o755)
	if err := os.Symlink(cache, filepath.Join(data, "cache")); err != nil {
		t.Fatal(err)
	}
	cmd := cliCommand(t, env, "worker", "--nats", urls, "--workers", fmt.Sprint(slots), "--addr", "127.0.0.1:0", "--data-dir", data)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &workerProc{serveProc: &serveProc{cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}, data: data}
	joined := make(chan struct{}, 1)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			w.stderr.Write(append(sc.Bytes(), '\n'))
			if bytes.Contains(sc.Bytes(), []byte(`"worker joined the cluster"`)) {
				joined <- struct{}{}
			}
		}
	}()
	go func() {
		<-copied
		w.err = cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() { w.stop(t) })
	select {
	case <-joined:
	case <-w.done:
		t.Fatalf("worker exited:\n%s", w.stderr)
	case <-time.After(60 * time.Second):
		t.Fatalf("worker did not join in 60s:\n%s", w.stderr)
	}
	return w
}

// kill ends the process with SIGKILL, by its PID.
func (p *serveProc) kill() {
	p.cmd.Process.Kill()
	<-p.done
}

// runningSleeps counts the `sleep` processes under the worker.
func (w *workerProc) runningSleeps() int { return w.running("sleep") }

// running counts the processes under the worker whose program's name
// starts with prog.
func (w *workerProc) running(prog string) int {
	n := 0
	for _, pid := range descendantsOf(w.cmd.Process.Pid) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if argv0, _, _ := strings.Cut(string(b), "\x00"); err == nil && strings.HasPrefix(filepath.Base(argv0), prog) {
			n++
		}
	}
	return n
}

// descendantsOf lists the processes under pid.
func descendantsOf(pid int) []int {
	kids := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var p, pp int
		if _, err := fmt.Sscan(e.Name(), &p); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		if i := bytes.LastIndexByte(b, ')'); i > 0 {
			if _, err := fmt.Sscanf(string(b[i+2:]), "%c %d", new(byte), &pp); err == nil {
				kids[pp] = append(kids[pp], p)
			}
		}
	}
	var out []int
	todo := []int{pid}
	for len(todo) > 0 {
		p := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		out = append(out, kids[p]...)
		todo = append(todo, kids[p]...)
	}
	return out
}

// post sends body as JSON and returns the status, the decoded answer and
// the headers.
func post(t testing.TB, url string, body any) (int, map[string]any, http.Header) {
	t.Helper()
	st, out, h, err := postE(url, body)
	if err != nil {
		t.Fatal(err)
	}
	return st, out, h
}

// postE is post for any goroutine: it returns what went wrong (t.Fatal
// must stay on the test's own goroutine).
func postE(url string, body any) (int, map[string]any, http.Header, error) {
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	data, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(data, &out); err != nil {
		return resp.StatusCode, nil, resp.Header, fmt.Errorf("POST %s: %d %q", url, resp.StatusCode, data)
	}
	return resp.StatusCode, out, resp.Header, nil
}

func get(t testing.TB, url string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	data, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("GET %s: %d %q", url, resp.StatusCode, data)
	}
	return resp.StatusCode, out
}

// hookReceiver counts the callbacks each execution id gets.
type hookReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	count map[string]int
}

func newHookReceiver(t *testing.T) *hookReceiver {
	h := &hookReceiver{count: map[string]int{}}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var res struct {
			ExecutionID string `json:"execution_id"`
		}
		json.NewDecoder(r.Body).Decode(&res)
		h.mu.Lock()
		if res.ExecutionID == r.Header.Get("X-Sandbox-Run-Execution-Id") {
			h.count[res.ExecutionID]++
		}
		h.mu.Unlock()
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookReceiver) counts() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]int{}
	for k, v := range h.count {
		out[k] = v
	}
	return out
}

func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS cluster, API nodes and workers")
	}
	nc, urls, apiCreds, workerCreds := secureNATS(t)
	cfg := filepath.Join(t.TempDir(), "cluster.yaml")
	// A short ack wait: a dead worker's jobs go elsewhere in seconds.
	if err := os.WriteFile(cfg, []byte("nats:\n  ack_wait_seconds: 3\ncallback_allow: [\"127.0.0.1\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"SANDBOX_RUN_CONFIG=" + cfg}
	apiEnv, workerEnv := append(apiCreds, env...), append(workerCreds, env...)
	api1 := startServe(t, apiEnv, "--nats", urls, "--role", "api", "--queue", "0")
	api2 := startServe(t, apiEnv, "--nats", urls, "--role", "api", "--queue", "0")
	wa := startWorker(t, workerEnv, urls, 2)
	wb := startWorker(t, workerEnv, urls, 2)
	ex1, ex2 := api1.url+"/api/sandbox/execute", api2.url+"/api/sandbox/execute"

	all := []*workerProc{wa, wb}
	// Workers started in a subtest stay for the next ones.
	addWorker := func() *workerProc {
		w := startWorker(t, workerEnv, urls, 2)
		all = append(all, w)
		return w
	}
	t.Run("sync", func(t *testing.T) {
		for _, u := range []string{ex1, ex2} {
			st, r, _ := post(t, u, map[string]any{"language": "python", "code": "print(6*7)"})
			if st != 200 || r["status"] != "completed" || r["stdout"] != "42\n" {
				t.Fatalf("%s: %d %v", u, st, r)
			}
		}
		// A result larger than one NATS message (1 MiB) comes back whole.
		st, r, _ := post(t, ex2, map[string]any{"language": "python", "code": "print('x' * 3000000)", "max_output_bytes": 4000000})
		if out, _ := r["stdout"].(string); st != 200 || len(out) != 3000001 || r["stdout_truncated"] != false {
			t.Fatalf("large output: %d, %d bytes, truncated %v, error %v", st, len(out), r["stdout_truncated"], r["error"])
		}
	})

	t.Run("judge0 and readiness", func(t *testing.T) {
		// A Judge0 token made on one API node is answered by the other
		// (it lives in the cluster's SR_JOBS, not in a node's memory), and
		// the result names the worker that ran it on the native side.
		st, r, _ := post(t, api1.url+"/judge0/submissions?base64_encoded=false", map[string]any{"language_id": 71, "source_code": "print(6*7)"})
		token, _ := r["token"].(string)
		if st != 201 || token == "" {
			t.Fatalf("judge0 submit: %d %v", st, r)
		}
		deadline := time.Now().Add(time.Minute)
		for {
			resp, err := http.Get(api2.url + "/judge0/submissions/" + token + "?base64_encoded=false")
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			json.NewDecoder(resp.Body).Decode(&got)
			resp.Body.Close()
			status, _ := got["status"].(map[string]any)
			if id, _ := status["id"].(float64); resp.StatusCode == 200 && id >= 3 {
				if got["stdout"] != "42\n" {
					t.Fatalf("judge0 on the other node: %v", got)
				}
				break
			}
			if resp.StatusCode != 200 || time.Now().After(deadline) {
				t.Fatalf("judge0 token %s on the other API node: %d %v", token, resp.StatusCode, got)
			}
			time.Sleep(100 * time.Millisecond)
		}
		st, r, _ = post(t, ex1, map[string]any{"language": "bash", "code": "true"})
		if w, _ := r["worker"].(string); st != 200 || w == "" {
			t.Fatalf("the result names no worker: %d %v", st, r)
		}
		resp, err := http.Get(api1.url + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		var ready struct {
			Workers int
			Cluster struct {
				NATS    string
				Workers int
				Slots   int
				Streams []struct {
					Name string
					OK   bool
				}
			}
		}
		json.NewDecoder(resp.Body).Decode(&ready)
		resp.Body.Close()
		if resp.StatusCode != 200 || ready.Workers != 0 || ready.Cluster.NATS == "" || ready.Cluster.Workers < 2 || len(ready.Cluster.Streams) < 3 {
			t.Fatalf("/readyz of a --role api node: %d %+v", resp.StatusCode, ready)
		}
	})

	t.Run("sse", func(t *testing.T) {
		body := `{"language": "python", "code": "import time\nprint('first', flush=True)\ntime.sleep(1.5)\nprint('second')"}`
		req, _ := http.NewRequest("POST", ex1, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "text/event-stream")
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var stdout, result string
		var firstAt, resultAt time.Duration
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		ev := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				ev = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && ev == "stdout":
				var chunk struct {
					Offset int
					Data   string
				}
				json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &chunk)
				if chunk.Offset != len(stdout) {
					t.Fatalf("chunk %q at offset %d after %q", chunk.Data, chunk.Offset, stdout)
				}
				stdout += chunk.Data
				if firstAt == 0 {
					firstAt = time.Since(start)
				}
			case strings.HasPrefix(line, "data: ") && ev == "result":
				result, resultAt = strings.TrimPrefix(line, "data: "), time.Since(start)
			}
		}
		if stdout != "first\nsecond\n" || !strings.Contains(result, `"stdout":"first\nsecond\n"`) {
			t.Fatalf("stdout events %q, result %s", stdout, result)
		}
		// Live: the first line arrived while the program still slept.
		if resultAt-firstAt < time.Second {
			t.Fatalf("first stdout at %v, the result at %v: not live", firstAt, resultAt)
		}
	})

	t.Run("websocket", func(t *testing.T) {
		// stdin travels to the worker while the program runs: it answers
		// each line as it comes, and a large stdin arrives whole.
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		code := "import sys\nfor line in sys.stdin:\n    print(len(line), flush=True)\n"
		s, err := client.New(api2.url).Interactive(ctx, &wire.ExecuteRequest{Language: "python", Code: code, InputData: "ab\n"})
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		next := func() string {
			for ev := range s.Events() {
				out.WriteString(ev.Data)
				if strings.HasSuffix(out.String(), "\n") {
					line := out.String()
					out.Reset()
					return line
				}
			}
			return ""
		}
		if got := next(); got != "3\n" {
			res, err := s.Result()
			t.Fatalf("input_data's line: %q (result %+v, %v)\n%s", got, res, err, api2.stderr)
		}
		s.WriteStdin([]byte("abcd\n"))
		if got := next(); got != "5\n" {
			t.Fatalf("a line sent while it runs: %q", got)
		}
		big := strings.Repeat("y", 300000) + "\n"
		go func() {
			s.WriteStdin([]byte(big))
			s.CloseStdin()
		}()
		if got := next(); got != "300001\n" {
			t.Fatalf("a 300 kB line: %q", got)
		}
		for range s.Events() {
		}
		res, err := s.Result()
		if err != nil || res.Status != "completed" || res.Stdout != "3\n5\n300001\n" {
			t.Fatalf("result %+v, %v", res, err)
		}
	})

	t.Run("files", func(t *testing.T) {
		resp, err := http.Post(api1.url+"/api/sandbox/files?name=x.py", "application/octet-stream", strings.NewReader("print('from a file')\n"))
		if err != nil {
			t.Fatal(err)
		}
		var f map[string]any
		json.NewDecoder(resp.Body).Decode(&f)
		resp.Body.Close()
		id, _ := f["file_id"].(string)
		if resp.StatusCode != 201 || id == "" {
			t.Fatalf("upload: %d %v", resp.StatusCode, f)
		}
		st, info := get(t, api2.url+"/api/sandbox/files/"+id)
		if st != 200 || info["name"] != "x.py" {
			t.Fatalf("info through API node 2: %d %v", st, info)
		}
		st, r, _ := post(t, ex2, map[string]any{"language": "python", "code": map[string]string{"file_id": id}})
		if st != 200 || r["stdout"] != "from a file\n" {
			t.Fatalf("run a stored file through API node 2: %d %v", st, r)
		}
	})

	t.Run("full", func(t *testing.T) {
		// 4 slots, no queue: 8 runs at once, 4 run and 4 are refused (once
		// the runs before are no longer counted).
		deadline := time.Now().Add(30 * time.Second)
		for {
			r := cliEnv(t, apiCreds, "", "cluster", "status", "--nats", urls, "--output-format", "json")
			var st struct {
				Pending int `json:"sync_pending"`
			}
			if json.Unmarshal([]byte(r.stdout), &st) == nil && st.Pending == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("runs still counted 30 s after they ended: %s %s", r.stdout, r.stderr)
			}
			time.Sleep(100 * time.Millisecond)
		}
		type answer struct {
			st     int
			out    any
			header http.Header
		}
		answers := make(chan answer, 8)
		for range 8 {
			go func() {
				st, r, h, err := postE(ex1, map[string]any{"language": "bash", "code": "sleep 2; echo ran"})
				if err != nil {
					t.Error(err)
				}
				if st == 503 {
					t.Logf("503: %v", r["error"])
				}
				answers <- answer{st, r["stdout"], h}
			}()
		}
		ran, full := 0, 0
		for range 8 {
			a := <-answers
			switch {
			case a.st == 200 && a.out == "ran\n":
				ran++
			case a.st == 503 && a.header.Get("Retry-After") != "":
				full++
			default:
				t.Errorf("answer %d %v", a.st, a.out)
			}
		}
		if ran < 4 || full < 1 {
			t.Fatalf("%d ran, %d refused as full", ran, full)
		}
	})

	t.Run("canceled", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "POST", ex2, strings.NewReader(`{"language": "bash", "code": "sleep 60"}`))
		req.Header.Set("Content-Type", "application/json")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			t.Fatalf("a 60 s run answered in 2 s: %d", resp.StatusCode)
		}
		// The client went away: its run ends on its worker.
		deadline := time.Now().Add(30 * time.Second)
		for wa.runningSleeps()+wb.runningSleeps() > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("the abandoned run still runs on its worker after 30 s")
			}
			time.Sleep(100 * time.Millisecond)
		}
	})

	t.Run("status", func(t *testing.T) {
		r := cliEnv(t, apiCreds, "", "cluster", "status", "--nats", urls, "--output-format", "json")
		var st struct {
			Workers  []struct{ ID, Version string }
			APINodes []struct{ ID, Role string } `json:"api_nodes"`
			Slots    int                         `json:"slots"`
			Health   struct {
				Signed  bool
				Servers []string
				Streams []struct {
					Name    string
					OK      bool
					Current int
				}
			}
		}
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &st) != nil || len(st.Workers) != 2 || st.Slots != 4 ||
			len(st.APINodes) != 2 || st.APINodes[0].Role != "api" || st.Workers[0].Version == "" {
			t.Fatalf("cluster status: exit %d %q %q", r.code, r.stdout, r.stderr)
		}
		if !st.Health.Signed || len(st.Health.Servers) != 3 || len(st.Health.Streams) < 3 || !st.Health.Streams[0].OK || st.Health.Streams[0].Current != 3 {
			t.Fatalf("cluster status, NATS: %+v", st.Health)
		}
		if text := cliEnv(t, apiCreds, "", "cluster", "status", "--nats", urls).stdout; !strings.Contains(text, "API nodes: 2") ||
			!strings.Contains(text, "SR_RUNS") || !strings.Contains(text, "3/3 replicas current") {
			t.Fatalf("cluster status, text:\n%s", text)
		}
	})

	t.Run("async through a killed worker", func(t *testing.T) {
		hooks := newHookReceiver(t)
		const n = 16
		ids := make([]string, n)
		for i := range n {
			u := []string{api1.url, api2.url}[i%2] + "/api/sandbox/executions"
			st, r, _ := post(t, u, map[string]any{"language": "bash", "code": fmt.Sprintf("sleep 1; echo job-%d", i), "callback_url": hooks.URL + "/hook"})
			id, _ := r["execution_id"].(string)
			if st != 202 || id == "" {
				t.Fatalf("submit %d: %d %v", i, st, r)
			}
			ids[i] = id
		}
		// Worker A dies with runs going; C takes its place.
		deadline := time.Now().Add(60 * time.Second)
		for wa.runningSleeps() == 0 {
			if time.Now().After(deadline) {
				t.Fatal("worker A never ran a job")
			}
			time.Sleep(20 * time.Millisecond)
		}
		wa.kill()
		addWorker()
		for i, id := range ids {
			st, r := get(t, api2.url+"/api/sandbox/executions/"+id+"?wait=true&timeout=120")
			if st != 200 || r["status"] != "completed" || r["stdout"] != fmt.Sprintf("job-%d\n", i) || r["execution_id"] != id {
				t.Fatalf("job %d: %d %v", i, st, r)
			}
		}
		// A worker claims a callback only while its job's entry says
		// pending: once every entry says delivered, none is sent again
		// (but by a worker dying between the receiver's answer and its
		// record, which this test's kill comes long before).
		deadline = time.Now().Add(60 * time.Second)
		for _, id := range ids {
			for {
				_, r := get(t, api1.url+"/api/sandbox/executions/"+id)
				cb, _ := r["callback"].(map[string]any)
				if cb["status"] == "delivered" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: callback state %v", id, r["callback"])
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		got := hooks.counts()
		for _, id := range ids {
			if got[id] != 1 {
				t.Errorf("%s got %d callbacks", id, got[id])
			}
		}
	})

	t.Run("sessions", func(t *testing.T) {
		addWorker()
		workers := all
		holder := func(id string) *workerProc {
			for _, w := range workers {
				if _, err := os.Stat(filepath.Join(w.data, "sessions", id)); err == nil {
					return w
				}
			}
			return nil
		}
		st, r, _ := post(t, api1.url+"/api/sandbox/sessions", map[string]any{"language": "python"})
		id, _ := r["session_id"].(string)
		if st != 201 || id == "" {
			t.Fatalf("create: %d %v", st, r)
		}
		count := "import os\nn = int(open('n').read()) + 1 if os.path.exists('n') else 1\nopen('n', 'w').write(str(n))\nprint(n)"
		for i, u := range []string{ex2, ex1} {
			st, r, _ := post(t, u, map[string]any{"language": "python", "code": count, "session_id": id})
			if st != 200 || r["stdout"] != fmt.Sprintf("%d\n", i+1) {
				t.Fatalf("run %d: %d %v", i+1, st, r)
			}
		}
		st, info := get(t, api2.url+"/api/sandbox/sessions/"+id)
		if st != 200 || !strings.Contains(fmt.Sprint(info["files"]), "path:n size:1") {
			t.Fatalf("the session through API node 2: %d %v", st, info)
		}
		// A file larger than one NATS message comes back whole.
		st, r, _ = post(t, ex1, map[string]any{"language": "python", "code": "open('big', 'w').write('b' * 2000000)", "session_id": id})
		if st != 200 || r["status"] != "completed" {
			t.Fatalf("writing a big file: %d %v", st, r)
		}
		resp, err := http.Get(api2.url + "/api/sandbox/sessions/" + id + "/file?path=big")
		if err != nil {
			t.Fatal(err)
		}
		big, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || len(big) != 2000000 {
			t.Fatalf("reading a big file: %d, %d bytes", resp.StatusCode, len(big))
		}
		// Its worker dies: the next run finds its files on another one.
		w := holder(id)
		if w == nil {
			t.Fatal("no worker holds the session's files")
		}
		w.kill()
		st, r, _ = post(t, ex1, map[string]any{"language": "python", "code": count, "session_id": id})
		if st != 200 || r["stdout"] != "3\n" {
			t.Fatalf("the run after its worker died: %d %v", st, r)
		}
		// An interpreter session says when it lost its state.
		st, r, _ = post(t, api2.url+"/api/sandbox/sessions", map[string]any{"language": "python", "interpreter": true})
		iid, _ := r["session_id"].(string)
		if st != 201 || iid == "" {
			t.Fatalf("create an interpreter session: %d %v", st, r)
		}
		st, r, _ = post(t, ex1, map[string]any{"language": "python", "code": "x = 41", "session_id": iid})
		if st != 200 || r["status"] != "completed" {
			t.Fatalf("cell 1: %d %v", st, r)
		}
		st, r, _ = post(t, ex2, map[string]any{"language": "python", "code": "x + 1", "session_id": iid})
		if v, _ := r["result"].(map[string]any); st != 200 || v["text/plain"] != "42" || r["restarted"] == true {
			t.Fatalf("cell 2: %d %v", st, r)
		}
		// The worker with a python under it holds the interpreter.
		killed := false
		for _, w := range workers {
			if w.running("python") > 0 {
				w.kill()
				killed = true
				break
			}
		}
		if !killed {
			t.Fatal("no worker holds the interpreter session")
		}
		addWorker()
		st, r, _ = post(t, ex1, map[string]any{"language": "python", "code": "x", "session_id": iid})
		if st != 200 || r["restarted"] != true || r["status"] == "completed" {
			t.Fatalf("the cell after its worker died: %d %v", st, r)
		}
		// Ended through the other API node, everywhere.
		req, _ := http.NewRequest("DELETE", api2.url+"/api/sandbox/sessions/"+id, nil)
		resp, err = http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 204 {
			t.Fatalf("delete: %v %v", resp, err)
		}
		resp.Body.Close()
		if st, _ := get(t, api1.url+"/api/sandbox/sessions/"+id); st != 404 {
			t.Fatalf("the ended session: %d", st)
		}
	})

	t.Run("api node killed", func(t *testing.T) {
		// Jobs taken by an API node that dies go on, and any other API
		// node answers them.
		api3 := startServe(t, apiEnv, "--nats", urls, "--role", "api")
		var ids []string
		for i := range 4 {
			st, r, _ := post(t, api3.url+"/api/sandbox/executions", map[string]any{"language": "bash", "code": fmt.Sprintf("sleep 1; echo after-%d", i)})
			id, _ := r["execution_id"].(string)
			if st != 202 || id == "" {
				t.Fatalf("submit: %d %v", st, r)
			}
			ids = append(ids, id)
		}
		api3.kill()
		for i, id := range ids {
			st, r := get(t, api2.url+"/api/sandbox/executions/"+id+"?wait=true&timeout=60")
			if st != 200 || r["stdout"] != fmt.Sprintf("after-%d\n", i) {
				t.Fatalf("job %d after its API node died: %d %v\n%s", i, st, r, cliEnv(t, apiCreds, "", "cluster", "status", "--nats", urls).stdout)
			}
		}
	})

	t.Run("metrics", func(t *testing.T) {
		resp, err := http.Get(api1.url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !regexp.MustCompile(`(?m)^sandbox_run_executions_total\{language="python",status="completed"\} [1-9]`).Match(b) {
			t.Fatalf("the API node's metrics count no run:\n%.2000s", b)
		}
		// Every message of this whole test was signed by a node of the
		// cluster: nothing was dropped, on the API node or on a worker.
		drops := regexp.MustCompile(`(?m)^sandbox_run_cluster_messages_dropped_total\{kind="([a-z]+)",reason="([a-z]+)"\} (\S+)$`)
		if n := len(drops.FindAllSubmatch(b, -1)); n < 14 {
			t.Fatalf("%d drop counters on the API node:\n%.3000s", n, b)
		}
		for _, m := range drops.FindAllSubmatch(b, -1) {
			if string(m[3]) != "0" {
				t.Errorf("the API node dropped %s %s messages: %s", m[3], m[1], m[2])
			}
		}
		for _, p := range append([]*serveProc{api1, api2}, func() (ps []*serveProc) {
			for _, w := range all {
				ps = append(ps, w.serveProc)
			}
			return ps
		}()...) {
			if strings.Contains(p.stderr.String(), "a message was dropped") {
				t.Errorf("a node dropped a message:\n%s", p.stderr.String())
			}
		}
	})

	t.Run("no NATS: not ready", func(t *testing.T) {
		// Every NATS server down: the API node says it is not ready (a
		// load balancer stops sending it requests) until they are back.
		ready := func() int {
			resp, err := http.Get(api2.url + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		until := func(want int) {
			deadline := time.Now().Add(time.Minute)
			for ready() != want {
				if time.Now().After(deadline) {
					t.Fatalf("/readyz never answered %d", want)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		until(200)
		for i := range nc.N() {
			nc.Kill(i)
		}
		until(503)
		nc.StartStopped()
		until(200)
	})
}
