package redteam

import (
	"context"
	"fmt"
	"net"
	"os"
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
	if isolation == executor.IsolationGVisor {
		t.Skip("live sandboxes run on the engine only, for now: the native run of this suite has them")
	}
	before := snapshot()
	state, err := os.MkdirTemp(dataDir, "live-")
	if err != nil {
		t.Fatal(err)
	}
	m := live.NewManager(local.LiveStarter(testExec), live.Config{StateDir: state, DefaultMemoryBytes: 256 << 20})
	ctx := context.Background()
	a, err := m.Create(ctx, "attacker", live.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Create(ctx, "neighbour", live.CreateOptions{})
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
		out, _ := sh(a, `for f in /proc/[0-9]*/environ; do tr '\0' '\n' < $f 2>/dev/null; done | grep -c SANDBOX_RUN_AGENT; env | grep -c SANDBOX_RUN_AGENT; true`)
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
		if strings.Contains(out, "agent") || !strings.Contains(out, "opened []") {
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
		n, err := m.Create(ctx, "networked", live.CreateOptions{Network: []string{fmt.Sprintf("host.sandbox.internal:%d", allowed)}})
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
	t.Run("kill-everything", func(t *testing.T) {
		// kill(-1) from the sandbox's user ends what it can signal: its
		// own processes, the agent with them; the sandbox ends, the
		// neighbour and the host go on.
		_, sub, err := a.Start(ctx, agent.Request{Args: []string{"python3", "-c", "import os, signal; os.kill(-1, signal.SIGKILL)"}})
		if err != nil {
			t.Fatal(err)
		}
		sub.Close()
		select {
		case <-a.Done():
		case <-time.After(time.Minute):
			t.Fatal("the sandbox whose processes were all killed did not end")
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
