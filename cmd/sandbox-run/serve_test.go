package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/client"
)

// The tests choose local or remote runs themselves: a server or keys in
// the caller's environment must not leak into the CLI runs.
func init() {
	if os.Getenv("SANDBOX_RUN_CLI") != "1" {
		for _, v := range []string{"SANDBOX_RUN_SERVER", "SANDBOX_RUN_API_KEY", "SANDBOX_RUN_API_KEYS",
			"SANDBOX_RUN_ADMIN_KEYS", "SANDBOX_RUN_ADDR", "SANDBOX_RUN_CONFIG"} {
			os.Unsetenv(v)
		}
	}
}

// cliCommand is the test binary run as the CLI, with extra environment
// variables.
func cliCommand(t testing.TB, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "SANDBOX_RUN_CLI=1", "SANDBOX_RUN_DATA_DIR="+dataDir(t))
	if dir := flag.Lookup("test.gocoverdir"); dir != nil && dir.Value.String() != "" {
		cmd.Env = append(cmd.Env, "GOCOVERDIR="+dir.Value.String()) // count the CLI's coverage too
	}
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// cliEnv is cli with extra environment variables.
func cliEnv(t testing.TB, env []string, stdin string, args ...string) cliResult {
	t.Helper()
	cmd := cliCommand(t, env, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return cliResult{code, out.String(), errb.String()}
}

// syncBuffer collects a process's output while it runs.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// serveProc is a `sandbox-run serve` this test started.
type serveProc struct {
	cmd    *exec.Cmd
	url    string
	stderr *syncBuffer
	done   chan struct{} // closed when the process has exited
	err    error         // cmd.Wait's, once done
}

// startServe starts `sandbox-run serve --addr 127.0.0.1:0 ARGS...` in the
// background, learns its port from its "serving" log line and waits for
// /healthz. The process is stopped (SIGTERM, then SIGKILL) when the test
// ends, unless it has exited already.
func startServe(t testing.TB, env []string, args ...string) *serveProc {
	t.Helper()
	// A data directory of its own: dataDir's lives only as long as the
	// first test that asked for it.
	data := t.TempDir()
	home, _ := os.UserHomeDir()
	cache := filepath.Join(home, ".cache", "sandbox-run-test", "cache")
	os.MkdirAll(cache, 0o755)
	if err := os.Symlink(cache, filepath.Join(data, "cache")); err != nil {
		t.Fatal(err)
	}
	cmd := cliCommand(t, env, append([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", data}, args...)...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serveProc{cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	addr := make(chan string, 1)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			p.stderr.Write(append(sc.Bytes(), '\n'))
			var line struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "serving" {
				addr <- line.Addr
			}
		}
	}()
	go func() {
		<-copied // Wait closes the pipe: read it all first
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			t.Logf("sandbox-run %s log (the last 40 lines):\n%s", strings.Join(cmd.Args[1:], " "), lastLines(p.stderr.String(), 40))
		}
	})
	select {
	case a := <-addr:
		p.url = "http://" + a
	case <-p.done:
		t.Fatalf("serve exited: %v\n%s", p.err, p.stderr)
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not start in 30s:\n%s", p.stderr)
	}
	deadline := time.Now().Add(10 * time.Second)
	for client.New(p.url).Health(context.Background()) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("%s/healthz does not answer:\n%s", p.url, p.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return p
}

// stop ends the process with SIGTERM, and SIGKILL if that takes too long.
func (p *serveProc) stop(t testing.TB) {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
		t.Errorf("sandbox-run %s ignored SIGTERM for 30s:\n%s", p.cmd.Args[1], p.stderr)
	}
}

// sameAsLocal runs `execute ARGS` locally and with --server and checks that
// both end alike: exit code, stdout and stderr.
func sameAsLocal(t *testing.T, srv *serveProc, stdin string, args ...string) cliResult {
	t.Helper()
	local := runCLI(t, stdin, append([]string{"execute"}, args...)...)
	remote := runCLI(t, stdin, append([]string{"execute", "--server", srv.url}, args...)...)
	if local != remote {
		t.Errorf("%q:\nlocal:  exit %d stdout %q stderr %q\nremote: exit %d stdout %q stderr %q",
			args, local.code, local.stdout, local.stderr, remote.code, remote.stdout, remote.stderr)
	}
	return remote
}

