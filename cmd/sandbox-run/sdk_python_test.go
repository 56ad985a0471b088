package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestPythonSDK installs the Python SDK (clients/python) into a fresh
// virtual environment as its README says, `pip install ./clients/python`,
// and runs its tests (python -m unittest) from there against a real serve
// with an API key: every method, over HTTP and SSE, and the README's
// examples. The secrets' test and example run against a stand-in API that
// the tests start on a port of this machine the server allows as
// host.sandbox.internal:PORT (sdkTestPort): the stand-in gets the value,
// the program only its placeholder, and the server's log neither.
//
// Nothing is downloaded (pip runs with PIP_NO_INDEX): the package builds
// with its own standard-library backend (clients/python/build_backend,
// `requires = []`), in pip's isolated build environment, into a venv
// without the system's site-packages. An interpreter that cannot make a
// venv with pip (Debian's without python3-venv) runs the tests from the
// sources instead (the test says so), which checks the client but not its
// packaging.
func TestPythonSDK(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the SDK's install and tests take a while")
	}
	candidates := pythonCandidates()
	if len(candidates) == 0 {
		t.Skip("python3 is not installed: the Python SDK's tests need Python 3.9 or later")
	}
	python := ""
	for _, p := range candidates {
		if exec.Command(p, "-c", "import sys; sys.exit(sys.version_info < (3, 9))").Run() == nil {
			python = p
			break
		}
	}
	if python == "" {
		t.Skipf("no Python 3.9 or later among %q", candidates)
	}

	src, err := filepath.Abs(filepath.Join("..", "..", "clients", "python"))
	if err != nil {
		t.Fatal(err)
	}
	// A copy, so that nothing the install or the tests leave (bytecode of
	// the build backend, say) lands in the checkout.
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "python")
	if err := copyPythonSDK(src, dir); err != nil {
		t.Fatalf("copy %s: %v", src, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	env := pythonEnv()
	run := func(extra []string, name string, args ...string) (string, error) {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = tmp // not dir: `python -m` would import the package from the sources
		cmd.Env = append(append([]string(nil), env...), extra...)
		cmd.WaitDelay = 10 * time.Second
		b, err := cmd.CombinedOutput()
		return string(b), err
	}

	// Install: with the first interpreter (3.9+) that makes a venv with pip.
	interp, installed := "", false
	for _, p := range candidates {
		if out, err := run(nil, p, "-c", canMakeVenv); err != nil {
			t.Logf("%s: %s", p, strings.TrimSpace(out))
			continue
		}
		venv := filepath.Join(tmp, "venv")
		os.RemoveAll(venv)
		if out, err := run(nil, p, "-m", "venv", venv); err != nil {
			t.Logf("%s -m venv: %v\n%s", p, err, out)
			continue
		}
		vpy := filepath.Join(venv, "bin", "python")
		out, err := run(nil, vpy, "-m", "pip", "install", "--no-cache-dir", "--disable-pip-version-check", dir)
		if err != nil {
			t.Fatalf("pip install %s (%s, offline): %v\n%s", dir, p, err, out)
		}
		interp, installed = vpy, true
		break
	}
	var extra []string
	if !installed {
		t.Logf("no interpreter among %q makes a venv with pip (python3-venv): "+
			"the tests run from the sources (PYTHONPATH), the packaging is not checked", candidates)
		interp, extra = python, []string{"PYTHONPATH=" + dir}
	}
	const where = "import importlib.metadata as m, os, sandbox_run as s; " +
		"print(s.__file__); print(os.path.exists(os.path.join(os.path.dirname(s.__file__), 'py.typed'))); " +
		"print(m.version('sandbox-run') if os.environ.get('CHECK_DIST') else s.__version__)"
	check := extra
	if installed {
		check = append(check, "CHECK_DIST=1")
	}
	out, err := run(check, interp, "-c", where)
	if err != nil {
		t.Fatalf("import sandbox_run: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	venvPart := string(filepath.Separator) + "venv" + string(filepath.Separator)
	if len(lines) != 3 || (installed && (!strings.Contains(lines[0], venvPart) || !strings.Contains(lines[0], "site-packages") || lines[1] != "True")) {
		t.Fatalf("sandbox_run is not the installed package with py.typed:\n%s", out)
	}
	t.Logf("sandbox_run %s from %s", lines[2], lines[0])

	b := make([]byte, 16)
	rand.Read(b)
	key := hex.EncodeToString(b)
	port := sdkTestPort(t)
	srv := startServe(t, []string{"SANDBOX_RUN_API_KEYS=sdk=" + key, "SANDBOX_RUN_NETWORK_ALLOW=host.sandbox.internal:" + port})
	checkNotOnPort(t, srv, port)
	extra = append(extra, "SANDBOX_RUN_URL="+srv.url, "SANDBOX_RUN_API_KEY="+key, "SANDBOX_RUN_TEST_PORT="+port)
	out, err = run(extra, interp, "-m", "unittest", "discover", "-v", "-s", filepath.Join(dir, "tests"))
	if err != nil {
		t.Fatalf("python -m unittest: %v\n%s\nserver log:\n%s", err, out, srv.stderr)
	}
	t.Logf("python -m unittest:\n%s", out)
	if !regexp.MustCompile(`(?m)^Ran \d+ tests? in`).MatchString(out) || !regexp.MustCompile(`(?m)^OK\b`).MatchString(out) {
		t.Errorf("unittest did not report OK")
	}
	if strings.Contains(out, "SANDBOX_RUN_URL is not set") {
		t.Errorf("tests were skipped for want of a server")
	}
	if !regexp.MustCompile(`(?m)^test_examples_run \([^)]*\) \.\.\. ok$`).MatchString(out) {
		t.Errorf("the README examples did not run")
	}
	if !regexp.MustCompile(`(?m)^test_secrets \([^)]*SecretsTest[^)]*\) \.\.\. ok$`).MatchString(out) {
		t.Errorf("the secrets' test did not run")
	}
	if !regexp.MustCompile(`(?m)^test_live_secrets \([^)]*SandboxSecretsTest[^)]*\) \.\.\. ok$`).MatchString(out) {
		t.Errorf("the live sandbox secrets' test did not run")
	}
	if !regexp.MustCompile(`(?m)^test_interpreter_session_secrets \([^)]*SecretsTest[^)]*\) \.\.\. ok$`).MatchString(out) {
		t.Errorf("the interpreter session secrets' test did not run")
	}
	checkNoSecretValues(t, srv)
}

// TestSDKDocsSecrets runs docs/SDKS.md's secrets examples against a
// server that allows a stand-in API on a loopback port as
// host.sandbox.internal (the docs' 8000, here a free one): the Python one
// with the SDK from its sources, then the TypeScript one with the SDK built
// in a copy (skipped without node and npm, or with -short). Each must print
// the ```text block under the Python one, while the stand-in gets the value
// in the header and the server's log never holds it.
func TestSDKDocsSecrets(t *testing.T) {
	sdkDocsWithAPI(t, "## Secrets", 1)
}

// TestSDKDocsSandboxSecrets runs docs/SDKS.md's example of a live
// sandbox's network and secrets as TestSDKDocsSecrets runs the secrets'
// ones: each language's makes two requests (before the network is cut and
// after it is given back), each with the value in the header.
func TestSDKDocsSandboxSecrets(t *testing.T) {
	sdkDocsWithAPI(t, "### A sandbox's network and secrets", 2)
}

// sdkDocsWithAPI runs the python and js examples under heading in
// docs/SDKS.md against a stand-in API (the docs' port 8000, here a free
// one) that each example sends perExample requests to, every one
// "GET / Bearer sk-live-1234".
func sdkDocsWithAPI(t *testing.T, heading string, perExample int) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	api := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		io.WriteString(w, "ok")
	})}
	go api.Serve(ln)
	defer api.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	srv := startServe(t, []string{"SANDBOX_RUN_NETWORK_ALLOW=host.sandbox.internal:" + port})
	const addr = "http://127.0.0.1:8080"
	example := func(kind string) string {
		block := docBlock(t, "docs/SDKS.md", heading, kind)
		return strings.ReplaceAll(strings.ReplaceAll(block, addr, srv.url), "8000", port)
	}
	want := strings.TrimSpace(example("text"))
	gotByAPI := func(examples int) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		n := examples * perExample
		if len(got) != n {
			t.Errorf("the stand-in API got %q, want %d requests", got, n)
			return
		}
		for _, g := range got {
			if g != "GET / Bearer sk-live-1234" {
				t.Errorf("the stand-in API got %q", got)
				return
			}
		}
	}

	sdk, err := filepath.Abs(filepath.Join("..", "..", "clients", "python"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, "-c", example("python"))
	cmd.Dir = t.TempDir()
	cmd.Env = append(pythonEnv(), "PYTHONPATH="+sdk)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != want {
		t.Errorf("the Python example: %v, printed\n%s\nthe docs show\n%s", err, out, want)
	}
	gotByAPI(1)
	checkNoSecretValues(t, srv)

	node, errNode := exec.LookPath("node")
	npm, errNpm := exec.LookPath("npm")
	if testing.Short() || errNode != nil || errNpm != nil {
		t.Skip("the TypeScript example needs node and npm (and no -short)")
	}
	src, err := filepath.Abs(filepath.Join("..", "..", "clients", "typescript"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "typescript")
	if err := copyTypeScriptSDK(src, dir); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{npm, "ci", "--no-audit", "--no-fund"}, {npm, "exec", "--", "tsc", "-p", "."}} {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "npm_config_update_notifier=false")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args[1:], " "), err, out)
		}
	}
	js := strings.ReplaceAll(example("js"), `"@sandbox-run/client"`, `"./dist/index.js"`)
	if err := os.WriteFile(filepath.Join(dir, "example.mjs"), []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command(node, "example.mjs")
	cmd.Dir = dir
	out, err = cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != want {
		t.Errorf("the TypeScript example: %v, printed\n%s\nwant\n%s", err, out, want)
	}
	gotByAPI(2)
	checkNoSecretValues(t, srv)
}

