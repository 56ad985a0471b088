package sandboxcmd

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/app/cli"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// runSandbox runs `sandbox-run sandbox ARGS` in this process, its stdout
// and stderr caught, and returns its exit code and what it printed.
func runSandbox(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	dir := t.TempDir()
	out, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	errf, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer errf.Close()
	oldOut, oldErr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = out, errf
	func() {
		defer func() { os.Stdout, os.Stderr = oldOut, oldErr }()
		code = Run(args, cli.NewConsole(out, errf))
	}()
	o, _ := os.ReadFile(out.Name())
	e, _ := os.ReadFile(errf.Name())
	return code, string(o), string(e)
}

// fakeSandboxes is a stand-in for a server's live sandboxes: it keeps the
// network each create and PUT .../network asked for, and answers with the
// sandbox that has it. A budget of 7 bytes it refuses, as the server
// refuses a bad one (400).
type fakeSandboxes struct {
	mu  sync.Mutex
	got []wire.NetworkRequest // the creates' (with a network) and the PUTs'
}

func (f *fakeSandboxes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var n wire.NetworkRequest
	id := "sbx1"
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/api/sandbox/sandboxes":
		var req wire.SandboxRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, `{"error":"bad json"}`, http.StatusBadRequest)
			return
		}
		if req.Network != nil {
			n = *req.Network
		}
	case r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/network"):
		if err := json.NewDecoder(r.Body).Decode(&n); err != nil {
			http.Error(w, `{"error":"bad json"}`, http.StatusBadRequest)
			return
		}
		id = strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/api/sandbox/sandboxes/"), "/network")
	default:
		http.Error(w, `{"error":"no route"}`, http.StatusNotFound)
		return
	}
	f.mu.Lock()
	f.got = append(f.got, n)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	for entry, b := range n.Budgets {
		if b == 7 {
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(map[string]string{"error": "network.budgets: " + entry + ": seven bytes is not enough"})
			return
		}
	}
	json.NewEncoder(w).Encode(wire.Sandbox{ID: id, Network: n.Allow, NetworkBudgets: n.Budgets})
}

// requests is what it was asked for, and forgets it.
func (f *fakeSandboxes) requests() []wire.NetworkRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	got := f.got
	f.got = nil
	return got
}

// TestBudgets: create --budget and network --budget send each entry's
// bytes with the list (none without --budget), network prints each
// entry's budget; a malformed --budget, one without --allow or for an
// entry --allow lacks is a usage error (2) that sends nothing, and a
// budget the server refuses is 2 with its message.
func TestBudgets(t *testing.T) {
	fake := &fakeSandboxes{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	run := func(args ...string) (int, string, string) {
		t.Helper()
		return runSandbox(t, append(args, "--server", srv.URL, "--api-key", "k")...)
	}
	const a, b = "host.sandbox.internal:8000", "*.pythonhosted.org:443"
	sameRequest := func(got []wire.NetworkRequest, allow []string, budgets map[string]int64) bool {
		if len(got) != 1 || strings.Join(got[0].Allow, " ") != strings.Join(allow, " ") || len(got[0].Budgets) != len(budgets) {
			return false
		}
		for k, v := range budgets {
			if got[0].Budgets[k] != v {
				return false
			}
		}
		return true
	}

	code, out, errOut := run("create", "--allow", a, "--allow", b, "--budget", b+"=200000000", "-o", "json")
	var sb wire.Sandbox
	if code != 0 || json.Unmarshal([]byte(out), &sb) != nil || sb.NetworkBudgets[b] != 200000000 {
		t.Fatalf("create --budget: %d %q %q", code, out, errOut)
	}
	if got := fake.requests(); !sameRequest(got, []string{a, b}, map[string]int64{b: 200000000}) {
		t.Errorf("create --budget sent %+v", got)
	}
	if code, out, errOut := run("create", "--allow", a); code != 0 || out != "sbx1\n" {
		t.Errorf("create --allow: %d %q %q", code, out, errOut)
	}
	if got := fake.requests(); !sameRequest(got, []string{a}, nil) || got[0].Budgets != nil {
		t.Errorf("create without --budget sent %+v", got)
	}

	code, out, errOut = run("network", "sbx9", "--allow", a, "--budget", a+"=1048576", "--allow", b, "--budget", b+"=5000")
	if want := "sbx9 reaches " + a + " (budget 1048576 bytes) " + b + " (budget 5000 bytes)\n"; code != 0 || out != want {
		t.Errorf("network --budget: %d %q %q, want %q", code, out, errOut, want)
	}
	if got := fake.requests(); !sameRequest(got, []string{a, b}, map[string]int64{a: 1 << 20, b: 5000}) {
		t.Errorf("network --budget sent %+v", got)
	}
	if code, out, _ := run("network", "sbx9", "--allow", a); code != 0 || out != "sbx9 reaches "+a+"\n" {
		t.Errorf("network without --budget: %d %q", code, out)
	}
	if got := fake.requests(); !sameRequest(got, []string{a}, nil) {
		t.Errorf("network without --budget sent %+v", got)
	}
	code, out, _ = run("network", "sbx9", "--allow", a, "--budget", a+"=99", "-o", "json")
	if json.Unmarshal([]byte(out), &sb) != nil || code != 0 || sb.NetworkBudgets[a] != 99 {
		t.Errorf("network --budget -o json: %d %q", code, out)
	}
	fake.requests()

	// Usage errors: nothing is sent.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"create", "--allow", a, "--budget", a}, "want ENTRY=BYTES"},
		{[]string{"create", "--allow", a, "--budget", "=5"}, "want ENTRY=BYTES"},
		{[]string{"create", "--allow", a, "--budget", a + "=200M"}, "whole number"},
		{[]string{"create", "--allow", a, "--budget", a + "=0"}, "above 0"},
		{[]string{"network", "sbx9", "--allow", a, "--budget", a + "=-3"}, "above 0"},
		{[]string{"network", "sbx9", "--allow", a, "--budget", a + "=1.5"}, "whole number"},
		{[]string{"create", "--budget", a + "=5"}, "--budget needs --allow"},
		{[]string{"network", "sbx9", "--budget", a + "=5"}, "--budget needs --allow"},
		{[]string{"create", "--allow", a, "--budget", b + "=5"}, "not an --allow entry"},
		{[]string{"network", "sbx9", "--allow", a, "--budget", b + "=5"}, "not an --allow entry"},
	} {
		code, out, errOut := run(c.args...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, c.want) || !strings.Contains(errOut, "--budget") {
			t.Errorf("%q: %d %q %q, want exit 2 with %q", c.args, code, out, errOut, c.want)
		}
	}
	if got := fake.requests(); len(got) != 0 {
		t.Errorf("usage errors sent %+v", got)
	}

	// A budget the server refuses: 2, with its message.
	for _, args := range [][]string{{"create", "--allow", a, "--budget", a + "=7"}, {"network", "sbx9", "--allow", a, "--budget", a + "=7"}} {
		if code, out, errOut := run(args...); code != exitUsage || out != "" || !strings.Contains(errOut, "seven bytes") {
			t.Errorf("%q refused: %d %q %q", args, code, out, errOut)
		}
	}
}
