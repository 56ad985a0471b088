package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/testkit/leakcheck"
	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/gvisor"
	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// The test binary doubles as the CLI: run with SANDBOX_RUN_CLI=1 it is
// sandbox-run itself, so these tests exercise main() as users do.
func TestMain(m *testing.M) {
	agent.Main() // a live sandbox's agent is this binary too
	gvisor.ShimMain()
	sandbox.Init()
	if os.Getenv("SANDBOX_RUN_CLI") == "1" {
		if tmp := os.Getenv(privateTmpEnv); tmp != "" {
			onPrivateTmp(tmp)
		}
		main()
	}
	// A TMPDIR of our own, inherited by the CLIs the tests start: the leak
	// checks (the soak's among them) may count every entry in it.
	_, cleanupTmp, err := leakcheck.PrivateTempDir("sr-cli")
	if err != nil {
		panic(err)
	}
	dir, err := makeDataDir()
	if err != nil {
		panic(err)
	}
	sharedDataDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	cleanupTmp()
	os.Exit(code)
}

// privateTmpEnv names the directory a CLI started by a test binds over
// /tmp in a mount namespace of its own (see TestToolchainChecksLeaveNoTmp);
// onPrivateTmp does that, on Linux.
const privateTmpEnv = "SANDBOX_RUN_TEST_PRIVATE_TMP"

var onPrivateTmp = func(dir string) {
	fmt.Fprintln(os.Stderr, "a private /tmp needs Linux")
	os.Exit(125)
}

type cliResult struct {
	code           int
	stdout, stderr string
}

// cli runs the test binary as the CLI with args, stdin as its standard
// input, and returns how it ended.
func runCLI(t testing.TB, stdin string, args ...string) cliResult {
	t.Helper()
	return cliEnv(t, nil, stdin, args...)
}

var sharedDataDir string

// dataDir keeps sessions in a directory of this test binary (made in
// TestMain, removed after the tests) and toolchain caches in the
// persistent test cache the executor tests also use.
func dataDir(t testing.TB) string { return sharedDataDir }

func makeDataDir() (string, error) {
	dir, err := os.MkdirTemp("", "sandbox-run-cli-test-")
	if err != nil {
		return "", err
	}
	home, _ := os.UserHomeDir()
	cache := filepath.Join(home, ".cache", "sandbox-run-test", "cache")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	return dir, os.Symlink(cache, filepath.Join(dir, "cache"))
}

func TestExecuteText(t *testing.T) {
	r := runCLI(t, "", "execute", "-l", "python", "--code", "import sys; print('x'); sys.exit(4)")
	if r.code != 4 || r.stdout != "x\n" {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, "piped input\n", "execute", "-l", "bash", "--code", "cat", "--input", "-")
	if r.code != 0 || r.stdout != "piped input\n" {
		t.Fatalf("stdin: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, "", "execute", "-l", "python", "-c", "import sys,os; print(sys.argv[1:], os.environ.get('K'))", "--env", "K=v", "--", "a", "b c")
	if r.stdout != "['a', 'b c'] v\n" {
		t.Fatalf("args/env: %q %q", r.stdout, r.stderr)
	}
}

func TestExecuteExitCodes(t *testing.T) {
	cases := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"timeout", []string{"-l", "bash", "-c", "sleep 5", "-t", "0.3"}, exitTimeout, "timeout"},
		{"compile", []string{"-l", "c", "-c", "int main(){return x;}"}, exitCompile, "compile error"},
		{"memory", []string{"-l", "python", "-c", "x = bytearray(512 << 20)", "--memory", "64"}, exitLimit, "memory limit"},
		{"signal", []string{"-l", "python", "-c", "import os; os.kill(os.getpid(), 9)"}, 128 + 9, ""},
		{"unknown language", []string{"-l", "cobol-2099", "-c", "x"}, exitUsage, "python"},
		{"no code", []string{"-l", "python"}, exitUsage, "--code"},
		{"bad flag", []string{"--no-such-flag"}, exitUsage, ""},
		{"bad format", []string{"-l", "python", "-c", "1", "-o", "xml"}, exitUsage, "output-format"},
		{"negative limit", []string{"-l", "python", "-c", "1", "--memory", "-1"}, exitUsage, "positive"},
		{"bad file flag", []string{"-l", "python", "-c", "1", "--file", "nopath"}, exitUsage, "NAME=PATH"},
		{"bad file name", []string{"-l", "python", "-c", "1", "--file", "../x=/etc/hostname"}, exitUsage, "invalid file name"},
		{"inline without language", []string{"-c", "print(1)"}, exitUsage, "--language"},
	}
	for _, c := range cases {
		r := runCLI(t, "", append([]string{"execute"}, c.args...)...)
		if r.code != c.code || !strings.Contains(r.stdout+r.stderr, c.msg) {
			t.Errorf("%s: exit %d (want %d), output %q", c.name, r.code, c.code, r.stdout+r.stderr)
		}
	}
}

