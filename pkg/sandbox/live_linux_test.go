package sandbox

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestPTY: a run with Spec.PTY opens terminals through /dev/ptmx, in a
// devpts of its sandbox's own: it sees its terminal and ptmx there, none
// of the host's, and the next run in the sandbox none of the last run's; it
// has maxPTYs terminals at most. A
// run without it has no /dev/ptmx nor /dev/pts, even after PTY runs of the
// same spec otherwise (they never share a sandbox).
func TestPTY(t *testing.T) {
	// A terminal of the host's, which the sandbox must not see.
	host, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no terminals on the host: %v", err)
	}
	defer host.Close()
	n, err := unix.IoctlGetInt(int(host.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/dev/pts/" + strconv.Itoa(n)); err != nil {
		t.Fatalf("the host's terminal: %v", err)
	}
	const code = `
import os
m, s = os.openpty()
print(os.ttyname(s))
print(sorted(os.listdir('/dev/pts')))
print(os.readlink('/dev/ptmx'))
st = os.stat(s)
print(st.st_uid, st.st_gid, oct(st.st_mode & 0o777))
os.write(m, b'typed\n')
print(os.read(s, 64))
`
	// Terminals up to the sandbox's bound, then ENOSPC (28).
	const many = `
import os
n = 0
try:
    while True:
        os.openpty()
        n += 1
except OSError as e:
    print(n, e.errno)
`
	want := "/dev/pts/0\n['0', 'ptmx']\npts/ptmx\n1000 1000 0o620\nb'typed\\n'\n"
	for i := range 3 {
		res := run(t, &Spec{Args: []string{"/usr/bin/python3", "-c", code}, PTY: true})
		if res.ExitCode != 0 || string(res.Stdout) != want {
			t.Fatalf("run %d with PTY: exit %d\nstdout: %q\nwant:   %q\nstderr: %s", i, res.ExitCode, res.Stdout, want, res.Stderr)
		}
		res = run(t, &Spec{Args: []string{"/usr/bin/python3", "-c", code}})
		if res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "FileNotFoundError") {
			t.Fatalf("run %d without PTY opened a terminal: exit %d\nstdout: %s\nstderr: %s", i, res.ExitCode, res.Stdout, res.Stderr)
		}
		res = run(t, &Spec{Args: []string{"/usr/bin/python3", "-c", many}, PTY: true})
		if want := strconv.Itoa(maxPTYs) + " 28\n"; res.ExitCode != 0 || string(res.Stdout) != want {
			t.Fatalf("run %d opened terminals up to: exit %d, %q, want %q; stderr %s", i, res.ExitCode, res.Stdout, want, res.Stderr)
		}
		res = sh(t, "ls -A /dev; test ! -e /dev/ptmx && test ! -e /dev/pts", Limits{})
		if res.ExitCode != 0 || string(res.Stdout) != "fd\nfull\nnull\nrandom\nshm\nstderr\nstdin\nstdout\nurandom\nzero\n" {
			t.Fatalf("run %d without PTY: exit %d, /dev: %q", i, res.ExitCode, res.Stdout)
		}
	}
}

// TestPTYNextRun: a terminal that processes of a run still hold when it
// ends is gone with them: the next run with PTY sees no terminal of the
// last one's.
func TestPTYNextRun(t *testing.T) {
	const keep = `
import os, subprocess
m, s = os.openpty()
subprocess.Popen(['sleep', '30'], pass_fds=(m, s))
print(os.ttyname(s))
`
	res := run(t, &Spec{Args: []string{"/usr/bin/python3", "-c", keep}, PTY: true})
	if res.ExitCode != 0 || string(res.Stdout) != "/dev/pts/0\n" {
		t.Fatalf("exit %d, stdout %q, stderr %s", res.ExitCode, res.Stdout, res.Stderr)
	}
	res = run(t, &Spec{Args: []string{"bash", "-c", "ls /dev/pts"}, PTY: true})
	if res.ExitCode != 0 || string(res.Stdout) != "ptmx\n" {
		t.Fatalf("the next run sees: exit %d, %q, stderr %s", res.ExitCode, res.Stdout, res.Stderr)
	}
}

// TestHome: Spec.Home is /work by another name; a sandbox without it has
// no such path; a home that would hide a mount is refused.
func TestHome(t *testing.T) {
	res := run(t, &Spec{Args: []string{"bash", "-c", "cd /home/user && echo x > f && pwd && cat /work/f && readlink /home/user"}, Home: "/home/user"})
	if res.ExitCode != 0 || string(res.Stdout) != "/home/user\nx\n/work\n" {
		t.Fatalf("with a home: exit %d, %q, stderr %s", res.ExitCode, res.Stdout, res.Stderr)
	}
	res = sh(t, "test ! -e /home/user", Limits{})
	if res.ExitCode != 0 {
		t.Fatalf("without a home, /home/user exists: %q", res.Stderr)
	}
	for _, h := range []string{"home", "/home", "/work/user", "/tmp/x", "/proc/x", "/home/../etc", "/home/user/"} {
		if err := validateSpec(&Spec{Args: []string{"true"}, Home: h}); err == nil {
			t.Errorf("home %q was taken", h)
		}
	}
}