func TestRemoteExecuteLikeLocal(t *testing.T) {
	srv := startServe(t, nil)
	cases := []struct {
		name   string
		stdin  string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"hello", "", []string{"-l", "python", "-c", "print('hello')"}, 0, "hello\n", ""},
		{"exit 4", "", []string{"-l", "python", "--code", "import sys; print('x'); sys.exit(4)"}, 4, "x\n", ""},
		{"timeout", "", []string{"-l", "bash", "-c", "sleep 5", "-t", "0.3"}, exitTimeout, "", "sandbox-run: timeout (wall time limit)\n"},
		{"compile error", "", []string{"-l", "c", "-c", "int main(){return x;}"}, exitCompile, "", "sandbox-run: compile error\n"},
		{"unknown language", "", []string{"-l", "cobol-2099", "-c", "x"}, exitUsage, "", "Unsupported language: 'cobol-2099'"},
		{"stdin", "piped input\n", []string{"-l", "bash", "--code", "cat", "--input", "-"}, 0, "piped input\n", ""},
		{"input", "", []string{"-l", "bash", "-c", "read x; echo \"<$x>\" >&2", "-i", "text"}, 0, "", "<text>\n"},
		{"args and env", "", []string{"-l", "python", "-c", "import sys,os; print(sys.argv[1:], os.environ.get('K'))", "--env", "K=v", "--", "a", "b c"}, 0, "['a', 'b c'] v\n", ""},
		{"output limit", "", []string{"-l", "bash", "-c", "printf '%2000s' x", "--max-output", "1000"}, exitLimit, strings.Repeat(" ", 1000), "output limit exceeded\nsandbox-run: output truncated\n"},
		{"memory", "", []string{"-l", "python", "-c", "x = bytearray(512 << 20)", "--memory", "64"}, exitLimit, "", "memory limit exceeded"},
		{"signal", "", []string{"-l", "python", "-c", "import os; os.kill(os.getpid(), 9)"}, 128 + 9, "", ""},
		{"version", "", []string{"-l", "python", "-c", "1", "--version", "1.0"}, exitUsage, "", "not installed"},
		{"bad env", "", []string{"-l", "python", "-c", "1", "--env", "novalue"}, exitUsage, "", "KEY=VALUE"},
		{"bad file name", "", []string{"-l", "python", "-c", "1", "--file", "../x=/etc/hostname"}, exitUsage, "", "invalid file name"},
		{"verbose", "", []string{"-l", "go", "-c", "package main\nfunc main() { println(\"go\") }", "-v", "--cpu-time", "20", "--max-processes", "100"}, 0, "", "status=completed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "verbose" {
				// Metrics differ from run to run: compare only the ends.
				r := runCLI(t, "", append([]string{"execute", "--server", srv.url}, c.args...)...)
				if r.code != 0 || !strings.Contains(r.stderr, "go\n") || !strings.Contains(r.stderr, "compile: status=completed") ||
					!strings.Contains(r.stderr, c.stderr) {
					t.Errorf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
				}
				return
			}
			r := sameAsLocal(t, srv, c.stdin, c.args...)
			if r.code != c.code || r.stdout != c.stdout || !strings.Contains(r.stderr, c.stderr) {
				t.Errorf("exit %d (want %d) stdout %q stderr %q", r.code, c.code, r.stdout, r.stderr)
			}
		})
	}
}

