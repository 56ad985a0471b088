package local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/testkit/livetest"
	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/live"
)

// TestLiveStarterSecrets: the starter gives a sandbox with secrets its
// placeholders and CA (at /etc/ssl/certs), and its egress the values; its
// network changes while it runs (closed, then open again) and reports its
// requests; taken over by the next process's starter (its record keeps
// the session and the list) it goes on alike; secrets need a network.
func TestLiveStarterSecrets(t *testing.T) {
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skipf("no TUN devices: %v", err)
	}
	var mu sync.Mutex
	var got []string
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.RequestURI())
		mu.Unlock()
		fmt.Fprint(w, "ok")
	})}
	go srv.Serve(ln)
	defer srv.Close()
	allow := []string{fmt.Sprintf("host.sandbox.internal:%d", ln.Addr().(*net.TCPAddr).Port)}
	x, err := executor.New(executor.Config{DataDir: t.TempDir(), CacheDir: t.TempDir(), CompileCacheBytes: -1, Intercept: Intercept})
	if err != nil {
		t.Fatal(err)
	}
	cfg := live.Config{StateDir: t.TempDir(), DefaultMemoryBytes: 256 << 20,
		Secrets: func(owner string, names []string) ([]live.Secret, error) {
			return []live.Secret{{Name: "TOKEN", Value: "starter-value", Hosts: []string{"host.sandbox.internal"}}}, nil
		}}
	m := live.NewManager(LiveStarter(x), cfg)
	ctx := context.Background()
	if _, err := m.Create(ctx, "k", live.CreateOptions{Secrets: []string{"TOKEN"}}); !errors.Is(err, live.ErrInvalid) {
		t.Errorf("secrets without a network: %v", err)
	}
	s, err := m.Create(ctx, "k", live.CreateOptions{Secrets: []string{"TOKEN"}, Network: allow})
	if err != nil {
		t.Fatal(err)
	}
	fetch := `curl -s -m 10 "http://` + allow[0] + `/$1?k=$TOKEN" || echo failed`
	run := func(c *live.Client, path string) string {
		out, _ := livetest.Run(t, c, "sh", "-c", fetch, "sh", path)
		return out
	}
	if out, _ := livetest.Run(t, s.Client(), "sh", "-c", `echo "$TOKEN" | cut -c1-25; ls /etc/ssl/certs; grep -c BEGIN /etc/ssl/certs/sandbox-run-egress-ca.pem`); !strings.HasPrefix(out, "SANDBOX_RUN_SECRET_TOKEN_\nca-certificates.crt\njava\nsandbox-run-egress-ca.pem\n1\n") {
		t.Errorf("the sandbox: %q", out)
	}
	if out := run(s.Client(), "one"); out != "ok" {
		t.Errorf("a request: %q", out)
	}
	if err := m.SetNetwork("k", s.ID, nil, nil); err != nil {
		t.Fatal(err)
	}
	if out := run(s.Client(), "closed"); out != "failed\n" {
		t.Errorf("with its network closed: %q", out)
	}
	rep, err := m.NetworkReport("k", s.ID)
	if err != nil || rep == nil || len(rep.Requests) != 1 || strings.Join(rep.Requests[0].Secrets, ",") != "TOKEN" {
		t.Errorf("the report: %+v %v", rep, err)
	}
	if err := m.SetNetwork("k", s.ID, allow, nil); err != nil {
		t.Fatal(err)
	}

	m.Detach()
	m2 := live.NewManager(LiveStarter(x), cfg)
	defer m2.Close()
	s2, err := m2.Get("k", s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if out := run(s2.Client(), "two"); out != "ok" {
		t.Errorf("after the take-over: %q", out)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(got, " ") != "/one?k=starter-value /two?k=starter-value" {
		t.Errorf("the listener got %q", got)
	}
}