// startServer starts a web server on 127.0.0.1:port inside a sandbox that
// serves /work, holding index.html with marker, and waits until DialTCP
// reaches it.
func startServer(t *testing.T, port int, marker string, network *Network) *Process {
	t.Helper()
	spec := serverSpec(port, marker)
	spec.Network = network
	p, err := testEngine(t).Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !p.ended.Load() {
			p.Kill()
			p.Wait()
		}
	})
	awaitServer(t, p, port)
	return p
}

// serverSpec runs a web server on 127.0.0.1:port that serves /work,
// holding index.html with marker.
func serverSpec(port int, marker string) *Spec {
	return withDefaults(&Spec{
		Args:   []string{"/usr/bin/python3", "-m", "http.server", strconv.Itoa(port), "--bind", "127.0.0.1", "--directory", "/work"},
		Files:  []File{{Path: "index.html", Data: []byte(marker)}},
		Limits: Limits{WallTime: time.Minute, CPUTime: time.Minute},
	})
}

// dialer is a run the host dials into: a Process, or an Adopted one.
type dialer interface {
	DialTCP(ctx context.Context, port int) (net.Conn, error)
}

// awaitServer waits until a server listens on port inside the run p.
func awaitServer(t *testing.T, p dialer, port int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		conn, err := p.DialTCP(ctx, port)
		if err == nil {
			conn.Close()
			return
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("waiting for the server: %v", err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the server never listened: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// get fetches path from the server on port inside the run p.
func get(t *testing.T, p dialer, port int, path string) string {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return p.DialTCP(ctx, port) },
	}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("http://sandbox" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v", path, resp.Status, err)
	}
	return string(body)
}

// TestDialTCP: the host reaches a server listening on the loopback inside
// a running sandbox that has no network; only the sandbox's loopback, not
// the host's; not once the run is over, when its sandbox is gone.
func TestDialTCP(t *testing.T) {
	const port = 8000
	p := startServer(t, port, "marker-in-sandbox", nil)
	if body := get(t, p, port, "/index.html"); body != "marker-in-sandbox" {
		t.Fatalf("GET: %q", body)
	}
	ctx := context.Background()
	if conn, err := p.DialTCP(ctx, port+1); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("a port nobody listens on: %v", err)
		if conn != nil {
			conn.Close()
		}
	}
	host, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	if conn, err := p.DialTCP(ctx, host.Addr().(*net.TCPAddr).Port); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("the host's listener on 127.0.0.1 is reached: %v", err)
		if conn != nil {
			conn.Close()
		}
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if conn, err := p.DialTCP(canceled, port); err == nil {
		conn.Close()
		t.Errorf("a dial with a canceled context connected")
	}
	if _, err := p.DialTCP(ctx, 0); err == nil {
		t.Errorf("port 0: no error")
	}

	c := p.c
	p.Kill()
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.DialTCP(ctx, port); !errors.Is(err, ErrRunEnded) {
		t.Errorf("after the run: %v", err)
	}
	testEngine(t).Quiesce()
	if c.alive() {
		t.Errorf("a sandbox dialed into serves again")
	}
}

// TestDialTCPNetwork: with a Spec.Network the host dials into the
// namespace that has tun0, the program's own.
func TestDialTCPNetwork(t *testing.T) {
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skipf("no TUN devices on this host: %v", err)
	}
	n := &Network{Address: netip.MustParsePrefix("10.77.0.2/24"), Gateway: netip.MustParseAddr("10.77.0.1"),
		Attach: func(tun *os.File) (func(), error) {
			go io.Copy(io.Discard, tun)
			return func() { tun.Close() }, nil
		}}
	const port = 8080
	p := startServer(t, port, "marker-with-network", n)
	if body := get(t, p, port, "/index.html"); body != "marker-with-network" {
		t.Fatalf("GET: %q", body)
	}
}

// TestStats: a running sandbox's use, read on demand: CPU, memory now,
// its disks; ErrRunEnded once it is over.
func TestStats(t *testing.T) {
	p := startServer(t, 8001, strings.Repeat("x", 1<<20), nil)
	s, err := p.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if s.CPU <= 0 || s.Memory <= 0 || s.MemoryPeak < s.Memory || s.Disk < 1<<20 || s.DiskTotal < 2*(64<<20) {
		t.Fatalf("stats of a running server with a 1 MiB file: %+v", s)
	}
	p.Kill()
	p.Wait()
	if _, err := p.Stats(); !errors.Is(err, ErrRunEnded) {
		t.Fatalf("stats after the end: %v", err)
	}
}