func TestRemoteJSONAndFiles(t *testing.T) {
	srv := startServe(t, nil)
	dir := t.TempDir()
	code := filepath.Join(dir, "prog.py")
	os.WriteFile(code, []byte("import sys\ndata = open('in/data.txt').read()\nopen('out.txt','w').write(data.upper())\n"+
		"open('copy.bin','wb').write(open('blob.bin','rb').read())\nprint(sys.stdin.read())\n"), 0o644)
	input := filepath.Join(dir, "data.txt")
	os.WriteFile(input, []byte("payload"), 0o644)
	blob := []byte{0xff, 0x00, 0xfe, 'x'}
	os.WriteFile(filepath.Join(dir, "blob.bin"), blob, 0o644)

	results := map[string]map[string]any{}
	for mode, server := range map[string][]string{"local": nil, "remote": {"--server", srv.url}} {
		outDir := filepath.Join(dir, mode)
		args := append([]string{"execute"}, server...)
		args = append(args, "--code", code, "--input", "hi", "--file", "in/data.txt="+input, "--file", "blob.bin="+filepath.Join(dir, "blob.bin"),
			"-o", "json", "--output-dir", outDir, "--output-file", "out.txt", "--output-file", "*.bin")
		r := runCLI(t, "", args...)
		var res map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || r.code != 0 {
			t.Fatalf("%s: exit %d, not JSON: %v: %q %q", mode, r.code, err, r.stdout, r.stderr)
		}
		results[mode] = res
		for _, k := range []string{"execution_id", "status", "stdout", "stderr", "exit_code", "duration_ms", "memory_used_mb", "output_files", "cpu_time_ms", "language", "version"} {
			if _, ok := res[k]; !ok {
				t.Errorf("%s: field %s missing", mode, k)
			}
		}
		if b, _ := os.ReadFile(filepath.Join(outDir, "out.txt")); string(b) != "PAYLOAD" {
			t.Errorf("%s: --output-dir wrote out.txt %q", mode, b)
		}
		if b, _ := os.ReadFile(filepath.Join(outDir, "copy.bin")); !bytes.Equal(b, blob) {
			t.Errorf("%s: --output-dir wrote copy.bin %q", mode, b)
		}
	}
	local, remote := results["local"], results["remote"]
	for _, k := range []string{"status", "stdout", "stderr", "exit_code", "language", "version", "stdout_truncated"} {
		if local[k] != remote[k] {
			t.Errorf("%s: local %v, remote %v", k, local[k], remote[k])
		}
	}
	lf, _ := json.Marshal(local["output_files"])
	rf, _ := json.Marshal(remote["output_files"])
	if string(lf) != string(rf) || !strings.Contains(string(rf), `"out.txt":"PAYLOAD"`) || !strings.Contains(string(rf), `"encoding":"base64"`) {
		t.Errorf("output files: local %s, remote %s", lf, rf)
	}
	if remote["status"] != "completed" || remote["stdout"] != "hi\n" || remote["language"] != "python" || remote["execution_id"] == local["execution_id"] {
		t.Errorf("remote result %v", remote)
	}

	// Extensions the built-in table lacks are looked up on the server.
	perl := filepath.Join(dir, "x.pl")
	os.WriteFile(perl, []byte(`print "perl\n";`), 0o644)
	if r := runCLI(t, "", "execute", "--server", srv.url, "--code", perl); r.code != 0 || r.stdout != "perl\n" {
		t.Errorf("x.pl: %d %q %q", r.code, r.stdout, r.stderr)
	}
	os.WriteFile(filepath.Join(dir, "x.unknownext"), []byte("1"), 0o644)
	if r := runCLI(t, "", "execute", "--server", srv.url, "--code", filepath.Join(dir, "x.unknownext")); r.code != exitUsage || !strings.Contains(r.stderr, "extension") {
		t.Errorf("unknown extension: %d %q", r.code, r.stderr)
	}
	// The server can also come from the environment.
	if r := cliEnv(t, []string{"SANDBOX_RUN_SERVER=" + srv.url}, "", "execute", "-l", "bash", "-c", "echo env"); r.code != 0 || r.stdout != "env\n" {
		t.Errorf("SANDBOX_RUN_SERVER: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(srv.stderr.String(), `"msg":"execution"`) {
		t.Errorf("the server logged no execution:\n%s", srv.stderr)
	}
}

func TestRemoteUsageAndServerErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	cases := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"unreachable", []string{"--server", closed, "-l", "python", "-c", "1"}, exitSetup, "cannot reach server " + closed + ": dial tcp"},
		{"data dir", []string{"--server", closed, "-l", "python", "-c", "1", "--data-dir", "/tmp"}, exitUsage, "--data-dir cannot be used with --server"},
		{"languages", []string{"--server", closed, "-l", "python", "-c", "1", "--languages", "x.yaml"}, exitUsage, "--languages cannot be used with --server"},
		{"bad url", []string{"--server", "localhost:8080", "-l", "python", "-c", "1"}, exitUsage, "http:// or https:// URL"},
	}
	for _, c := range cases {
		r := runCLI(t, "", append([]string{"execute"}, c.args...)...)
		if r.code != c.code || !strings.Contains(r.stderr, c.msg) {
			t.Errorf("%s: exit %d (want %d), stderr %q", c.name, r.code, c.code, r.stderr)
		}
	}

	srv := startServe(t, nil)
	if r := runCLI(t, "", "execute", "--server", srv.url, "-l", "python", "-c", "open('f','wb').write(b'x'*100000)", "--max-file-size", "1000"); r.code != exitLimit || !strings.Contains(r.stderr, "file size limit") {
		t.Errorf("remote --max-file-size: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := runCLI(t, "", "execute", "--server", srv.url, "-l", "python", "-c", "1", "--session-id", "sess_nosuchsession"); r.code != exitUsage || !strings.Contains(r.stderr, "session") {
		t.Errorf("remote unknown session: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := runCLI(t, "", "execute", "--server", srv.url, "-l", "python", "-c", "1", "-t", "1000"); r.code != exitUsage ||
		r.stderr != "sandbox-run: timeout_seconds 1000 is above the maximum of 300s\n" {
		t.Errorf("above the maximum: %d %q", r.code, r.stderr)
	}
	if r := runCLI(t, "\xff\xfe", "execute", "--server", srv.url, "-l", "bash", "-c", "cat", "-i", "-"); r.code != exitUsage || !strings.Contains(r.stderr, "not UTF-8") {
		t.Errorf("binary stdin: %d %q", r.code, r.stderr)
	}
}

func TestRemoteAuth(t *testing.T) {
	srv := startServe(t, []string{"SANDBOX_RUN_API_KEYS=tester=s3cret"})
	args := []string{"execute", "--server", srv.url, "-l", "bash", "-c", "echo ok"}
	if r := runCLI(t, "", args...); r.code != exitUsage || !strings.Contains(r.stderr, "missing API key") || !strings.Contains(r.stderr, "--api-key") {
		t.Errorf("no key: %d %q", r.code, r.stderr)
	}
	if r := runCLI(t, "", append(args, "--api-key", "wrong")...); r.code != exitUsage || !strings.Contains(r.stderr, "invalid API key") {
		t.Errorf("wrong key: %d %q", r.code, r.stderr)
	}
	if r := runCLI(t, "", append(args, "--api-key", "s3cret")...); r.code != 0 || r.stdout != "ok\n" {
		t.Errorf("--api-key: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := cliEnv(t, []string{"SANDBOX_RUN_API_KEY=s3cret"}, "", args...); r.code != 0 || r.stdout != "ok\n" {
		t.Errorf("SANDBOX_RUN_API_KEY: %d %q %q", r.code, r.stdout, r.stderr)
	}
	// Extension lookups on the server need the key too.
	file := filepath.Join(t.TempDir(), "x.pl")
	os.WriteFile(file, []byte(`print "ok\n";`), 0o644)
	if r := runCLI(t, "", "execute", "--server", srv.url, "--code", file); r.code != exitUsage || !strings.Contains(r.stderr, "missing API key") {
		t.Errorf("extension lookup without a key: %d %q", r.code, r.stderr)
	}
}

// TestRemoteBusyAndInterrupt fills the server's only worker: another run
// is refused with 125 and the Retry-After; SIGINT to the waiting CLI ends
// it and the server's run with it.
func TestRemoteBusyAndInterrupt(t *testing.T) {
	srv := startServe(t, nil, "--workers", "1", "--queue", "0")
	slow := cliCommand(t, nil, "execute", "--server", srv.url, "-l", "bash", "-c", "echo started; sleep 60", "-t", "120")
	var slowErr syncBuffer
	slow.Stderr = &slowErr
	if err := slow.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var slowWait error
	go func() { slowWait = slow.Wait(); close(exited) }()
	defer func() {
		select {
		case <-exited:
		default:
			slow.Process.Kill() // only when the test failed early
			<-exited
		}
	}()
	waitInFlight(t, srv.url, 1)

	r := runCLI(t, "", "execute", "--server", srv.url, "-l", "bash", "-c", "echo no")
	if r.code != exitSetup || !strings.Contains(r.stderr, "server busy (503): all 1 workers are busy") || !strings.Contains(r.stderr, "retry after 1s") {
		t.Errorf("busy: %d %q", r.code, r.stderr)
	}

	slow.Process.Signal(os.Interrupt)
	select {
	case <-exited:
		if ee, ok := slowWait.(*exec.ExitError); !ok || ee.ExitCode() != exitInterrupted || !strings.Contains(slowErr.String(), "interrupted") {
			t.Errorf("interrupted run: %v %q", slowWait, slowErr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the remote run ignored SIGINT")
	}
	waitInFlight(t, srv.url, 0) // the server killed its sandbox
	if r := runCLI(t, "", "execute", "--server", srv.url, "-l", "bash", "-c", "echo free"); r.code != 0 || r.stdout != "free\n" {
		t.Errorf("after the interrupt: %d %q", r.code, r.stderr)
	}
}

func waitInFlight(t *testing.T, url string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var ready struct {
			InFlight int `json:"in_flight"`
		}
		if resp, err := http.Get(url + "/readyz"); err == nil {
			json.NewDecoder(resp.Body).Decode(&ready)
			resp.Body.Close()
			if ready.InFlight == n {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("in_flight is not %d after 10s", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestServe(t *testing.T) {
	r := runCLI(t, "", "serve", "--addr", "127.0.0.1:9999", "--workers", "3", "--print-config")
	var cfg struct {
		Addr    string `json:"addr"`
		Workers int    `json:"workers"`
		DataDir string `json:"data_dir"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &cfg); err != nil || r.code != 0 || cfg.Addr != "127.0.0.1:9999" || cfg.Workers != 3 || cfg.DataDir != dataDir(t) {
		t.Errorf("--print-config: %d %v %q %q", r.code, err, r.stdout, r.stderr)
	}
	r = runCLI(t, "", "serve", "--addr", "0.0.0.0:9999")
	if r.code != exitUsage || !strings.Contains(r.stderr, "without API keys") {
		t.Errorf("0.0.0.0 without keys: %d %q", r.code, r.stderr)
	}
	if r := runCLI(t, "", "serve", "--no-such-flag"); r.code != exitUsage {
		t.Errorf("bad flag: %d", r.code)
	}

	srv := startServe(t, nil)
	start := time.Now()
	srv.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-srv.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("serve still runs 10s after SIGTERM:\n%s", srv.stderr)
	}
	if srv.err != nil || time.Since(start) > 5*time.Second || !strings.Contains(srv.stderr.String(), `"msg":"stopped"`) {
		t.Errorf("after SIGTERM: %v in %s:\n%s", srv.err, time.Since(start), srv.stderr)
	}
}

// The configuration example of docs/OPERATIONS.md is a configuration
// serve takes, its images section included.
func TestREADMEConfig(t *testing.T) {
	block := docBlock(t, "docs/OPERATIONS.md", "Configuration is a YAML file", "yaml")
	path := filepath.Join(t.TempDir(), "config.yml")
	if err := os.WriteFile(path, []byte(block), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "", "serve", "--config", path, "--print-config")
	var cfg struct {
		Images struct {
			Allow []string `json:"allow"`
		} `json:"images"`
		Network struct {
			Allow []string `json:"allow"`
		} `json:"network"`
		Keys []struct {
			ID string `json:"id"`
		} `json:"keys"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &cfg); err != nil || r.code != 0 || len(cfg.Images.Allow) != 1 || len(cfg.Keys) != 1 || len(cfg.Network.Allow) != 3 {
		t.Errorf("the docs' configuration: exit %d %v %q %q", r.code, err, r.stdout, r.stderr)
	}
}

// The network example of docs/NETWORK.md: a listener on the host's
// loopback, reached as host.sandbox.internal on the port --allow-net lists
// (the docs' 8000, here a free one).
func TestREADMENetwork(t *testing.T) {
	block := docBlock(t, "docs/NETWORK.md", "# Network access", "console")
	lines := strings.Split(strings.TrimSpace(block), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[1], "$ sandbox-run execute") {
		t.Fatalf("the docs' network example changed: %q", lines)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	srv := &http.Server{Handler: http.FileServer(http.Dir(t.TempDir()))}
	go srv.Serve(ln)
	defer srv.Close()
	// The command as the docs give it, with sandbox-run this test binary.
	script := `sandbox-run() { "$SANDBOX_RUN_TEST_BIN" "$@"; }` + "\n" +
		strings.ReplaceAll(strings.TrimPrefix(lines[1], "$ ")+"\n"+lines[2], "8000", port)
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = append(cliCommand(t, nil).Env, "SANDBOX_RUN_TEST_BIN="+os.Args[0])
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != lines[3] {
		t.Errorf("%s: %v %q, want %q", script, err, out, lines[3])
	}
}

// TestREADMECompat runs the Judge0 and Piston example of the README and of
// docs/COMPATIBILITY.md as it is written, against a server of this test
// binary.
func TestREADMECompat(t *testing.T) {
	srv := startServe(t, nil)
	for _, doc := range []struct{ file, heading string }{
		{"README.md", "### Judge0 and Piston clients"},
		{"docs/COMPATIBILITY.md", "## Judge0 and Piston clients"},
	} {
		t.Run(doc.file, func(t *testing.T) {
			block := docBlock(t, doc.file, doc.heading, "console")
			if ex := consoleExamples(block); len(ex) != 2 || !strings.Contains(ex[0].cmd, "/judge0/") || !strings.Contains(ex[1].cmd, "/piston/") {
				t.Fatalf("the Judge0 and Piston example changed: %q", ex)
			}
			runConsole(t, t.TempDir(), srv.url, block)
		})
	}
}

// lastLines is s's last n lines.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
