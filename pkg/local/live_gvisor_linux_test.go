package local

import (
	"context"
	"errors"
	"github.com/sandbox-run/sandbox-run/internal/testkit/livetest"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/gvisor"
	"github.com/sandbox-run/sandbox-run/pkg/live"
)

// TestLiveStarterGVisor: live sandboxes under gVisor through the starter:
// one that could not outlive this process (no socket) is refused, a host
// without runsc refuses them, and one runs the agent under gVisor's
// kernel, pauses, copies its files out and in, and says what it uses;
// the starter's isolations name gVisor only where it is.
func TestLiveStarterGVisor(t *testing.T) {
	plain, err := executor.New(executor.Config{DataDir: t.TempDir(), CacheDir: t.TempDir(), CompileCacheBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	opts := live.StartOptions{Isolation: "gvisor", MemoryBytes: 256 << 20, DiskBytes: 16 << 20, Lifetime: 10 * time.Minute,
		SocketDir: t.TempDir(), Secret: "s"}
	if _, err := LiveStarter(plain).StartLive(context.Background(), opts, nil, nil); !errors.Is(err, live.ErrInvalid) {
		t.Errorf("gVisor on an executor without it: %v", err)
	}
	if got := (Backend{x: plain}).LiveIsolations(); len(got) != 0 {
		t.Errorf("isolations without gVisor: %v", got)
	}
	if _, err := LiveStarter(plain).StartLive(context.Background(), live.StartOptions{Isolation: "vm"}, nil, nil); !errors.Is(err, live.ErrInvalid) {
		t.Errorf("an unknown isolation: %v", err)
	}
	if _, err := gvisor.Find(""); err != nil {
		t.Skip(err)
	}
	gdir := t.TempDir()
	g, err := gvisor.New(gvisor.Config{Dir: gdir})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	x, err := executor.New(executor.Config{DataDir: t.TempDir(), CacheDir: t.TempDir(), CompileCacheBytes: -1, GVisor: g})
	if err != nil {
		t.Fatal(err)
	}
	if got := (Backend{x: x}).LiveIsolations(); len(got) != 1 || got[0] != "gvisor" {
		t.Errorf("isolations with gVisor: %v", got)
	}
	start := LiveStarter(x)
	if _, err := start.StartLive(context.Background(), live.StartOptions{Isolation: "gvisor"}, nil, nil); !errors.Is(err, live.ErrInvalid) {
		t.Errorf("without a socket to outlive this process on: %v", err)
	}

	// Through a Manager (the agent on its socket).
	m := live.NewManager(start, live.Config{StateDir: t.TempDir(), DefaultMemoryBytes: 256 << 20})
	defer m.Close()
	s, err := m.Create(context.Background(), "k", live.CreateOptions{Isolation: "gvisor", Languages: []string{"bash"}})
	if err != nil {
		t.Fatal(err)
	}
	if out, code := livetest.Run(t, s.Client(), "sh", "-c", "echo hi > /home/user/f; cat /work/f; dmesg | head -1"); code != 0 || out[:3] != "hi\n" {
		t.Fatalf("in gVisor: %d %q", code, out)
	}
	// Its ports, through its agent: a server in it answers; a port
	// nothing listens on is refused.
	if _, err := s.DialTCP(context.Background(), 8000); err == nil {
		t.Error("a port nothing listens on was dialled")
	}
	if out, code := livetest.Run(t, s.Client(), "sh", "-c", "(python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 &); for i in $(seq 100); do (echo >/dev/tcp/127.0.0.1/8000) 2>/dev/null && break; sleep 0.1; done; echo up"); code != 0 || out != "up\n" {
		t.Fatalf("the server in it: %d %q", code, out)
	}
	conn, err := s.DialTCP(context.Background(), 8000)
	if err != nil {
		t.Fatal(err)
	}
	conn.Write([]byte("GET /f HTTP/1.0\r\n\r\n"))
	reply, _ := io.ReadAll(conn)
	conn.Close()
	if !strings.HasPrefix(string(reply), "HTTP/1.0 200") || !strings.HasSuffix(string(reply), "hi\n") {
		t.Errorf("through its port: %q", reply)
	}
	st, err := s.Stats()
	if err != nil || st.Memory <= 0 || st.DiskTotal <= 0 {
		t.Errorf("stats: %+v %v", st, err)
	}
	if err := m.Pause(context.Background(), "k", s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Resume("k", s.ID, 0); err != nil {
		t.Fatal(err)
	}
	snap, err := m.SnapshotSandbox(context.Background(), "k", s.ID, "one")
	if err != nil {
		t.Fatal(err)
	}
	from, err := m.Create(context.Background(), "k", live.CreateOptions{Snapshot: snap.ID})
	if err != nil {
		t.Fatal(err)
	}
	if from.Isolation != "gvisor" {
		t.Errorf("a sandbox from a gVisor sandbox's snapshot: isolation %q", from.Isolation)
	}
	if out, code := livetest.Run(t, from.Client(), "sh", "-c", "cat f"); code != 0 || out != "hi\n" {
		t.Errorf("from the snapshot: %d %q", code, out)
	}
	if entries, _ := os.ReadDir(filepath.Join(gdir, "live")); len(entries) != 2 {
		t.Errorf("live sandboxes' directories: %d, want 2", len(entries))
	}
}
