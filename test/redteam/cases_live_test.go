package redteam

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/live"
	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
	"github.com/sandbox-run/sandbox-run/pkg/local"
)

// TestRedTeamLive: attacks from inside a live sandbox (pkg/live) on what
// makes it live: its agent (the secret it proves itself to the host with,
// its memory, its socket), the host's socket directory, its neighbour, the
// host. The sandbox is the server's kind: started detached, its agent on a
// Unix socket of the host's.
func TestRedTeamLive(t *testing.T) {
	// Under gVisor (the suite's gVisor run) the sandboxes are gVisor's,
	// and their forks carry memory.
	iso := ""
	if isolation == executor.IsolationGVisor {
		iso = executor.IsolationGVisor
	}
	before := snapshot()
	state, err := os.MkdirTemp(dataDir, "live-")
	if err != nil {
		t.Fatal(err)
	}
	m := live.NewManager(local.LiveStarter(testExec), live.Config{StateDir: state, DefaultMemoryBytes: 256 << 20})
	ctx := context.Background()
	a, err := m.Create(ctx, "attacker", live.CreateOptions{Isolation: iso})
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Create(ctx, "neighbour", live.CreateOptions{Isolation: iso})
	if err != nil {
		t.Fatal(err)
	}
	sh := func(s *live.Sandbox, script string) (string, int) {
		t.Helper()
		_, sub, err := s.Start(ctx, agent.Request{Args: []string{"bash", "-c", script}})
		if err != nil {
			t.Fatalf("start: %v", err)
		}
		defer sub.Close()
		var out strings.Builder
		wait, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		for {
			ev, err := sub.Next(wait)
			if err != nil {
				t.Fatalf("the sandbox's events: %v (so far %q)", err, out.String())
			}
			switch ev.Type {
			case agent.EvStdout, agent.EvStderr:
				out.Write(ev.Data)
			case agent.EvExit:
				return out.String(), *ev.Exit
			case agent.EvError:
				t.Fatalf("%s: %s", ev.Code, ev.Error)
			}
		}
	}
	if out, _ := sh(b, "echo neighbour-secret > /home/user/mine; echo ok"); out != "ok\n" {
		t.Fatalf("neighbour: %q", out)
	}

	t.Run("agent-secret-env", func(t *testing.T) {
		// Every process's environment, the agent's included, as far as
		// /proc lets the sandbox read it.
		out, _ := sh(a, `{ for f in /proc/[0-9]*/environ; do tr '\0' '\n' < $f; done; } 2>/dev/null | grep -c SANDBOX_RUN_AGENT; env | grep -c SANDBOX_RUN_AGENT; true`)
		if out != "0\n0\n" {
			t.Fatalf("the agent's socket and secret are visible: %q", out)
		}
	})
	t.Run("agent-memory", func(t *testing.T) {
		// The agent runs as the sandbox's user too: undumpable, it is
		// hidden from the sandbox's /proc, and its memory, environment and
		// ptrace are out of reach whatever pid is tried.
		out, _ := sh(a, `python3 - <<'EOF'
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
me = os.getpid()
seen, opened = [], []
for pid in range(1, 4096):
    if pid == me or pid == os.getppid():
        continue
    try:
        with open('/proc/%d/cmdline' % pid, 'rb') as f:
            seen.append(f.read().split(b'\0')[0].decode())
    except OSError:
        pass
    for what in ('environ', 'mem'):
        try:
            with open('/proc/%d/%s' % (pid, what), 'rb') as f:
                f.read(1)
            opened.append('%d/%s' % (pid, what))
        except OSError:
            pass
    if libc.ptrace(16, pid, 0, 0) == 0:
        opened.append('%d/ptrace' % pid)
print('seen', seen)
print('opened', opened)
EOF`)
		// (Under gVisor the agent is the sandbox's init: its name shows
		// in /proc, nothing more.)
		if (iso == "" && strings.Contains(out, "agent")) || !strings.Contains(out, "opened []") {
			t.Fatalf("the agent is open to the sandbox: %q", out)
		}
	})
	t.Run("socket-dir", func(t *testing.T) {
		// The host's directory is read-only here; the socket accepts no
		// second agent (the host listens only until its agent is in).
		out, _ := sh(a, `d=`+agent.SocketDir+`
touch $d/planted 2>/dev/null && echo planted
rm -f $d/`+agent.SocketName+` 2>/dev/null; [ -S $d/`+agent.SocketName+` ] || echo removed
ln -s /etc/passwd $d/link 2>/dev/null && echo linked
python3 -c "
import socket
s = socket.socket(socket.AF_UNIX)
try:
    s.connect('$d/`+agent.SocketName+`'); s.sendall(b'{\"type\":\"hello\",\"data\":\"Zm9yZ2Vk\"}\n'); print('connected')
except OSError as e:
    print('refused', e.errno)
"`)
		if strings.Contains(out, "planted") || strings.Contains(out, "removed") || strings.Contains(out, "linked") || !strings.Contains(out, "refused") {
			t.Fatalf("the socket directory: %q", out)
		}
		if out, _ := sh(a, "echo still-served"); out != "still-served\n" {
			t.Fatalf("the agent after the attempts: %q", out)
		}
	})
	t.Run("neighbour", func(t *testing.T) {
		out, _ := sh(a, `cat /home/user/mine 2>&1; ls /proc | grep -c '^[0-9]'; find / -name mine -path '*home*' 2>/dev/null | head -3`)
		if strings.Contains(out, "neighbour-secret") {
			t.Fatalf("the neighbour's file: %q", out)
		}
	})
	t.Run("network", func(t *testing.T) {
		// A sandbox with a network reaches what its list names and
		// nothing else: not another port of the host, not its neighbour's
		// server, not the gateway's other ports nor the metadata address;
		// nor can it change its device.
		if _, err := os.Stat("/dev/net/tun"); err != nil {
			t.Skipf("no TUN devices: %v", err)
		}
		allowed, other := hostPort(t), hostPort(t)
		n, err := m.Create(ctx, "networked", live.CreateOptions{Isolation: iso, Network: []string{fmt.Sprintf("host.sandbox.internal:%d", allowed)}})
		if err != nil {
			t.Fatal(err)
		}
		if out, _ := sh(b, "(python3 -m http.server 8000 --bind 0.0.0.0 >/dev/null 2>&1 &); sleep 0.5; echo up"); out != "up\n" {
			t.Fatalf("the neighbour's server: %q", out)
		}
		out, _ := sh(n, fmt.Sprintf(`python3 - <<'EOF'
import socket, fcntl, struct
for host, port in (("host.sandbox.internal", %d), ("host.sandbox.internal", %d), ("127.0.0.1", 8000),
                   ("10.77.0.2", 8000), ("10.77.0.1", 8000), ("169.254.169.254", 80)):
    try:
        socket.create_connection((host, port), timeout=5).close()
        print("reached", host, port)
    except OSError as e:
        print("refused", host, port)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    fcntl.ioctl(s.fileno(), 0x8914, struct.pack('16sH14x', b'tun0', 0))
    print("changed the device")
except OSError:
    print("device untouched")
EOF`, allowed, other))
		want := fmt.Sprintf("reached host.sandbox.internal %d\nrefused host.sandbox.internal %d\nrefused 127.0.0.1 8000\n"+
			"refused 10.77.0.2 8000\nrefused 10.77.0.1 8000\nrefused 169.254.169.254 80\ndevice untouched\n", allowed, other)
		if out != want {
			t.Fatalf("from a sandbox with a network:\n%s\nwant\n%s", out, want)
		}
		if err := m.Kill("networked", n.ID); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("snapshot-links", func(t *testing.T) {
		// Links planted toward the host's files, a FIFO and a socket are
		// snapshotted as links (never followed) or left out: the snapshot
		// holds none of the host's bytes, and a sandbox made from it finds
		// links to its own root.
		out, _ := sh(a, `ln -s /etc /home/user/etc-link; ln -s / /tmp/root-link; ln -s /proc/1/root /home/user/p1;
mkfifo /home/user/fifo; python3 -c "import socket; socket.socket(socket.AF_UNIX).bind('/tmp/sock')"; echo planted`)
		if out != "planted\n" {
			t.Fatalf("planting: %q", out)
		}
		snap, err := m.SnapshotSandbox(ctx, "attacker", a.ID, "links")
		if err != nil {
			t.Fatal(err)
		}
		if !snap.Memory && snap.Size > 1<<10 {
			t.Fatalf("the snapshot holds %d bytes: a link was followed", snap.Size)
		}
		// On the host, the snapshot has the links as links, and no file
		// of the host's /etc.
		links := 0
		filepath.WalkDir(filepath.Join(state, "snapshots", snap.ID), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			switch {
			case d.Type()&fs.ModeSymlink != 0 && (d.Name() == "etc-link" || d.Name() == "root-link" || d.Name() == "p1"):
				links++
			case d.Name() == "passwd" || d.Name() == "hostname" || d.Type()&(fs.ModeNamedPipe|fs.ModeSocket) != 0:
				t.Errorf("the snapshot has %s", p)
			}
			return nil
		})
		if links != 3 {
			t.Errorf("the snapshot has %d of the 3 links", links)
		}
		c, err := m.Create(ctx, "attacker", live.CreateOptions{Snapshot: snap.ID})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Kill("attacker", c.ID)
		out, _ = sh(c, `readlink /home/user/etc-link /tmp/root-link; [ -e /home/user/fifo ] && echo fifo; [ -e /tmp/sock ] && echo sock; true`)
		want := "/etc\n/\n"
		if snap.Memory {
			// gVisor keeps a FIFO and a socket in its own kernel (nothing
			// on the host): its memory, restored, has them.
			want += "fifo\nsock\n"
		}
		if out != want {
			t.Fatalf("a sandbox from the snapshot: %q, want %q", out, want)
		}
	})
	t.Run("evict-links", func(t *testing.T) {
		// The links planted above, written to disk with the sandbox
		// evicted and loaded back when it comes back, stay links: the
		// disk holds none of the host's files, the sandbox comes back with
		// links to its own root, and the host's files are as they were.
		hostname, _ := os.ReadFile("/etc/hostname")
		if err := m.Pause(ctx, "attacker", a.ID); err != nil {
			t.Fatal(err)
		}
		if err := m.Evict(ctx, "neighbour", a.ID); !errors.Is(err, live.ErrNotFound) {
			t.Errorf("an eviction of another key's sandbox: %v", err)
		}
		if err := m.Evict(ctx, "attacker", a.ID); err != nil {
			t.Fatal(err)
		}
		links := 0
		filepath.WalkDir(filepath.Join(state, "evicted", a.ID), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			switch {
			case d.Type()&fs.ModeSymlink != 0 && (d.Name() == "etc-link" || d.Name() == "root-link" || d.Name() == "p1"):
				links++
			case d.Name() == "passwd" || d.Name() == "hostname" || d.Name() == "shadow":
				t.Errorf("the evicted sandbox's disk has %s", p)
			}
			return nil
		})
		if iso == "" && links != 3 {
			t.Errorf("the evicted sandbox's disk has %d of the 3 links", links)
		}
		out, _ := sh(a, `readlink /home/user/etc-link /tmp/root-link; { echo x > /home/user/etc-link/evicted-write; } 2>/dev/null; echo back`)
		if !strings.HasPrefix(out, "/etc\n/\n") || !strings.HasSuffix(out, "back\n") || a.Evicted() {
			t.Fatalf("back from disk: %q (evicted %v)", out, a.Evicted())
		}
		if _, err := os.Stat("/etc/evicted-write"); err == nil {
			os.Remove("/etc/evicted-write")
			t.Fatal("a write through a link after the sandbox came back reached the host's /etc")
		}
		if now, _ := os.ReadFile("/etc/hostname"); string(now) != string(hostname) {
			t.Fatal("the host's /etc/hostname changed")
		}
	})
	t.Run("snapshot-other-key", func(t *testing.T) {
		// Another key's snapshot and sandbox are not there for the
		// neighbour: no create from it, no list, no delete, no fork.
		snap, err := m.SnapshotSandbox(ctx, "attacker", a.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Create(ctx, "neighbour", live.CreateOptions{Snapshot: snap.ID}); !errors.Is(err, live.ErrNoSuchSnapshot) {
			t.Errorf("a create from another key's snapshot: %v", err)
		}
		if got := m.Snapshots("neighbour", ""); len(got) != 0 {
			t.Errorf("the neighbour lists %d snapshots", len(got))
		}
		if err := m.DeleteSnapshot("neighbour", snap.ID); !errors.Is(err, live.ErrNoSuchSnapshot) {
			t.Errorf("a delete of another key's snapshot: %v", err)
		}
		if _, _, err := m.Fork(ctx, "neighbour", a.ID, 1, 0); !errors.Is(err, live.ErrNotFound) {
			t.Errorf("a fork of another key's sandbox: %v", err)
		}
	})
	t.Run("fork-child", func(t *testing.T) {
		// A child is a sandbox of its own: what it writes reaches neither
		// its parent nor the neighbour, it sees neither's processes, and
		// its socket directory is its own (the parent's agent is not
		// there to reach).
		kids, errs, err := m.Fork(ctx, "attacker", a.ID, 1, time.Minute)
		if err != nil || errs[0] != nil {
			t.Fatalf("fork: %v %v", err, errs)
		}
		k := kids[0]
		if k.ForkedMemory != (iso != "") {
			t.Errorf("forked memory %v under isolation %q", k.ForkedMemory, iso)
		}
		defer m.Kill("attacker", k.ID)
		if out, _ := sh(k, `echo child > /home/user/from-child; echo child > /tmp/from-child; cat /home/user/mine 2>/dev/null; ps -e -o comm= | grep -vc -e ps -e bash -e grep -e sandbox-run-age; ls `+agent.SocketDir+`; true`); out != "0\n"+agent.SocketName+"\n" {
			t.Errorf("in the child: %q", out)
		}
		if out, _ := sh(a, `cat /home/user/from-child /tmp/from-child 2>/dev/null; echo done`); out != "done\n" {
			t.Errorf("the child's files in the parent: %q", out)
		}
		if out, _ := sh(b, `cat /home/user/from-child 2>/dev/null; echo done`); out != "done\n" {
			t.Errorf("the child's files in the neighbour: %q", out)
		}
	})
	t.Run("kill-everything", func(t *testing.T) {
		// kill(-1) from the sandbox's user ends what it can signal: its
		// own processes, the agent with them; the sandbox ends, the
		// neighbour and the host go on.
		_, sub, err := a.Start(ctx, agent.Request{Args: []string{"python3", "-c", "import os, signal; os.kill(-1, signal.SIGKILL)"}})
		if err != nil {
			t.Fatal(err)
		}
		sub.Close()
		if iso != "" {
			// Under gVisor the agent is the sandbox's init, which kill(-1)
			// does not reach: the sandbox goes on, its agent serving.
			if out, _ := sh(a, "echo served"); out != "served\n" {
				t.Fatalf("the agent after kill(-1): %q", out)
			}
		} else {
			select {
			case <-a.Done():
			case <-time.After(time.Minute):
				t.Fatal("the sandbox whose processes were all killed did not end")
			}
		}
		if out, _ := sh(b, "cat /home/user/mine"); out != "neighbour-secret\n" {
			t.Fatalf("the neighbour after it: %q", out)
		}
	})
	m.Close()
	os.RemoveAll(state)
	if left := leftovers(before); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// hostPort is a TCP port on the host's loopback that accepts connections
// until the test ends.
func hostPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}
