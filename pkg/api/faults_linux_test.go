package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/internal/testkit/leakcheck"
	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// Faults of the host under a real server: the data directory's disk is
// full, a language's toolchain is missing, the sandbox uid range is used
// up, and cgroups cannot be set up.

// mountTmpfs mounts a tmpfs of size on dir (a directory the test created)
// until the test ends.
func mountTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size="+size+",mode=0755"); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Logf("unmount %s: %v; detaching", dir, err)
			if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", dir, err)
			}
		}
	})
}

// fillDisk writes a file in dir until the filesystem is full.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, chunk := range []int{64 << 10, 4 << 10, 1} {
		buf := make([]byte, chunk)
		for {
			if _, err := f.Write(buf); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("filling %s: %v", dir, err)
				}
				break
			}
		}
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil || st.Bavail != 0 {
		t.Fatalf("the disk is not full: %d blocks free (%v)", st.Bavail, err)
	}
	return path
}

// wantClearStorageError checks an answer to a write on a full disk: a
// documented 5xx (507 preferred) or 503 that says the disk is full.
func wantClearStorageError(t *testing.T, what string, resp *http.Response, data []byte, statuses ...int) {
	t.Helper()
	ok := false
	for _, s := range statuses {
		ok = ok || resp.StatusCode == s
	}
	if !ok {
		t.Errorf("%s on a full disk: %d %s, want one of %v", what, resp.StatusCode, data, statuses)
		return
	}
	if e := decodeError(t, data); !strings.Contains(e.Error, "no space left on device") && !strings.Contains(e.Error, "full") {
		t.Errorf("%s on a full disk: %q does not say the disk is full", what, e.Error)
	}
	if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
		t.Errorf("%s: 503 without Retry-After", what)
	}
}

