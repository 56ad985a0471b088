package live_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/live"
	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
	"github.com/sandbox-run/sandbox-run/pkg/local"
)

// hostServer serves "hello from PORT" on a port of the host's loopback.
func hostServer(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %d", port)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return port
}

// fetch is a script that prints what url answers, or "failed".
func fetch(url string) string {
	return `python3 -c '
import urllib.request
try:
    print(urllib.request.urlopen("` + url + `", timeout=10).read().decode())
except Exception as e:
    print("failed", type(e).__name__)
'`
}

// TestLiveNetwork: a live sandbox with a network reaches what its
// allow-list names and nothing else; one without has none; a sandbox kept
// over a restart (the Manager detaches, a new one adopts it) has its
// network again, under the same allow-list; one made from a snapshot of a
// sandbox without a network has the network its create asks for. Under
// the engine and under gVisor, whose forks (and sandboxes from snapshots,
// with their memory) have the network too, each an egress of its own.
func TestLiveNetwork(t *testing.T) {
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skipf("no TUN devices: %v", err)
	}
	bothIsolations(t, liveNetwork)
}

func liveNetwork(t *testing.T, x *executor.Executor, cfg live.Config, isolation string) {
	allowed, other := hostServer(t), hostServer(t)
	m := live.NewManager(local.LiveStarter(x), cfg)
	ctx := context.Background()
	allow := []string{fmt.Sprintf("host.sandbox.internal:%d", allowed)}
	s, err := m.Create(ctx, "k", live.CreateOptions{Network: allow, Timeout: time.Hour, Isolation: isolation})
	if err != nil {
		t.Fatal(err)
	}
	none, err := m.Create(ctx, "k", live.CreateOptions{Timeout: time.Hour, Isolation: isolation})
	if err != nil {
		t.Fatal(err)
	}
	check := func(s *live.Sandbox, port int, want string) {
		t.Helper()
		out, errs, code := sh(t, s, fetch(fmt.Sprintf("http://host.sandbox.internal:%d/", port)))
		if code != 0 || !strings.HasPrefix(out, want) {
			t.Errorf("port %d: %q (exit %d, stderr %q), want %q", port, out, code, errs, want)
		}
	}
	check(s, allowed, fmt.Sprintf("hello from %d", allowed))
	check(s, other, "failed")
	check(none, allowed, "failed")

	m.Detach()
	m2 := live.NewManager(local.LiveStarter(x), cfg)
	defer m2.Close()
	s2, err := m2.Get("k", s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(s2.Network, " ") != strings.Join(allow, " ") {
		t.Errorf("network after the take-over: %q", s2.Network)
	}
	check(s2, allowed, fmt.Sprintf("hello from %d", allowed))
	check(s2, other, "failed")
	none2, err := m2.Get("k", none.ID)
	if err != nil {
		t.Fatal(err)
	}
	check(none2, allowed, "failed")

	// Its network changed while it runs: the other port now, not the
	// first; kept over another take-over. One made without a network
	// cannot be given one.
	other2 := []string{fmt.Sprintf("host.sandbox.internal:%d", other)}
	if err := m2.SetNetwork("k", s2.ID, other2, map[string]int64{other2[0]: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	check(s2, other, fmt.Sprintf("hello from %d", other))
	check(s2, allowed, "failed")
	if err := m2.SetNetwork("k", none2.ID, other2, nil); !errors.Is(err, live.ErrInvalid) {
		t.Errorf("a network for a sandbox made without one: %v", err)
	}
	if err := m2.SetNetwork("other-owner", s2.ID, allow, nil); !errors.Is(err, live.ErrNotFound) {
		t.Errorf("another owner's change: %v", err)
	}
	m2.Detach()
	m3 := live.NewManager(local.LiveStarter(x), cfg)
	defer m3.Close()
	s3, err := m3.Get("k", s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(s3.Network, " ") != strings.Join(other2, " ") || s3.NetworkBudgets[other2[0]] != 1<<30 {
		t.Errorf("network after the change and a take-over: %q, budgets %v", s3.Network, s3.NetworkBudgets)
	}
	check(s3, other, fmt.Sprintf("hello from %d", other))
	check(s3, allowed, "failed")
	if err := m3.SetNetwork("k", s3.ID, allow, nil); err != nil {
		t.Fatal(err)
	}
	m2 = m3
	s2, none2 = s3, nil
	if none2, err = m3.Get("k", none.ID); err != nil {
		t.Fatal(err)
	}

	// A sandbox made from a snapshot of one without a network (under
	// gVisor with its memory) has the network its create asks for.
	sn, err := m2.SnapshotSandbox(ctx, "k", none2.ID, "plain")
	if err != nil {
		t.Fatal(err)
	}
	from, err := m2.Create(ctx, "k", live.CreateOptions{Snapshot: sn.ID, Network: allow})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(from.Network, " ") != strings.Join(allow, " ") || sn.Memory != (isolation == "gvisor") {
		t.Errorf("from the snapshot: network %q (snapshot's memory %v)", from.Network, sn.Memory)
	}
	check(from, allowed, fmt.Sprintf("hello from %d", allowed))
	check(from, other, "failed")
	if isolation != "gvisor" {
		return
	}
	kids, errs, err := m2.Fork(ctx, "k", s2.ID, 2, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for i, kid := range kids {
		if errs[i] != nil {
			t.Fatalf("child %d: %v", i, errs[i])
		}
		if !kid.ForkedMemory || strings.Join(kid.Network, " ") != strings.Join(allow, " ") {
			t.Errorf("child %d: memory %v, network %q", i, kid.ForkedMemory, kid.Network)
		}
		check(kid, allowed, fmt.Sprintf("hello from %d", allowed))
		check(kid, other, "failed")
	}
	check(s2, allowed, fmt.Sprintf("hello from %d", allowed))
}

// recordingServer serves "ok" on the host's loopback and records each
// request's Authorization header and URI.
func recordingServer(t *testing.T) (int, func() []string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Authorization")+" "+r.URL.RequestURI())
		mu.Unlock()
		fmt.Fprint(w, "ok")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

// TestLiveSecrets: a live sandbox with a secret sees its placeholder; its
// requests to the secret's host carry the value (its egress puts it in
// place); taken over by another Manager it goes on so (the same
// placeholder); under gVisor, a fork's children, whose processes hold the
// parent's placeholder, get the value put in place too.
func TestLiveSecrets(t *testing.T) {
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skipf("no TUN devices: %v", err)
	}
	bothIsolations(t, liveSecrets)
}

func liveSecrets(t *testing.T, x *executor.Executor, cfg live.Config, isolation string) {
	port, got := recordingServer(t)
	value := "live-secret-" + strconv.FormatInt(time.Now().UnixNano(), 16)
	cfg.Secrets = func(owner string, names []string) ([]live.Secret, error) {
		if owner != "k" || !slices.Equal(names, []string{"TOKEN"}) {
			return nil, fmt.Errorf("%w: no such secret", live.ErrInvalid)
		}
		return []live.Secret{{Name: "TOKEN", Value: value, Hosts: []string{"host.sandbox.internal"}}}, nil
	}
	m := live.NewManager(local.LiveStarter(x), cfg)
	ctx := context.Background()
	allow := []string{fmt.Sprintf("host.sandbox.internal:%d", port)}
	s, err := m.Create(ctx, "k", live.CreateOptions{Network: allow, Secrets: []string{"TOKEN"}, Timeout: time.Hour, Isolation: isolation})
	if err != nil {
		t.Fatal(err)
	}
	// A process that keeps the placeholder it started with, and sends it
	// on each line of its stdin.
	sender := agent.Request{Args: []string{"python3", "-u", "-c", fmt.Sprintf(`import os, sys, urllib.request
tok = os.environ["TOKEN"]
for line in sys.stdin:
    req = urllib.request.Request("http://host.sandbox.internal:%d/" + line.strip() + "?k=" + tok, headers={"Authorization": "Bearer " + tok})
    print(tok.startswith("SANDBOX_RUN_SECRET_TOKEN_"), urllib.request.urlopen(req, timeout=30).read().decode(), flush=True)
`, port)}, Stdin: true}
	p, sub, err := s.Start(ctx, sender)
	if err != nil {
		t.Fatal(err)
	}
	if line := say(t, s, sub, p.PID, "first"); line != "True ok" {
		t.Fatalf("the process: %q", line)
	}
	want := func(path string) {
		t.Helper()
		for _, g := range got() {
			if strings.HasSuffix(g, " /"+path+"?k="+value) && (path == "after" || strings.HasPrefix(g, "Bearer "+value+" ")) {
				return
			}
		}
		t.Errorf("the upstream never got the value for /%s: %q", path, got())
	}
	want("first")
	if out, _, _ := sh(t, s, `echo "$TOKEN"; cat /proc/self/environ | tr '\0' '\n' | grep -c `+value+` || true`); strings.Contains(out, value) || !strings.HasPrefix(out, "SANDBOX_RUN_SECRET_TOKEN_") {
		t.Errorf("the sandbox's environment: %q", out)
	}

	// Taken over: the same placeholder still goes out as the value.
	m.Detach()
	m2 := live.NewManager(local.LiveStarter(x), cfg)
	defer m2.Close()
	s2, err := m2.Get("k", s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s2.Secrets, []string{"TOKEN"}) {
		t.Errorf("secrets after the take-over: %v", s2.Secrets)
	}
	if out, _, code := sh(t, s2, fmt.Sprintf(`python3 -c 'import os, urllib.request; print(urllib.request.urlopen("http://host.sandbox.internal:%d/after?k=" + os.environ["TOKEN"], timeout=30).read().decode())'`, port)); code != 0 || out != "ok\n" {
		t.Errorf("after the take-over: %q %d", out, code)
	}
	want("after")
	if isolation != "gvisor" {
		return
	}
	// A child with the parent's memory: its process sends the parent's
	// placeholder, which its own egress knows.
	kids, errs, err := m2.Fork(ctx, "k", s2.ID, 1, time.Hour)
	if err != nil || errs[0] != nil {
		t.Fatalf("fork: %v %v", err, errs)
	}
	kp, ok := kids[0].Proc(p.PID)
	if !ok {
		t.Fatalf("the child has no process %d", p.PID)
	}
	ksub := kp.Subscribe()
	if line := say(t, kids[0], ksub, p.PID, "child"); line != "True ok" {
		t.Errorf("the parent's process in the child: %q", line)
	}
	want("child")
}

// bothIsolations runs f with an executor and a persistent Manager's
// configuration, natively ("") and under gVisor (where runsc is).
func bothIsolations(t *testing.T, f func(t *testing.T, x *executor.Executor, cfg live.Config, isolation string)) {
	t.Run("native", func(t *testing.T) {
		x, cfg := keptExecutor(t)
		cfg.Prewarm = 0
		f(t, x, cfg, "")
	})
	t.Run("gvisor", func(t *testing.T) {
		x, cfg := gvisorExecutor(t)
		f(t, x, cfg, "gvisor")
	})
}