func TestExecuteJSONAndFiles(t *testing.T) {
	dir := t.TempDir()
	code := filepath.Join(dir, "prog.py")
	os.WriteFile(code, []byte("import sys\ndata = open('in/data.txt').read()\nopen('out.txt','w').write(data.upper())\nprint(sys.stdin.read())\n"), 0o644)
	input := filepath.Join(dir, "data.txt")
	os.WriteFile(input, []byte("payload"), 0o644)
	outDir := filepath.Join(dir, "results")
	r := runCLI(t, "", "execute", "--code", code, "--input", "hi", "--file", "in/data.txt="+input, "-o", "json", "--output-dir", outDir, "-v")
	var res map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("not JSON: %v: %q %q", err, r.stdout, r.stderr)
	}
	for _, k := range []string{"execution_id", "status", "stdout", "stderr", "exit_code", "duration_ms", "memory_used_mb", "output_files", "cpu_time_ms"} {
		if _, ok := res[k]; !ok {
			t.Errorf("field %s missing", k)
		}
	}
	if res["status"] != "completed" || res["stdout"] != "hi\n" || res["language"] != "python" {
		t.Errorf("result %v", res)
	}
	if files, _ := res["output_files"].(map[string]any); files["out.txt"] != "PAYLOAD" || len(files) != 1 {
		t.Errorf("output files %v", res["output_files"])
	}
	if b, _ := os.ReadFile(filepath.Join(outDir, "out.txt")); string(b) != "PAYLOAD" {
		t.Errorf("--output-dir wrote %q", b)
	}
	os.WriteFile(filepath.Join(dir, "x.unknownext"), []byte("1"), 0o644)
	if r := runCLI(t, "", "execute", "--code", filepath.Join(dir, "x.unknownext")); r.code != exitUsage || !strings.Contains(r.stderr, "extension") {
		t.Errorf("unknown extension: %d %q", r.code, r.stderr)
	}
}

func TestExecuteSession(t *testing.T) {
	r := runCLI(t, "", "execute", "-l", "python", "-c", "open('kept.txt','w').write('persisted')", "--session-id", "cli-test")
	if r.code != 0 {
		t.Fatalf("first run: %d %q", r.code, r.stderr)
	}
	r = runCLI(t, "", "execute", "-l", "python", "-c", "print(open('kept.txt').read())", "--session-id", "cli-test")
	if r.stdout != "persisted\n" {
		t.Fatalf("second run: %d %q %q", r.code, r.stdout, r.stderr)
	}
}