func TestFaultDiskFull(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	data := filepath.Join(root, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	mountTmpfs(t, data, "256k")
	x, err := executor.New(executor.Config{DataDir: data, CacheDir: filepath.Join(root, "cache"), Engine: testEngine})
	if err != nil {
		t.Fatal(err)
	}
	cfg := jobsConfig(t)
	cfg.DataDir = data
	cfg.MaxFileBytes, cfg.FileQuotaBytes = 64<<10, 64<<20 // the disk fills before the quota
	ts := serveWith(t, cfg, x)

	// Everything works on a disk with room.
	ts.awaitJob(t, ts.submit(t, py("print('before')"), "").ExecutionID, "")
	sess := ts.createSession(t, "", map[string]any{"language": "python"})
	ts.stored(t, "", []byte("before"), "?name=before.txt")

	filler := fillDisk(t, data)
	var suggestions []string

	// Uploads: a clear refusal, and no half-written upload left behind.
	for _, size := range []int{0, 16 << 10} {
		resp, body := ts.upload(t, "", bytes.Repeat([]byte("u"), size), "?name=full.txt")
		wantClearStorageError(t, fmt.Sprintf("a %d-byte upload", size), resp, body, http.StatusInsufficientStorage, http.StatusInternalServerError)
		if resp.StatusCode == http.StatusInternalServerError {
			suggestions = append(suggestions, fmt.Sprintf("upload on a full disk answers 500 %q: map ENOSPC/EDQUOT to 507", strings.TrimSpace(string(body))))
		}
	}
	if left, _ := filepath.Glob(filepath.Join(data, "files", ".*")); len(left) > 0 {
		t.Errorf("temporary files left in the store: %v", left)
	}

	// Async submissions: a clear refusal, or accepted (bbolt may reuse
	// pages it has) and then finished, at the latest once there is room.
	resp, body := ts.execute(t, with(py("print('async on a full disk')"), "async", true))
	var fullJob string
	switch resp.StatusCode {
	case http.StatusAccepted:
		var js JobStatus
		json.Unmarshal(body, &js)
		fullJob = js.ExecutionID
		resp, body = ts.getJob(t, fullJob, "wait=true&timeout=2", "")
		if s := jobStatusOf(t, body); s != "queued" && s != "running" {
			if res := decodeResult(t, body); res.Status != "completed" && !strings.Contains(res.Error, "no space left on device") {
				t.Errorf("async job on a full disk: %s", body)
			}
			fullJob = ""
		}
	default:
		wantClearStorageError(t, "an async submission", resp, body, http.StatusServiceUnavailable, http.StatusInsufficientStorage)
	}

	// Creating a session writes its metadata: a clear refusal.
	resp, body = ts.call(t, request{method: "POST", path: "/api/sandbox/sessions", body: []byte(`{"language":"python"}`)})
	wantClearStorageError(t, "creating a session", resp, body, http.StatusInsufficientStorage, http.StatusInternalServerError)
	if resp.StatusCode == http.StatusInternalServerError {
		suggestions = append(suggestions, fmt.Sprintf("session creation on a full disk answers 500 %q: map ENOSPC to 507", strings.TrimSpace(string(body))))
	}
	// A run in a session cannot save /work: it says so.
	resp, body = ts.execute(t, with(py("open('kept.txt', 'w').write('x' * 100000)\nprint('ran')"), "session_id", sess.SessionID))
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a run in a session on a full disk: %d %s", resp.StatusCode, body)
	} else if res := decodeResult(t, body); res.Stdout != "ran\n" || !strings.Contains(res.Error, "session not saved") || !strings.Contains(res.Error, "no space left on device") {
		t.Errorf("a run in a session on a full disk: stdout %q error %q", res.Stdout, res.Error)
	}

	// Synchronous executions need no disk of the server's.
	if res := ts.run(t, py("print('sync on a full disk')")); res.Status != "completed" || res.Stdout != "sync on a full disk\n" {
		t.Errorf("sync run on a full disk: %s %q %q", res.Status, res.Stdout, res.Stderr)
	}
	if resp, _ := ts.get(t, "/healthz", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("healthz on a full disk: %d", resp.StatusCode)
	}
	// What was stored before is still served.
	resp, body = ts.get(t, "/api/sandbox/files", "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "before.txt") {
		t.Errorf("file list on a full disk: %d %s", resp.StatusCode, body)
	}

	// Room again: everything recovers without a restart.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	ts.stored(t, "", bytes.Repeat([]byte("r"), 16<<10), "?name=after.txt")
	res, _ := ts.awaitJob(t, ts.submit(t, py("print('after')"), "").ExecutionID, "")
	if res.Stdout != "after\n" {
		t.Errorf("async after recovery: %q %q", res.Stdout, res.Error)
	}
	if fullJob != "" {
		// The job accepted on the full disk ran; its result, which could
		// not be stored then, is stored once there is room (jobs.finish
		// retries with a backoff of at most 5 s).
		resp, body = ts.getJob(t, fullJob, "wait=true&timeout=20", "")
		if s := jobStatusOf(t, body); s != "completed" {
			t.Errorf("the job accepted on the full disk, once there is room again: %s (its result must be stored, not left \"running\")", body)
		}
	}
	ts.createSession(t, "", map[string]any{"language": "python"})
	if res := ts.run(t, with(py("print(open('kept.txt').read() if __import__('os').path.exists('kept.txt') else 'none')\nopen('kept.txt', 'w').write('saved')"), "session_id", sess.SessionID)); res.Error != "" {
		t.Errorf("session run after recovery: %q", res.Error)
	}
	if res := ts.run(t, with(py("print(open('kept.txt').read())"), "session_id", sess.SessionID)); res.Stdout != "saved\n" {
		t.Errorf("session after recovery: %q %q", res.Stdout, res.Stderr)
	}
	select {
	case err := <-ts.done:
		t.Fatalf("Serve returned: %v", err)
	default:
	}
	for _, s := range suggestions {
		t.Log("SUGGESTION: " + s)
	}
}

// ghostLanguages adds languages whose toolchains are not on this host.
const ghostLanguages = `
languages:
  - name: ghostlang
    aliases: [ghost]
    extensions: [ghost]
    source: main.ghost
    toolchain: [/nonexistent/ghostlang/bin/ghost, ghostlang-never-installed]
    version: ["{bin}", --version]
    run: ["{bin}", main.ghost]
  - name: brokenlang
    source: main.broken
    toolchain: [/bin/false]
    version: ["{bin}", --version]
    run: ["{bin}", main.broken]
`

