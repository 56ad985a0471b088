package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/api"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// A live sandbox's first program is this test binary too: as its agent,
// it serves the sandbox and never returns here.

// newLiveSandbox creates a live sandbox on the shared server, killed when
// the test ends.
func newLiveSandbox(t *testing.T, c *Client) *wire.Sandbox {
	t.Helper()
	sb, err := c.CreateSandbox(context.Background(), wire.SandboxRequest{Languages: []string{"bash"}, TimeoutSeconds: 120})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { c.KillSandbox(context.Background(), sb.ID) })
	return sb
}

func TestSandboxLifecycle(t *testing.T) {
	ctx := context.Background()
	c := New(server(t))
	sb := newLiveSandbox(t, c)
	if sb.ID == "" || sb.AccessToken == "" || sb.State != "running" || !slices.Equal(sb.Languages, []string{"bash"}) {
		t.Fatalf("created %+v", sb)
	}
	if until := time.Until(sb.EndAt); until < 100*time.Second || until > 121*time.Second {
		t.Errorf("ends in %v, want about 120s", until)
	}
	got, err := c.GetSandbox(ctx, sb.ID)
	if err != nil || got.ID != sb.ID || got.AccessToken != "" {
		t.Fatalf("get: %+v %v", got, err)
	}
	all, err := c.ListSandboxes(ctx)
	if err != nil || !slices.ContainsFunc(all, func(s wire.Sandbox) bool { return s.ID == sb.ID }) {
		t.Fatalf("list: %+v %v", all, err)
	}
	moved, err := c.SetSandboxTimeout(ctx, sb.ID, 10*time.Minute)
	if err != nil || time.Until(moved.EndAt) < 9*time.Minute {
		t.Fatalf("timeout: %+v %v", moved, err)
	}
	if p, err := c.PauseSandbox(ctx, sb.ID); err != nil || p.State != "paused" {
		t.Fatalf("pause: %+v %v", p, err)
	}
	var e *Error
	if _, err := c.PauseSandbox(ctx, sb.ID); !errors.As(err, &e) || e.StatusCode != 409 {
		t.Errorf("a second pause: %v", err)
	}
	if r, err := c.ResumeSandbox(ctx, sb.ID, 5*time.Minute); err != nil || r.State != "running" || time.Until(r.EndAt) > 5*time.Minute {
		t.Fatalf("resume: %+v %v", r, err)
	}
	if r, err := c.ResumeSandbox(ctx, sb.ID, 0); err != nil || r.State != "running" {
		t.Fatalf("resume of a running sandbox: %+v %v", r, err)
	}
	if ev, err := c.EvictSandbox(ctx, sb.ID); err != nil || !ev.Evicted || ev.State != "paused" {
		t.Fatalf("evict: %+v %v", ev, err)
	}
	if r, err := c.ResumeSandbox(ctx, sb.ID, 0); err != nil || r.State != "running" || r.Evicted {
		t.Fatalf("resume of an evicted sandbox: %+v %v", r, err)
	}
	sn, err := c.SnapshotSandbox(ctx, sb.ID, "named")
	if err != nil || !slices.Contains(sn.Names, "named") {
		t.Fatalf("snapshot: %+v %v", sn, err)
	}
	if all, err := c.ListSnapshots(ctx, sb.ID); err != nil || len(all) != 1 || all[0].ID != sn.ID {
		t.Fatalf("snapshots: %+v %v", all, err)
	}
	fork, err := c.ForkSandbox(ctx, sb.ID, 1, time.Minute)
	if err != nil || len(fork.Children) != 1 || fork.Children[0].Sandbox == nil || fork.Memory {
		t.Fatalf("fork: %+v %v", fork, err)
	}
	if err := c.KillSandbox(ctx, fork.Children[0].Sandbox.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteSnapshot(ctx, sn.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteSnapshot(ctx, sn.ID); !IsNotFound(err) {
		t.Errorf("a deleted snapshot: %v", err)
	}
	if err := c.KillSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetSandbox(ctx, sb.ID)
	if !IsNotFound(err) {
		t.Fatalf("a killed sandbox: %v, want a 404", err)
	}
	if _, err := c.Exec(ctx, "no-such-sandbox", wire.ProcessRequest{Command: "true"}); !errors.As(err, &e) || e.StatusCode != 404 {
		t.Errorf("exec in an unknown sandbox: %v", err)
	}
	if _, err := c.CreateSandbox(ctx, wire.SandboxRequest{Languages: []string{"cobol-74"}}); !errors.As(err, &e) || e.StatusCode != 400 {
		t.Errorf("an unknown language: %v", err)
	}
}

func TestSandboxExec(t *testing.T) {
	ctx := context.Background()
	c := New(server(t))
	sb := newLiveSandbox(t, c)
	res, err := c.Exec(ctx, sb.ID, wire.ProcessRequest{Command: `echo "out $K $(pwd)"; echo err >&2; exit 3`, Env: map[string]string{"K": "v"}})
	if err != nil || res.ExitCode == nil || *res.ExitCode != 3 || res.Stdout != "out v /work\n" || res.Stderr != "err\n" || res.PID == 0 {
		t.Fatalf("exec: %+v %v", res, err)
	}
	if _, err := c.Exec(ctx, sb.ID, wire.ProcessRequest{Command: "mkdir -p d && echo state > d/s"}); err != nil {
		t.Fatal(err)
	}
	res, err = c.Exec(ctx, sb.ID, wire.ProcessRequest{Args: []string{"cat", "s"}, Cwd: "d"})
	if err != nil || res.Stdout != "state\n" || *res.ExitCode != 0 {
		t.Fatalf("args in cwd: %+v %v", res, err)
	}
	res, err = c.Exec(ctx, sb.ID, wire.ProcessRequest{Command: "kill -9 $$"})
	if err != nil || res.ExitCode == nil || *res.ExitCode != -1 || res.Status != "signal: killed" {
		t.Fatalf("killed: %+v %v", res, err)
	}
	res, err = c.Exec(ctx, sb.ID, wire.ProcessRequest{Command: "sleep 30", TimeoutSeconds: 0.5})
	if err != nil || !res.TimedOut {
		t.Fatalf("timeout: %+v %v", res, err)
	}
	var e *Error
	if _, err := c.Exec(ctx, sb.ID, wire.ProcessRequest{Args: []string{"/no/such/program"}}); !errors.As(err, &e) || e.StatusCode != 400 {
		t.Errorf("no program: %v", err)
	}

	// Streamed: each chunk as it comes, in order, stdout and stderr
	// apart; the last line comes after the pause.
	var mu sync.Mutex
	var events []string
	start := time.Now()
	var lastAt time.Duration
	add := func(kind string) func([]byte) {
		return func(p []byte) {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, kind+":"+string(p))
			lastAt = time.Since(start)
		}
	}
	res, err = c.ExecStream(ctx, sb.ID, wire.ProcessRequest{Command: "echo one; sleep 0.3; echo two >&2; sleep 0.3; echo three; exit 4"}, add("out"), add("err"))
	if err != nil || res.ExitCode == nil || *res.ExitCode != 4 || res.PID == 0 {
		t.Fatalf("stream: %+v %v", res, err)
	}
	if want := []string{"out:one\n", "err:two\n", "out:three\n"}; !slices.Equal(events, want) {
		t.Errorf("events %q, want %q", events, want)
	}
	if lastAt < 500*time.Millisecond {
		t.Errorf("the last chunk came after %v: not as it was written", lastAt)
	}
	// With input: what the reader gives, then its end.
	var upper bytes.Buffer
	res, err = c.ExecWithInput(ctx, sb.ID, wire.ProcessRequest{Args: []string{"tr", "a-z", "A-Z"}}, strings.NewReader("piped\ninput"),
		func(p []byte) { upper.Write(p) }, nil)
	if err != nil || *res.ExitCode != 0 || upper.String() != "PIPED\nINPUT" {
		t.Fatalf("with input: %+v %v %q", res, err, upper.String())
	}
	// On a terminal: its output is stdout's.
	var term bytes.Buffer
	res, err = c.ExecStream(ctx, sb.ID, wire.ProcessRequest{Command: "tty >/dev/null && echo on-a-tty", PTY: &wire.TerminalSize{Cols: 100, Rows: 30}},
		func(p []byte) { term.Write(p) }, nil)
	if err != nil || *res.ExitCode != 0 || !strings.Contains(term.String(), "on-a-tty") {
		t.Fatalf("pty: %+v %v %q", res, err, term.String())
	}
	// Output that is not UTF-8 comes as it is (base64 on the wire).
	var raw bytes.Buffer
	res, err = c.ExecStream(ctx, sb.ID, wire.ProcessRequest{Command: `printf '\377\376\000\001'`}, func(p []byte) { raw.Write(p) }, nil)
	if err != nil || *res.ExitCode != 0 || !bytes.Equal(raw.Bytes(), []byte{0xff, 0xfe, 0, 1}) {
		t.Fatalf("bytes that are not UTF-8: %+v %v %q", res, err, raw.Bytes())
	}
}

func TestSandboxBackgroundProcess(t *testing.T) {
	ctx := context.Background()
	c := New(server(t))
	sb := newLiveSandbox(t, c)
	pid, err := c.StartBackground(ctx, sb.ID, wire.ProcessRequest{Command: "while read l; do echo got $l; done; echo bye", Stdin: true, Tag: "reader"})
	if err != nil || pid == 0 {
		t.Fatalf("start: %d %v", pid, err)
	}
	procs, err := c.Processes(ctx, sb.ID)
	if err != nil || !slices.ContainsFunc(procs, func(p wire.ProcessInfo) bool { return p.PID == pid && p.Tag == "reader" }) {
		t.Fatalf("processes: %+v %v", procs, err)
	}
	type followed struct {
		res *wire.ProcessResult
		out string
		err error
	}
	done := make(chan followed, 1)
	var out bytes.Buffer
	go func() {
		res, err := c.FollowProcess(ctx, sb.ID, pid, func(p []byte) { out.Write(p) }, nil)
		done <- followed{res, out.String(), err}
	}()
	time.Sleep(300 * time.Millisecond) // the stream is on
	if err := c.SendStdin(ctx, sb.ID, pid, []byte("a\nb\n"), false); err != nil {
		t.Fatal(err)
	}
	if err := c.SendStdin(ctx, sb.ID, pid, []byte("c\n"), true); err != nil {
		t.Fatal(err)
	}
	select {
	case f := <-done:
		if f.err != nil || *f.res.ExitCode != 0 || f.res.PID != pid || f.out != "got a\ngot b\ngot c\nbye\n" {
			t.Fatalf("followed: %+v %q %v", f.res, f.out, f.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the process did not end at its input's end")
	}

	pid, err = c.StartBackground(ctx, sb.ID, wire.ProcessRequest{Command: "sleep 60"})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(200 * time.Millisecond)
		c.Signal(ctx, sb.ID, pid, "9")
	}()
	res, err := c.FollowProcess(ctx, sb.ID, pid, nil, nil)
	if err != nil || res.Status != "signal: killed" {
		t.Fatalf("signalled: %+v %v", res, err)
	}
	if err := c.Signal(ctx, sb.ID, pid, "SIGTERM"); !IsNotFound(err) {
		t.Errorf("a signal to an ended process: %v", err)
	}
}

func TestSandboxFiles(t *testing.T) {
	ctx := context.Background()
	c := New(server(t))
	sb := newLiveSandbox(t, c)
	data := make([]byte, 3<<20+17)
	for i := range data {
		data[i] = byte(i*7 + i>>9)
	}
	e, err := c.WriteFile(ctx, sb.ID, "dir/blob.bin", bytes.NewReader(data))
	if err != nil || e.Path != "/work/dir/blob.bin" || e.Size != int64(len(data)) || e.Type != "file" {
		t.Fatalf("write: %+v %v", e, err)
	}
	rc, err := c.ReadFile(ctx, sb.ID, "/work/dir/blob.bin")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes (%v), not the %d written", len(got), err, len(data))
	}
	if e, err := c.StatFile(ctx, sb.ID, "dir"); err != nil || e.Type != "dir" || !strings.HasPrefix(e.Mode, "d") {
		t.Fatalf("stat: %+v %v", e, err)
	}
	if e, err := c.MakeDir(ctx, sb.ID, "a/b"); err != nil || e.Path != "/work/a/b" || e.Type != "dir" {
		t.Fatalf("mkdir: %+v %v", e, err)
	}
	if e, err := c.MoveFile(ctx, sb.ID, "dir/blob.bin", "a/b/moved.bin"); err != nil || e.Path != "/work/a/b/moved.bin" {
		t.Fatalf("move: %+v %v", e, err)
	}
	entries, err := c.ListFiles(ctx, sb.ID, "a", 2)
	var paths []string
	for _, e := range entries {
		paths = append(paths, e.Path)
	}
	slices.Sort(paths)
	if err != nil || !slices.Equal(paths, []string{"/work/a/b", "/work/a/b/moved.bin"}) {
		t.Fatalf("list: %q %v", paths, err)
	}
	if top, err := c.ListFiles(ctx, sb.ID, "", 0); err != nil || !slices.ContainsFunc(top, func(e wire.FileEntry) bool { return e.Name == "a" }) {
		t.Fatalf("list /work: %+v %v", top, err)
	}
	if err := c.RemoveFile(ctx, sb.ID, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StatFile(ctx, sb.ID, "a"); !IsNotFound(err) {
		t.Errorf("stat of a removed directory: %v", err)
	}
	if _, err := c.ReadFile(ctx, sb.ID, "missing.txt"); !IsNotFound(err) {
		t.Errorf("read of a missing file: %v", err)
	}
	// An empty file, from a nil reader.
	if e, err := c.WriteFile(ctx, sb.ID, "empty", nil); err != nil || e.Size != 0 {
		t.Errorf("empty: %+v %v", e, err)
	}
}

func TestSandboxPTY(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := New(server(t))
	sb := newLiveSandbox(t, c)
	term, err := c.PTY(ctx, sb.ID, 100, 40)
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	if err := term.Resize(120, 50); err != nil {
		t.Fatal(err)
	}
	if _, err := term.Write([]byte("stty size; echo mark-$((6*7)); exit 3\n")); err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(term)
	if err != nil {
		t.Fatalf("read: %v (%q)", err, out)
	}
	if !strings.Contains(string(out), "50 120") || !strings.Contains(string(out), "mark-42") {
		t.Errorf("terminal output %q", out)
	}
	if code, ok := term.ExitCode(); !ok || code != 3 || term.ExitStatus() != "exit status 3" {
		t.Errorf("exit %d %v %q", code, ok, term.ExitStatus())
	}
	if _, err := c.PTY(ctx, "no-such-sandbox", 0, 0); !IsNotFound(err) {
		t.Errorf("the terminal of an unknown sandbox: %v", err)
	}
}

// TestSandboxSecretsAndNetwork: a live sandbox made with a network and a
// secret sees the secret's placeholder while the listener it reaches gets
// the value; SetSandboxNetwork to nothing cuts it off while it runs, and
// back again reaches it; a sandbox made without a network, or a list
// beyond the server's network.allow, is a 400.
func TestSandboxSecretsAndNetwork(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var got []string
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	up := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Authorization")+" "+r.URL.RequestURI())
		mu.Unlock()
		io.WriteString(w, "upstream ok")
	})}
	go up.Serve(ln)
	defer up.Close()
	requests := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
	allow := fmt.Sprintf("host.sandbox.internal:%d", ln.Addr().(*net.TCPAddr).Port)
	c := New(serve(t, newExecutor(t), func(c *api.Config) { c.Network.Allow = []string{allow} }))

	const value = "sk-client-test-0123456789abcdef"
	if _, err := c.PutSecret(ctx, "TOKEN", wire.SecretPut{Value: value, Hosts: []string{"host.sandbox.internal"},
		Header: &wire.SecretHeader{Name: "Authorization", Format: "Bearer {value}"}}); err != nil {
		t.Fatal(err)
	}
	sb, err := c.CreateSandbox(ctx, wire.SandboxRequest{Languages: []string{"python", "bash"}, TimeoutSeconds: 120,
		Network: &wire.NetworkRequest{Allow: []string{allow}}, Secrets: []string{"TOKEN"}})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { c.KillSandbox(context.Background(), sb.ID) })
	if !slices.Equal(sb.Secrets, []string{"TOKEN"}) || !slices.Equal(sb.Network, []string{allow}) {
		t.Fatalf("created %+v", sb)
	}
	fetch := wire.ProcessRequest{Args: []string{"python3", "-c", `import os, urllib.request
token = os.environ["TOKEN"]
print(token)
try:
    print(urllib.request.urlopen("http://` + allow + `/v1?k=" + token, timeout=10).read().decode())
except Exception as e:
    print("failed", type(e).__name__)`}}
	res, err := c.Exec(ctx, sb.ID, fetch)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(res.Stdout, "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "SANDBOX_RUN_SECRET_TOKEN_") || lines[1] != "upstream ok" {
		t.Fatalf("with its network: %+v", res)
	}
	if strings.Contains(res.Stdout, value) {
		t.Errorf("the process saw the value: %q", res.Stdout)
	}
	if r := requests(); !slices.Equal(r, []string{"Bearer " + value + " /v1?k=" + value}) {
		t.Errorf("the listener got %q", r)
	}

	// Nothing, while it runs: the request fails, the listener gets none.
	cut, err := c.SetSandboxNetwork(ctx, sb.ID, nil)
	if err != nil {
		t.Fatalf("set network to nothing: %v", err)
	}
	if cut.ID != sb.ID || len(cut.Network) != 0 || !slices.Equal(cut.Secrets, []string{"TOKEN"}) {
		t.Errorf("after the change to nothing: %+v", cut)
	}
	if now, err := c.GetSandbox(ctx, sb.ID); err != nil || len(now.Network) != 0 {
		t.Errorf("get after the change: %+v %v", now, err)
	}
	res, err = c.Exec(ctx, sb.ID, fetch)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(res.Stdout, "\n"); len(lines) != 3 || !strings.HasPrefix(lines[1], "failed ") {
		t.Errorf("with no network: %+v", res)
	}
	if r := requests(); len(r) != 1 {
		t.Errorf("the listener got %q after the network was cut", r)
	}

	// Back again.
	back, err := c.SetSandboxNetwork(ctx, sb.ID, []string{allow})
	if err != nil || !slices.Equal(back.Network, []string{allow}) {
		t.Fatalf("set network back: %+v %v", back, err)
	}
	if res, err := c.Exec(ctx, sb.ID, fetch); err != nil || !strings.Contains(res.Stdout, "\nupstream ok\n") {
		t.Errorf("with its network back: %+v %v", res, err)
	}
	if r := requests(); len(r) != 2 || r[1] != r[0] {
		t.Errorf("the listener got %q", r)
	}

	// Refusals.
	var e *Error
	if _, err := c.SetSandboxNetwork(ctx, sb.ID, []string{"10.0.0.0/8"}); !errors.As(err, &e) || e.StatusCode != 400 {
		t.Errorf("a network beyond the server's: %v", err)
	}
	plain, err := c.CreateSandbox(ctx, wire.SandboxRequest{Languages: []string{"bash"}, TimeoutSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.KillSandbox(context.Background(), plain.ID) })
	if _, err := c.SetSandboxNetwork(ctx, plain.ID, []string{allow}); !errors.As(err, &e) || e.StatusCode != 400 {
		t.Errorf("a network for a sandbox made without one: %v", err)
	}
	if _, err := c.SetSandboxNetwork(ctx, "no-such-sandbox", nil); !IsNotFound(err) {
		t.Errorf("an unknown sandbox: %v", err)
	}
	if _, err := c.CreateSandbox(ctx, wire.SandboxRequest{Languages: []string{"bash"}, Secrets: []string{"TOKEN"}}); !errors.As(err, &e) || e.StatusCode != 400 {
		t.Errorf("secrets without a network: %v", err)
	}
}