func TestLanguagesAndDoctor(t *testing.T) {
	r := runCLI(t, "", "languages")
	for _, l := range []string{"python", "javascript", "go", "rust", "java", "bash", "c", "cpp"} {
		if !strings.Contains(r.stdout, "\n"+l+" ") {
			t.Errorf("languages lacks %s:\n%s", l, r.stdout)
		}
	}
	r = runCLI(t, "", "languages", "-o", "json")
	var langs []executor.LanguageStatus
	if err := json.Unmarshal([]byte(r.stdout), &langs); err != nil || len(langs) < 8 {
		t.Fatalf("languages json: %v %q", err, r.stdout)
	}
	available := 0
	seen := map[string]bool{}
	for _, l := range langs {
		if seen[l.Name] {
			t.Errorf("%s listed twice", l.Name)
		}
		seen[l.Name] = true
		defaults := 0
		for _, v := range l.Versions {
			if v.Default {
				defaults++
				if v.Version != l.Version || v.Available != l.Available {
					t.Errorf("%s: default version %+v, top level %q", l.Name, v, l.Version)
				}
			}
		}
		if defaults != 1 {
			t.Errorf("%s: %d default versions", l.Name, defaults)
		}
		if l.Available {
			available++
			if l.Version == "" {
				t.Errorf("%s: no version", l.Name)
			}
		} else if l.Reason == "" {
			t.Errorf("%s: unavailable without a reason", l.Name)
		}
	}
	if available < 8 {
		t.Errorf("only %d languages available", available)
	}
	// --version picks the language version by prefix.
	for _, l := range langs {
		if l.Name != "python" {
			continue
		}
		for _, v := range l.Versions {
			if !v.Available {
				continue
			}
			minor := strings.Join(strings.SplitN(v.Version, ".", 3)[:2], ".")
			r := runCLI(t, "", "execute", "-l", "python", "--version", minor, "-c", "import sys; print('%d.%d' % sys.version_info[:2])")
			if r.code != 0 || r.stdout != minor+"\n" {
				t.Errorf("python --version %s: %d %q %q", minor, r.code, r.stdout, r.stderr)
			}
		}
	}
	r = runCLI(t, "", "doctor")
	if r.code != 0 || !strings.Contains(r.stdout, "cgroup") || !strings.Contains(r.stdout, "verdict: this host can run sandboxes") {
		t.Errorf("doctor: %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, "", "doctor", "-o", "json")
	var report struct {
		OK bool `json:"ok"`
	}
	if json.Unmarshal([]byte(r.stdout), &report); !report.OK {
		t.Errorf("doctor json: %q", r.stdout)
	}
	if r := runCLI(t, "", "version"); !strings.HasPrefix(r.stdout, "sandbox-run ") {
		t.Errorf("version: %q", r.stdout)
	}
	if r := runCLI(t, "", "frobnicate"); r.code != exitUsage || !strings.Contains(r.stderr, "unknown command") {
		t.Errorf("unknown command: %d %q", r.code, r.stderr)
	}
	if r := runCLI(t, ""); r.code != exitUsage || !strings.Contains(r.stderr, "Usage") {
		t.Errorf("no command: %d %q", r.code, r.stderr)
	}
}

// TestExecuteResponseBudget: --max-response bounds the JSON the CLI
// prints (files that do not fit are skipped and listed), NUL-heavy output
// is base64, and the result says it was cut.
func TestExecuteResponseBudget(t *testing.T) {
	r := runCLI(t, "", "execute", "-l", "python", "-o", "json", "--max-response", "3000000", "--code",
		"import sys\nsys.stdout.buffer.write(bytes(1000))\nfor n in 'abc': open(n + '.bin', 'wb').write(bytes(1 << 20))")
	var res struct {
		Status            string           `json:"status"`
		StdoutEncoding    string           `json:"stdout_encoding"`
		OutputFiles       map[string]any   `json:"output_files"`
		SkippedFiles      []map[string]any `json:"skipped_files"`
		ResponseTruncated bool             `json:"response_truncated"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("not JSON: %v: %.300q %q", err, r.stdout, r.stderr)
	}
	if len(r.stdout) > 3000000+4096 {
		t.Fatalf("%d bytes of JSON for --max-response 3000000", len(r.stdout))
	}
	if res.Status != "completed" || res.StdoutEncoding != "base64" || !res.ResponseTruncated || len(res.OutputFiles) != 2 || len(res.SkippedFiles) != 1 {
		t.Fatalf("status %s, stdout_encoding %q, response_truncated %v, %d files, skipped %v", res.Status, res.StdoutEncoding, res.ResponseTruncated, len(res.OutputFiles), res.SkippedFiles)
	}
	if r := runCLI(t, "", "execute", "-l", "python", "--max-response", "-1", "--code", "1"); r.code != exitUsage {
		t.Errorf("--max-response -1: exit %d, want %d", r.code, exitUsage)
	}
}