func TestFaultMissingToolchain(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	langs := filepath.Join(dir, "languages.yaml")
	if err := os.WriteFile(langs, []byte(ghostLanguages), 0o644); err != nil {
		t.Fatal(err)
	}
	x, err := executor.New(executor.Config{Languages: langs, DataDir: filepath.Join(dir, "data"), Engine: testEngine})
	if err != nil {
		t.Fatal(err)
	}
	cfg := jobsConfig(t)
	ts := serveWith(t, cfg, x)

	for _, tt := range []struct {
		name string
		body map[string]any
		msg  []string
	}{
		{"missing", map[string]any{"language": "ghostlang", "code": "boo"}, []string{`language "ghostlang" is not available`, "no toolchain found", "/nonexistent/ghostlang/bin/ghost", "ghostlang-never-installed"}},
		{"missing_alias", map[string]any{"language": "GHOST", "code": "boo"}, []string{`language "GHOST" is not available`, "no toolchain found"}},
		{"missing_async", map[string]any{"language": "ghostlang", "code": "boo", "async": true}, []string{"not available", "no toolchain found"}},
		{"missing_test_cases", map[string]any{"language": "ghostlang", "code": "boo", "test_cases": []map[string]string{{"input_data": "1"}}}, []string{"not available"}},
		{"version_check_fails", map[string]any{"language": "brokenlang", "code": "x"}, []string{`language "brokenlang" is not available`, "version check", "/bin/false", "exit status 1"}},
	} {
		resp, data := ts.execute(t, tt.body)
		wantError(t, resp, data, http.StatusBadRequest, tt.msg...)
	}
	// Sessions refuse it too.
	resp, data := ts.call(t, request{method: "POST", path: "/api/sandbox/sessions", body: []byte(`{"language":"ghost"}`)})
	wantError(t, resp, data, http.StatusBadRequest, `language "ghost" is not available`, "no toolchain found")

	// The languages endpoint lists what runs, and only that.
	resp, data = ts.get(t, "/api/sandbox/languages", "")
	var list []LanguageInfo
	if err := json.Unmarshal(data, &list); resp.StatusCode != http.StatusOK || err != nil {
		t.Fatalf("languages: %d %s", resp.StatusCode, data)
	}
	var names []string
	for _, l := range list {
		names = append(names, l.Name)
	}
	if strings.Contains(strings.Join(names, ","), "ghost") || strings.Contains(strings.Join(names, ","), "broken") || !strings.Contains(strings.Join(names, ","), "python") {
		t.Errorf("languages listed: %v", names)
	}
	// An unknown language names what is supported, without the ghosts.
	resp, data = ts.execute(t, map[string]any{"language": "cobol-2099", "code": "x"})
	if e := wantError(t, resp, data, http.StatusBadRequest, "Unsupported language: 'cobol-2099'", "python"); strings.Contains(e.Error, "ghost") {
		t.Errorf("the supported list names a missing language: %s", e.Error)
	}
	// The server is fine.
	if res := ts.run(t, py("print('python still runs')")); res.Stdout != "python still runs\n" {
		t.Errorf("python: %q %q", res.Stdout, res.Stderr)
	}
	if resp, _ := ts.get(t, "/healthz", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("healthz: %d", resp.StatusCode)
	}
}

// uidProcesses lists processes that run as a host uid in [base, base+n).
func uidProcesses(base, n int) []string { return leakcheck.Processes(base, base+n, "") }