// TestSandboxNetworkBudgets: a live sandbox made with a byte budget on its
// one entry says so, moves what the budget allows and is cut past it;
// UpdateSandboxNetwork raises the budget while it runs (what it moved
// kept) and GetSandbox shows it; SetSandboxNetwork drops it; a budget for
// an entry the list lacks, or of no bytes, is a 400 both ways.
func TestSandboxNetworkBudgets(t *testing.T) {
	ctx := context.Background()
	const kib = 1 << 10
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("x", 64*kib)
	up := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) })}
	go up.Serve(ln)
	defer up.Close()
	allow := fmt.Sprintf("host.sandbox.internal:%d", ln.Addr().(*net.TCPAddr).Port)
	c := New(serve(t, newExecutor(t), func(c *api.Config) { c.Network.Allow = []string{allow} }))

	sb, err := c.CreateSandbox(ctx, wire.SandboxRequest{Languages: []string{"python"}, TimeoutSeconds: 120,
		Network: &wire.NetworkRequest{Allow: []string{allow}, Budgets: map[string]int64{allow: 100 * kib}}})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { c.KillSandbox(context.Background(), sb.ID) })
	if !slices.Equal(sb.Network, []string{allow}) || len(sb.NetworkBudgets) != 1 || sb.NetworkBudgets[allow] != 100*kib {
		t.Fatalf("created %+v", sb)
	}
	fetch := wire.ProcessRequest{Args: []string{"python3", "-c", `import urllib.request
try:
    print(len(urllib.request.urlopen("http://` + allow + `/", timeout=10).read()))
except Exception as e:
    print("failed", type(e).__name__)`}}
	got := func() string {
		t.Helper()
		res, err := c.Exec(ctx, sb.ID, fetch)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(res.Stdout)
	}
	if out := got(); out != fmt.Sprint(64*kib) {
		t.Fatalf("64 KiB within a budget of 100 KiB: %q", out)
	}
	if out := got(); !strings.HasPrefix(out, "failed ") {
		t.Fatalf("64 KiB more with about 36 KiB left: %q", out)
	}

	// Raised while it runs: what it moved is kept, so 64 KiB more fits
	// in 256 KiB, and another 64 KiB after that too, but not a third.
	up2, err := c.UpdateSandboxNetwork(ctx, sb.ID, wire.NetworkRequest{Allow: []string{allow}, Budgets: map[string]int64{allow: 256 * kib}})
	if err != nil || up2.NetworkBudgets[allow] != 256*kib || !slices.Equal(up2.Network, []string{allow}) {
		t.Fatalf("update the budget: %+v %v", up2, err)
	}
	if now, err := c.GetSandbox(ctx, sb.ID); err != nil || now.NetworkBudgets[allow] != 256*kib {
		t.Errorf("get after the update: %+v %v", now, err)
	}
	if out := got(); out != fmt.Sprint(64*kib) {
		t.Errorf("with the budget raised: %q", out)
	}
	if out := got(); out != fmt.Sprint(64*kib) {
		t.Errorf("with the budget raised, again: %q", out)
	}
	if out := got(); !strings.HasPrefix(out, "failed ") {
		t.Errorf("past the raised budget (what it moved kept): %q", out)
	}

	// Refusals, at create and update.
	var e *Error
	for _, bad := range []map[string]int64{{"example.com": 10}, {allow: 0}} {
		if _, err := c.UpdateSandboxNetwork(ctx, sb.ID, wire.NetworkRequest{Allow: []string{allow}, Budgets: bad}); !errors.As(err, &e) || e.StatusCode != 400 || !strings.Contains(e.Message, "budgets") {
			t.Errorf("update with budgets %v: %v", bad, err)
		}
		if _, err := c.CreateSandbox(ctx, wire.SandboxRequest{Languages: []string{"bash"}, Network: &wire.NetworkRequest{Allow: []string{allow}, Budgets: bad}}); !errors.As(err, &e) || e.StatusCode != 400 || !strings.Contains(e.Message, "budgets") {
			t.Errorf("create with budgets %v: %v", bad, err)
		}
	}

	// SetSandboxNetwork gives no budgets: the bound is gone.
	plain, err := c.SetSandboxNetwork(ctx, sb.ID, []string{allow})
	if err != nil || len(plain.NetworkBudgets) != 0 {
		t.Fatalf("set network without budgets: %+v %v", plain, err)
	}
	if out := got(); out != fmt.Sprint(64*kib) {
		t.Errorf("with no budget: %q", out)
	}
}