// sdkTestPort is a free port of this machine's loopback for the SDK tests'
// stand-in API (SANDBOX_RUN_TEST_PORT), which they listen on themselves:
// the server's network.allow lists it as host.sandbox.internal:PORT.
func sdkTestPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// checkNotOnPort fails when the server took the stand-in's port (freed
// for the tests to listen on) for itself: its runs would reach its API.
func checkNotOnPort(t *testing.T, srv *serveProc, port string) {
	t.Helper()
	if strings.HasSuffix(srv.url, ":"+port) {
		t.Fatalf("the server listens on %s, the port meant for the SDK tests' stand-in API: run the test again", srv.url)
	}
}

// checkNoSecretValues fails when the server's log holds a value the SDK
// tests stored as a secret (their own, sk-sdk-test-..., or the README's).
func checkNoSecretValues(t *testing.T, srv *serveProc) {
	t.Helper()
	log := srv.stderr.String()
	for _, value := range []string{"sk-sdk-test-", "sk-live-1234"} {
		if strings.Contains(log, value) {
			t.Errorf("the server's log holds a secret's value (%s...)", value)
		}
	}
}

// canMakeVenv exits 0 when the interpreter is 3.9 or later and has venv
// and ensurepip (Debian's python3 has them with python3-venv).
const canMakeVenv = `
import sys
if sys.version_info < (3, 9):
    sys.exit("Python %d.%d is older than 3.9" % sys.version_info[:2])
try:
    import ensurepip, venv
except ImportError as e:
    sys.exit("no venv with pip (%s): install python3-venv" % e)
`

