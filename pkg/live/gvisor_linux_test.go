package live_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/gvisor"
	"github.com/sandbox-run/sandbox-run/pkg/live"
	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
	"github.com/sandbox-run/sandbox-run/pkg/local"
)

// gvisorExecutor is keptExecutor with gVisor beside the engine (skipped
// where runsc is not installed).
func gvisorExecutor(t testing.TB) (*executor.Executor, live.Config) {
	t.Helper()
	if _, err := gvisor.Find(""); err != nil {
		t.Skip(err)
	}
	g, err := gvisor.New(gvisor.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	home, _ := os.UserHomeDir()
	x, err := executor.New(executor.Config{DataDir: t.TempDir(), CacheDir: filepath.Join(home, ".cache", "sandbox-run-test", "cache"),
		Engine: live.Engine(), GVisor: g, Intercept: local.Intercept})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return x, live.Config{StateDir: t.TempDir(), DefaultMemoryBytes: 256 << 20}
}

// counter is a process that answers each line of its stdin with a
// counter it keeps in memory.
var counter = agent.Request{Args: []string{"python3", "-u", "-c", "import sys\nn = 0\nfor line in sys.stdin:\n    n += 1\n    print(line.strip(), n)\n"}, Stdin: true}

// counting is a sandbox of m's under gVisor with a counter running in it
// that has answered "a 1".
func counting(t *testing.T, m *live.Manager) (*live.Sandbox, *live.Proc, *live.Sub) {
	t.Helper()
	s, err := m.Create(context.Background(), "k", live.CreateOptions{Isolation: "gvisor", Languages: []string{"python"}, Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	p, sub, err := s.Start(context.Background(), counter)
	if err != nil {
		t.Fatal(err)
	}
	if got := say(t, s, sub, p.PID, "a"); got != "a 1" {
		t.Fatalf("the counter: %q", got)
	}
	return s, p, sub
}

// say sends line to process pid of s and returns its answer.
func say(t *testing.T, s *live.Sandbox, sub *live.Sub, pid int, line string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := s.Client().Call(ctx, agent.Request{Op: agent.OpInput, PID: pid, Data: []byte(line + "\n")}); err != nil {
		t.Fatalf("%s: %v", s.ID, err)
	}
	var out []byte
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("%s: %v", s.ID, err)
		}
		if ev.Type == agent.EvStdout {
			out = append(out, ev.Data...)
			if strings.HasSuffix(string(out), "\n") {
				return strings.TrimSpace(string(out))
			}
		}
	}
}

// TestForkMemoryGVisor: a live sandbox under gVisor forks with its
// memory: a process's state goes on in every child (the same pid, its
// counter where the parent's was), files too; parent and children go on
// independently, the parent's agent as before; a child is a sandbox of its
// own that is killed alone; a paused parent forks and stays paused.
func TestForkMemoryGVisor(t *testing.T) {
	x, cfg := gvisorExecutor(t)
	m := live.NewManager(local.LiveStarter(x), cfg)
	defer m.Close()
	ctx := context.Background()
	s, err := m.Create(ctx, "k", live.CreateOptions{Isolation: "gvisor", Languages: []string{"python"}, Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if out, _, _ := sh(t, s, "cat /proc/version; echo note > /home/user/note"); strings.Contains(out, "Debian") {
		t.Errorf("not gVisor's kernel: %q", out)
	}
	p, sub, err := s.Start(ctx, counter)
	if err != nil {
		t.Fatal(err)
	}
	if got := say(t, s, sub, p.PID, "a"); got != "a 1" {
		t.Fatalf("the counter: %q", got)
	}
	// A port of it, through its agent's relay.
	echo := "import socket\ns = socket.socket()\ns.bind(('127.0.0.1', 7000))\ns.listen()\nwhile True:\n    c, _ = s.accept()\n    c.sendall(c.recv(100))\n    c.close()\n"
	if _, _, err := s.Start(ctx, agent.Request{Args: []string{"python3", "-c", echo}}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		conn, err := s.DialTCP(ctx, 7000)
		if err == nil {
			conn.Write([]byte("ping"))
			b, _ := io.ReadAll(conn)
			conn.Close()
			if string(b) != "ping" {
				t.Errorf("through the relay: %q", b)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("port 7000: %v", err)
		}
	}
	t0 := time.Now()
	kids, errs, err := m.Fork(ctx, "k", s.ID, 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fork of 2 with memory: %v", time.Since(t0))
	for i, k := range kids {
		if errs[i] != nil {
			t.Fatalf("child %d: %v", i, errs[i])
		}
		if !k.ForkedMemory || k.Isolation != "gvisor" || k.ID == s.ID {
			t.Errorf("child %d: forked memory %v, isolation %q", i, k.ForkedMemory, k.Isolation)
		}
		kp, ok := k.Proc(p.PID)
		if !ok {
			t.Fatalf("child %d has no process %d", i, p.PID)
		}
		ksub := kp.Subscribe()
		if got := say(t, k, ksub, p.PID, "child"); got != "child 2" {
			t.Errorf("child %d's counter: %q, want 2 (the parent's was 1)", i, got)
		}
		if got := say(t, k, ksub, p.PID, "again"); got != "again 3" {
			t.Errorf("child %d's counter again: %q", i, got)
		}
		if out, _, _ := sh(t, k, "cat note"); out != "note\n" {
			t.Errorf("child %d's note: %q", i, out)
		}
	}
	// The parent goes on by itself, its agent connected again.
	if got := say(t, s, sub, p.PID, "parent"); got != "parent 2" {
		t.Errorf("the parent's counter: %q", got)
	}
	if out, _, _ := sh(t, kids[0], "echo mine > note; cat note"); out != "mine\n" {
		t.Errorf("a child's write: %q", out)
	}
	if out, _, _ := sh(t, s, "cat note"); out != "note\n" {
		t.Errorf("the parent's note after a child's write: %q", out)
	}
	if err := m.Kill("k", kids[1].ID); err != nil {
		t.Fatal(err)
	}
	select {
	case <-kids[1].Done():
	case <-time.After(time.Minute):
		t.Fatal("a killed child did not end")
	}
	if got := say(t, kids[0], mustSub(t, kids[0], p.PID), p.PID, "alive"); got != "alive 4" {
		t.Errorf("the other child after its sibling's kill: %q", got)
	}

	// A snapshot keeps memory too: a sandbox made from it goes on from
	// there, its own.
	snap, err := m.SnapshotSandbox(ctx, "k", kids[0].ID, "with-memory")
	if err != nil {
		t.Fatal(err)
	}
	if !snap.Memory || snap.Size < 1<<20 {
		t.Errorf("the snapshot: memory %v, %d bytes", snap.Memory, snap.Size)
	}
	from, err := m.Create(ctx, "k", live.CreateOptions{Snapshot: snap.ID, Languages: []string{"go"}})
	if err != nil {
		t.Fatal(err)
	}
	if from.Isolation != "gvisor" || !from.ForkedMemory {
		t.Errorf("from the snapshot: isolation %q, memory %v", from.Isolation, from.ForkedMemory)
	}
	if got := say(t, from, mustSub(t, from, p.PID), p.PID, "from"); got != "from 5" {
		t.Errorf("a sandbox from the snapshot: %q", got)
	}
	if out, _, _ := sh(t, from, "cat note"); out != "mine\n" {
		t.Errorf("its note: %q", out)
	}

	// A paused parent forks, and stays paused.
	if err := m.Pause(ctx, "k", s.ID); err != nil {
		t.Fatal(err)
	}
	more, errs, err := m.Fork(ctx, "k", s.ID, 1, time.Minute)
	if err != nil || errs[0] != nil {
		t.Fatalf("a fork of a paused sandbox: %v %v", err, errs)
	}
	if !s.Paused() {
		t.Error("the parent is not paused after its fork")
	}
	if got := say(t, more[0], mustSub(t, more[0], p.PID), p.PID, "late"); got != "late 3" {
		t.Errorf("the child of the paused parent: %q", got)
	}

	// A restart: the next Manager takes them over, processes running.
	m.Detach()
	m2 := live.NewManager(local.LiveStarter(x), cfg)
	defer m2.Close()
	s2, err := m2.Get("k", kids[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if !s2.ForkedMemory || s2.Isolation != "gvisor" {
		t.Errorf("taken over: forked memory %v, isolation %q", s2.ForkedMemory, s2.Isolation)
	}
	if got := say(t, s2, mustSub(t, s2, p.PID), p.PID, "restarted"); got != "restarted 5" {
		t.Errorf("a child after the restart: %q", got)
	}
	if p2, err := m2.Get("k", s.ID); err != nil || !p2.Paused() {
		t.Errorf("the paused parent after the restart: %v", err)
	}
}

func mustSub(t *testing.T, s *live.Sandbox, pid int) *live.Sub {
	t.Helper()
	p, ok := s.Proc(pid)
	if !ok {
		t.Fatalf("%s has no process %d", s.ID, pid)
	}
	return p.Subscribe()
}

// BenchmarkForkMemoryGVisor: a fork of 10 children of a sandbox under
// gVisor with a running process, end to end (ms/fork10: until every child's
// agent is connected, the process's state in each).
func BenchmarkForkMemoryGVisor(b *testing.B) {
	x, cfg := gvisorExecutor(b)
	cfg.MaxPerOwner = 100
	m := live.NewManager(local.LiveStarter(x), cfg)
	defer m.Close()
	ctx := context.Background()
	s, err := m.Create(ctx, "k", live.CreateOptions{Isolation: "gvisor", Languages: []string{"python"}, Timeout: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	if _, _, err := s.Start(ctx, counter); err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	for b.Loop() {
		t0 := time.Now()
		kids, errs, err := m.Fork(ctx, "k", s.ID, 10, time.Minute)
		total += time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		for i, k := range kids {
			if errs[i] != nil {
				b.Fatal(errs[i])
			}
			m.Kill("k", k.ID)
			<-k.Done()
		}
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/fork10")
}

// TestGVisorLiveInit: under gVisor the agent's PID 1 reaps the processes
// handed to it (a background process whose shell ended leaves no zombie),
// and a process on a terminal has its terminal and its size.
func TestGVisorLiveInit(t *testing.T) {
	x, cfg := gvisorExecutor(t)
	m := live.NewManager(local.LiveStarter(x), cfg)
	defer m.Close()
	ctx := context.Background()
	s, err := m.Create(ctx, "k", live.CreateOptions{Isolation: "gvisor", Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	// zombies counts the sandbox's processes that ended and were not
	// waited for.
	zombies := func() string {
		out, _, _ := sh(t, s, `for f in /proc/[0-9]*/stat; do read -r st < "$f" 2>/dev/null && case "${st##*) }" in Z*) echo "$st";; esac; done`)
		return out
	}
	sh(t, s, "for i in 1 2 3; do (sleep 0.1 &); done; true")
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		z := zombies()
		if z == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("zombies are left: %s", z)
		}
	}
	if out, _, _ := sh(t, s, "cat /proc/1/cmdline | tr '\\0' ' '; echo; ls /proc | grep -c '^[0-9]'"); !strings.HasPrefix(out, agent.Path) {
		t.Errorf("PID 1: %q", out)
	}

	_, sub, err := s.Start(ctx, agent.Request{Args: []string{"bash", "-c", "tty; stty size"}, PTY: &agent.Size{Cols: 100, Rows: 30}})
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		ev, err := sub.Next(wctx)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == agent.EvPTY {
			out = append(out, ev.Data...)
		}
		if ev.Type == agent.EvExit {
			break
		}
	}
	if got := strings.ReplaceAll(string(out), "\r", ""); !strings.Contains(got, "/dev/pts/") || !strings.Contains(got, "30 100\n") {
		t.Errorf("on a terminal: %q", got)
	}
}

// dirStore is a live.SnapshotStore in a directory: each snapshot a tar
// stream (live.PackDir) and its record, as a cluster's store keeps them.
type dirStore struct{ dir string }

func (d dirStore) Put(ctx context.Context, sn *live.Snapshot, dir string) error {
	f, err := os.Create(filepath.Join(d.dir, sn.ID+".tar"))
	if err != nil {
		return err
	}
	defer f.Close()
	if err := live.PackDir(f, dir); err != nil {
		return err
	}
	b, _ := json.Marshal(sn)
	return os.WriteFile(filepath.Join(d.dir, sn.ID+".json"), b, 0o600)
}

func (d dirStore) Stat(ctx context.Context, owner, id string) (*live.Snapshot, error) {
	b, err := os.ReadFile(filepath.Join(d.dir, filepath.Base(id)+".json"))
	var sn live.Snapshot
	if err != nil || json.Unmarshal(b, &sn) != nil || sn.Owner != owner {
		return nil, live.ErrNoSuchSnapshot
	}
	return &sn, nil
}

func (d dirStore) Fetch(ctx context.Context, sn *live.Snapshot, dir string) error {
	f, err := os.Open(filepath.Join(d.dir, sn.ID+".tar"))
	if err != nil {
		return err
	}
	defer f.Close()
	return live.UnpackDir(f, dir)
}

func (d dirStore) List(ctx context.Context, owner string) ([]*live.Snapshot, error) {
	names, _ := filepath.Glob(filepath.Join(d.dir, "*.json"))
	var out []*live.Snapshot
	for _, n := range names {
		if sn, err := d.Stat(ctx, owner, strings.TrimSuffix(filepath.Base(n), ".json")); err == nil {
			out = append(out, sn)
		}
	}
	return out, nil
}

func (d dirStore) Delete(ctx context.Context, owner, id string) error {
	if _, err := d.Stat(ctx, owner, id); err != nil {
		return err
	}
	os.Remove(filepath.Join(d.dir, id+".tar"))
	return os.Remove(filepath.Join(d.dir, id+".json"))
}

// TestSnapshotStoreGVisor: a snapshot with memory kept in a store (a
// cluster's) starts a sandbox on another host's Manager (its own state
// directory, which never had it): its process goes on from the snapshot's
// state there; deleted there, it is gone for both.
func TestSnapshotStoreGVisor(t *testing.T) {
	x, cfg := gvisorExecutor(t)
	cfg.Snapshots = dirStore{t.TempDir()}
	m := live.NewManager(local.LiveStarter(x), cfg)
	defer m.Close()
	ctx := context.Background()
	s, p, _ := counting(t, m)
	snap, err := m.SnapshotSandbox(ctx, "k", s.ID, "shared")
	if err != nil || !snap.Memory {
		t.Fatalf("snapshot: %+v %v", snap, err)
	}
	other := cfg
	other.StateDir = t.TempDir()
	m2 := live.NewManager(local.LiveStarter(x), other)
	defer m2.Close()
	if got := m2.Snapshots("k", ""); len(got) != 1 || got[0].ID != snap.ID {
		t.Fatalf("the other host's list: %+v", got)
	}
	if got := m2.Snapshots("someone-else", ""); len(got) != 0 {
		t.Errorf("another owner's list: %+v", got)
	}
	from, err := m2.Create(ctx, "k", live.CreateOptions{Snapshot: snap.ID})
	if err != nil {
		t.Fatal(err)
	}
	if got := say(t, from, mustSub(t, from, p.PID), p.PID, "there"); got != "there 2" {
		t.Errorf("on the other host: %q", got)
	}
	if err := m2.DeleteSnapshot("k", snap.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, "k", live.CreateOptions{Snapshot: snap.ID}); !errors.Is(err, live.ErrNoSuchSnapshot) {
		t.Errorf("a create from the deleted snapshot on the first host: %v", err)
	}
}