func TestFaultUIDRangeExhausted(t *testing.T) {
	// Not parallel: a second Engine in this process names its run cgroups
	// run-<pid>-<n> with its own counter, like testEngine; two live runs
	// with the same n would share a cgroup (see the report).
	// One uid slot (two host uids) of this binary's block, which no other
	// test binary uses.
	base, _ := leakcheck.UIDBlock(leakcheck.BandAPIFaults)
	e, err := sandbox.New(sandbox.Config{UIDSlots: 1, UIDBase: base})
	if err != nil {
		t.Fatal(err)
	}
	x, err := executor.New(executor.Config{DataDir: t.TempDir(), Engine: e})
	if err != nil {
		t.Fatal(err)
	}
	cfg := jobsConfig(t)
	cfg.Workers = 2
	cfg.Prewarm = 0 // a sandbox built ahead would hold the only slot
	ts := serveWith(t, cfg, x)

	var wg sync.WaitGroup
	wg.Add(1)
	var first *http.Response
	var firstBody []byte
	go func() {
		defer wg.Done()
		var err error
		first, firstBody, err = ts.send(t, executeRequest(t, py("import time\ntime.sleep(2)\nprint('slow done')")))
		if err != nil {
			t.Errorf("slow run: %v", err)
		}
	}()
	if !waitFor(20*time.Second, func() bool { return len(uidProcesses(base, 2)) > 0 }) {
		t.Fatal("the slow run never started")
	}
	// The only slot is taken: the second run cannot get a sandbox.
	start := time.Now()
	resp, data := ts.execute(t, py("print('second')"))
	elapsed := time.Since(start)
	// Every uid slot in use is the host's momentary lack of room: 503 with
	// Retry-After, never a 500 error_setup that blames the server.
	wantError(t, resp, data, http.StatusServiceUnavailable, "busy")
	if resp.Header.Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	if elapsed > time.Second {
		t.Errorf("the refusal took %v: it should not wait for the slot", elapsed)
	}
	wg.Wait()
	if first == nil || first.StatusCode != http.StatusOK || decodeResult(t, firstBody).Stdout != "slow done\n" {
		t.Fatalf("slow run: %v %s", first, firstBody)
	}
	// The slot is back: runs work again.
	for i := range 2 {
		if res := ts.run(t, py(fmt.Sprintf("print('again %d')", i))); res.Stdout != fmt.Sprintf("again %d\n", i) {
			t.Errorf("run %d after the slot came back: %s %q %q", i, res.Status, res.Stdout, res.Error)
		}
	}
	// The slot's pooled sandbox waits idle for the next run: only when it
	// is drained may nothing of the engine's uids remain.
	e.Drain()
	if !waitFor(5*time.Second, func() bool { return len(uidProcesses(base, 2)) == 0 }) {
		t.Errorf("processes of the engine's uids left: %v", uidProcesses(base, 2))
	}
	if resp, _ := ts.get(t, "/healthz", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("healthz: %d", resp.StatusCode)
	}
}

// With cgroups unusable the engine refuses to start with a SetupError
// that names them; `sandbox-run serve` then logs "cannot sandbox on this
// host" with the error and exits 125 (cmd/sandbox-run/serve.go), before
// listening. The server's configuration has no cgroup parent setting, so
// this is tested at sandbox.New.
func TestFaultCgroupUnavailable(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, parent string
		msg          []string
	}{
		// cgroup.procs is a file in every cgroup directory: nothing can be
		// created below it, on v1 or v2.
		{"parent_under_a_file", "cgroup.procs/sandbox-run-fault", []string{"cgroup.procs", "not a directory"}},
		{"parent_with_nul", "sandbox-run\x00fault", []string{"invalid argument"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			lo, _ := leakcheck.UIDBlock(leakcheck.BandAPIFaults)
			e, err := sandbox.New(sandbox.Config{CgroupParent: tt.parent, UIDBase: lo + 16, UIDSlots: 1})
			if err == nil {
				t.Fatalf("New succeeded with cgroup parent %q: %+v", tt.parent, e.Cgroups())
			}
			var se *sandbox.SetupError
			if !errors.As(err, &se) || !strings.Contains(se.Step, "cgroup") {
				t.Fatalf("error %v (%T), want a SetupError of a cgroup step", err, err)
			}
			msg := err.Error()
			wants := append([]string{"sandbox setup: cgroup"}, tt.msg...)
			for _, want := range wants {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q lacks %q", msg, want)
				}
			}
		})
	}
	// The engine the other tests use is untouched.
	if res, err := testEngine.Run(t.Context(), &sandbox.Spec{Args: []string{"/bin/true"}, Mounts: sandbox.SystemMounts}); err != nil || res.ExitCode != 0 {
		t.Errorf("default engine after the failures: %v %+v", err, res)
	}
}