// pythonCandidates are the python3 on PATH and the system's, each once.
func pythonCandidates() []string {
	var out []string
	seen := map[string]bool{}
	for _, name := range []string{"python3", "/usr/bin/python3", "/usr/local/bin/python3"} {
		p, err := exec.LookPath(name)
		if err != nil {
			continue
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			real = p
		}
		if !seen[real] {
			seen[real] = true
			out = append(out, p)
		}
	}
	return out
}

// pythonEnv is the environment of the Python commands: no Python paths of
// the caller's, no bytecode files, pip quiet and offline.
func pythonEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "PIP_REQUIRE_VIRTUALENV", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "PYTHONDONTWRITEBYTECODE=1", "PYTHONNOUSERSITE=1", "PIP_NO_INPUT=1", "PIP_NO_INDEX=1")
}

// copyTree copies the regular files under src to dst, leaving out the
// directories and files skip names (by their path relative to src).
func copyTree(src, dst string, skip func(rel string, d fs.DirEntry) bool) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if rel != "." && skip(rel, d) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
}

// copyPythonSDK copies the SDK's sources (not what building or testing
// left) to dst.
func copyPythonSDK(src, dst string) error {
	return copyTree(src, dst, func(rel string, d fs.DirEntry) bool {
		name := d.Name()
		if d.IsDir() {
			return name == "__pycache__" || name == "build" || name == "dist" || strings.HasPrefix(name, ".") ||
				strings.HasSuffix(name, ".egg-info")
		}
		return strings.HasSuffix(name, ".pyc")
	})
}
