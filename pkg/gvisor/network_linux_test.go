package gvisor

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/egress"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// TestNetwork: a run with a Spec.Network under gVisor reaches, through
// gVisor's own network stack and the egress that serves tun0, what the
// egress allows and nothing else, by address and by name; its sandbox's
// only device besides loopback is tun0. Cold and from the pool alike;
// the egress is stopped when the run is over, and the namespace goes.
func TestNetwork(t *testing.T) {
	g := testRunner(t)
	g.cfg.Pool = 1
	port := fromTheHost(t)
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	os.WriteFile(resolv, []byte("nameserver "+egress.GatewayAddr+"\noptions timeout:2 attempts:2\n"), 0o644)
	prog := fmt.Sprintf(`
import socket, urllib.request
print(sorted(n for _, n in socket.if_nameindex()))
print(urllib.request.urlopen("http://%s:%d/", timeout=10).read().decode())
for port in (%d, %d):
    try:
        socket.create_connection(("%s", port), timeout=10)
        print("connected", port == %d)
    except OSError:
        print("refused")
`, egress.HostInternalName, port, port, port+1, egress.HostInternalAddr, port)
	for _, round := range []string{"cold", "from the pool"} {
		s := spec("/usr/bin/python3", "-c", prog)
		s.Mounts = append(append([]sandbox.Mount{}, s.Mounts...), sandbox.Mount{Source: resolv, Target: "/etc/resolv.conf"})
		tn := newTestNetwork(t, port)
		s.Network = tn.n
		if round == "from the pool" {
			deadline := time.Now().Add(time.Minute)
			for g.readyFor(s) < 1 {
				if time.Now().After(deadline) {
					t.Fatal("no networked sandbox booted ahead")
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		res, err := g.Run(context.Background(), s)
		if err != nil {
			t.Fatalf("%s: %v", round, err)
		}
		want := "['lo', 'tun0']\nfrom-the-host\nconnected True\nrefused\n"
		if string(res.Stdout) != want || res.ExitCode != 0 {
			t.Errorf("%s: exit %d stdout %q stderr %q", round, res.ExitCode, res.Stdout, res.Stderr)
		}
		if !tn.detached.Load() {
			t.Errorf("%s: the network was not detached after the run", round)
		} else if st := tn.e.Stats(); st.Allowed < 2 || st.Denied < 1 {
			t.Errorf("%s: the egress saw %d allowed, %d denied", round, st.Allowed, st.Denied)
		}
	}
	g.Close()
	if mounts, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mounts), g.runs) {
		t.Errorf("a network namespace of a run left mounted under %s", g.runs)
	}
}

// TestNetworkIPv6: under gVisor too, a run's tun0 has its IPv6 address
// (runsc copies it from the namespace) and reaches, over IPv6, what the
// egress allows by address and by name (an AAAA answer), and nothing
// else.
func TestNetworkIPv6(t *testing.T) {
	g := testRunner(t)
	port := fromTheHost(t)
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	os.WriteFile(resolv, []byte("nameserver "+egress.GatewayAddr+"\noptions timeout:2 attempts:2\n"), 0o644)
	tn := newTestNetwork(t, port)
	// 3ffe::/16, the retired 6bone's, is routed nowhere: what the egress
	// lets through goes to the host's listener instead.
	tn.cfg.Policy, _ = egress.ParsePolicy([]string{"[3ffe::10]:80", "six.test:80"})
	tn.cfg.Resolver = func(_ context.Context, host string) ([]netip.Addr, error) {
		if host == "six.test" {
			return []netip.Addr{netip.MustParseAddr("3ffe::20")}, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	tn.cfg.HostAddrs = []netip.Addr{}
	tn.cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr != "[3ffe::10]:80" && addr != "[3ffe::20]:80" {
			return nil, fmt.Errorf("test: %s is not a test address", addr)
		}
		var d net.Dialer
		return d.DialContext(ctx, network, fmt.Sprintf("127.0.0.1:%d", port))
	}
	prog := `
import socket
for line in open('/proc/net/if_inet6').read().splitlines():
    f = line.split()
    if f[5] == 'tun0' and not f[0].startswith('fe80'):  # gVisor's scope column is 00 for link-local too
        print('address', f[0])
print(sorted({ai[4][0] for ai in socket.getaddrinfo('six.test', 80, proto=socket.IPPROTO_TCP)}))
for host, port in (('3ffe::10', 80), ('six.test', 80), ('3ffe::10', 81), ('3ffe::11', 80)):
    try:
        s = socket.create_connection((host, port), timeout=10)
        s.sendall(b'GET / HTTP/1.0\r\n\r\n')
        print(s.makefile('rb').read().split(b'\r\n\r\n')[1].decode())
    except OSError as e:
        print('refused' if isinstance(e, ConnectionRefusedError) else e)
`
	s := spec("/usr/bin/python3", "-c", prog)
	s.Mounts = append(append([]sandbox.Mount{}, s.Mounts...), sandbox.Mount{Source: resolv, Target: "/etc/resolv.conf"})
	s.Network = tn.n
	res, err := g.Run(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	want := "address fd5b0077000000000000000000000002\n['3ffe::20']\nfrom-the-host\nfrom-the-host\nrefused\nrefused\n"
	if string(res.Stdout) != want || res.ExitCode != 0 {
		t.Errorf("exit %d stdout %q stderr %q, want %q", res.ExitCode, res.Stdout, res.Stderr, want)
	}
	st := tn.e.Stats()
	for _, d := range st.Destinations {
		if d.Protocol == "tcp" && d.Allowed != (d.Port == 80 && (d.IP == "3ffe::10" || d.IP == "3ffe::20")) {
			t.Errorf("destination %+v", d)
		}
	}
	if st.Allowed < 2 || st.Denied < 2 {
		t.Errorf("the egress saw %d allowed, %d denied", st.Allowed, st.Denied)
	}
}

// testNetwork is a sandbox.Network served by an egress that lets it reach
// host.sandbox.internal:port.
type testNetwork struct {
	n        *sandbox.Network
	e        *egress.Egress
	detached atomic.Bool
	// cfg is what the egress starts with (tests may change it before).
	cfg egress.Config
}

func newTestNetwork(t *testing.T, port int) *testNetwork {
	t.Helper()
	policy, err := egress.ParsePolicy([]string{fmt.Sprintf("%s:%d", egress.HostInternalName, port)})
	if err != nil {
		t.Fatal(err)
	}
	tn := &testNetwork{cfg: egress.Config{Policy: policy}}
	tn.n = &sandbox.Network{
		Address:  netip.PrefixFrom(netip.MustParseAddr(egress.SandboxAddr), egress.PrefixLen),
		Gateway:  netip.MustParseAddr(egress.GatewayAddr),
		Address6: netip.PrefixFrom(netip.MustParseAddr(egress.SandboxAddr6), egress.PrefixLen6),
		Gateway6: netip.MustParseAddr(egress.GatewayAddr6),
		MTU:      egress.DefaultMTU,
		Attach: func(tun *os.File) (func(), error) {
			var err error
			tn.e, err = egress.Start(context.Background(), tun, tn.cfg)
			tun.Close()
			return func() { tn.detached.Store(true); tn.e.Close() }, err
		},
	}
	return tn
}

// netProgram connects to the host's socket /sock/s (again whenever the
// connection ends) and answers each line with what a GET of the URL the
// line is brings, or "error".
const netProgram = `import signal, socket, time, urllib.request
signal.signal(signal.SIGUSR1, lambda *_: None)
while True:
    try:
        s = socket.socket(socket.AF_UNIX)
        s.connect("/sock/s")
    except OSError:
        time.sleep(0.05)
        continue
    try:
        s.sendall(b"hello\n")
        for line in s.makefile("r"):
            try:
                got = urllib.request.urlopen(line.strip(), timeout=5).read().decode()
            except Exception as e:
                got = "error"
            s.sendall((got + "\n").encode())
    except OSError:
        pass
    s.close()
`

// TestLiveNetwork: a live sandbox under gVisor with a network reaches what
// its egress allows; let go by its runner, its device outlives it (gVisor
// reads it by its index), and the runner that takes it over serves it with
// an egress of its own; its clones get namespaces and egresses of their
// own; a kill detaches the egress and unmounts the namespace.
func TestLiveNetwork(t *testing.T) {
	g := testRunner(t)
	port := fromTheHost(t)
	url := fmt.Sprintf("http://%s:%d/", egress.HostInternalAddr, port)
	refused := fmt.Sprintf("http://%s:%d/", egress.HostInternalAddr, port+1)
	netSpec := func(sock string, tn *testNetwork) *sandbox.Spec {
		s := spec("/usr/bin/python3", "-u", "-c", netProgram)
		s.Mounts = append(append([]sandbox.Mount{}, s.Mounts...), sandbox.Mount{Source: sock, Target: "/sock", Late: true})
		s.Network = tn.n
		return s
	}
	fetch := func(rd *bufio.Reader, c net.Conn, u string) string {
		t.Helper()
		return strings.Join(ask(t, rd, c, u), " ")
	}

	sock := filepath.Join(t.TempDir(), "sock")
	h := listenHost(t, sock)
	tn1 := newTestNetwork(t, port)
	lv, err := g.StartLive(context.Background(), netSpec(sock, tn1))
	if err != nil {
		t.Fatal(err)
	}
	defer lv.Kill()
	if !lv.Record().Network {
		t.Error("the record does not say the sandbox has a network")
	}
	rd, c, _ := h.next()
	if got := fetch(rd, c, url); got != "from-the-host" {
		t.Fatalf("the allowed host: %q", got)
	}
	if got := fetch(rd, c, refused); got != "error" {
		t.Errorf("a port the egress does not allow: %q", got)
	}

	// Let go and taken over: the device stays; the new holder serves it.
	lv.Detach()
	lv.Wait()
	if !tn1.detached.Load() {
		t.Error("the first egress still serves the sandbox let go")
	}
	g2, err := New(Config{Dir: g.cfg.Dir})
	if err != nil {
		t.Fatal(err)
	}
	defer g2.Close()
	lv2, err := g2.AdoptLive(lv.Record())
	if err != nil {
		t.Fatal(err)
	}
	defer lv2.Kill()
	tn2 := newTestNetwork(t, port)
	if err := lv2.AttachNetwork(tn2.n); err != nil {
		t.Fatal(err)
	}
	if err := lv2.AttachNetwork(newTestNetwork(t, port).n); err == nil {
		t.Error("a second device was served")
	}
	if got := fetch(rd, c, url); got != "from-the-host" {
		t.Fatalf("after the takeover: %q", got)
	}
	if st := tn2.e.Stats(); st.Allowed < 1 {
		t.Errorf("the new egress saw %d allowed connections", st.Allowed)
	}

	// A clone: a namespace and an egress of its own.
	image := t.TempDir()
	if _, err := lv2.Checkpoint(context.Background(), image, -1); err != nil {
		t.Fatal(err)
	}
	csock := filepath.Join(t.TempDir(), "csock")
	ch := listenHost(t, csock)
	tn3 := newTestNetwork(t, port)
	cl, err := g2.RestoreLive(context.Background(), netSpec(csock, tn3), image)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Kill()
	crd, cc, _ := ch.next()
	if got := fetch(crd, cc, url); got != "from-the-host" {
		t.Errorf("the clone: %q", got)
	}
	if st := tn3.e.Stats(); st.Allowed < 1 {
		t.Errorf("the clone's egress saw %d allowed connections", st.Allowed)
	}
	rd, c, _ = h.next() // the original connects again after the checkpoint
	if got := fetch(rd, c, url); got != "from-the-host" {
		t.Errorf("the original after the clone: %q", got)
	}

	// A kill: the egress detached, the namespace gone.
	dir := lv2.Record().Dir
	lv2.Kill()
	if !tn2.detached.Load() {
		t.Error("the egress still serves a killed sandbox")
	}
	if mi, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mi), dir) {
		t.Errorf("%s is still mounted", dir)
	}
}

// fromTheHost serves "from-the-host" over HTTP on the host's loopback
// until the test ends, and returns its port.
func fromTheHost(t *testing.T) int {
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
			fmt.Fprint(c, "HTTP/1.0 200 OK\r\n\r\nfrom-the-host")
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}
