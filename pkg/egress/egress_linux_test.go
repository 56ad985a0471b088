package egress

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/sandbox-run/sandbox-run/pkg/netpolicy"
)

const python = "/usr/bin/python3"

// client is run by python3 inside the sandbox's namespace; it prints one
// JSON object: ok, error, secs and what the mode found.
const client = `
import json, socket, struct, sys, time, urllib.request
mode, args, out = sys.argv[1], sys.argv[2:], {"n": 0}
t0 = time.monotonic()
try:
    if mode == "get":
        with urllib.request.urlopen(args[0], timeout=30) as r:
            out["body"] = r.read().decode()
    elif mode == "connect":
        s = socket.create_connection((args[0], int(args[1])), timeout=30)
        s.close()
    elif mode == "resolve":
        out["addrs"] = sorted({ai[4][0] for ai in socket.getaddrinfo(args[0], 80, proto=socket.IPPROTO_TCP)})
    elif mode == "udp":
        s = socket.socket(socket.AF_INET6 if ":" in args[0] else socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(3)
        s.connect((args[0], int(args[1])))
        s.send(b"hello")
        s.recv(100)
    elif mode == "dnsq":
        # dnsq SERVER NAME [TYPE]: one query of TYPE (1, A: the default;
        # 28, AAAA) for NAME; the last answer's address.
        s = socket.socket(socket.AF_INET6 if ":" in args[0] else socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(5)
        s.connect((args[0], 53))
        qtype = int(args[2]) if len(args) > 2 else 1
        q = struct.pack("!HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
        q += b"".join(bytes([len(l)]) + l.encode() for l in args[1].split(".")) + b"\0" + struct.pack("!HH", qtype, 1)
        s.send(q)
        r = s.recv(512)
        ancount = struct.unpack("!H", r[6:8])[0]
        out["body"] = "rcode=%d" % (r[3] & 15)
        fam, size = (socket.AF_INET6, 16) if qtype == 28 else (socket.AF_INET, 4)
        out["addrs"] = [socket.inet_ntop(fam, r[-size:])] if ancount else []
    elif mode == "read":
        s = socket.create_connection((args[0], int(args[1])), timeout=30)
        while True:
            b = s.recv(1 << 16)
            if not b:
                break
            out["n"] += len(b)
    elif mode == "write":
        s = socket.create_connection((args[0], int(args[1])), timeout=30)
        chunk = b"x" * (1 << 16)
        for _ in range(int(args[2]) >> 16):
            s.sendall(chunk)
            out["n"] += len(chunk)
        s.shutdown(socket.SHUT_WR)
        s.recv(10)
    out["ok"] = True
except Exception as e:
    out["ok"] = False
    out["error"] = type(e).__name__ + ": " + str(e)
out["secs"] = time.monotonic() - t0
print(json.dumps(out))
`

type result struct {
	OK    bool     `json:"ok"`
	Error string   `json:"error"`
	Secs  float64  `json:"secs"`
	Body  string   `json:"body"`
	Addrs []string `json:"addrs"`
	N     int64    `json:"n"`
}

// py runs the client in n.
func py(t *testing.T, n *sandboxNet, args ...string) result {
	t.Helper()
	if _, err := os.Stat(python); err != nil {
		t.Skipf("no %s", python)
	}
	script := filepath.Join(t.TempDir(), "client.py")
	if err := os.WriteFile(script, []byte(client), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, append([]string{script}, args...)...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := n.start(cmd); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("python %q: %v: %s", args, err, stderr.String())
	}
	var r result
	if err := json.Unmarshal([]byte(stdout.String()), &r); err != nil {
		t.Fatalf("python %q: %v: %q %q", args, err, stdout.String(), stderr.String())
	}
	t.Logf("python %q: %+v", args, r)
	return r
}

// failsFast checks that a client attempt failed, and quickly.
func failsFast(t *testing.T, r result, what string) {
	t.Helper()
	if r.OK {
		t.Errorf("%s: succeeded", what)
	} else if r.Secs >= 5 {
		t.Errorf("%s: took %.1fs to fail (%s)", what, r.Secs, r.Error)
	}
}

// fakeResolver maps names to addresses (several: comma-separated);
// others are not found.
func fakeResolver(m map[string]string) func(context.Context, string) ([]netip.Addr, error) {
	return func(_ context.Context, host string) ([]netip.Addr, error) {
		list, ok := m[host]
		if !ok {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		var addrs []netip.Addr
		for _, a := range strings.Split(list, ",") {
			addrs = append(addrs, netip.MustParseAddr(a))
		}
		return addrs, nil
	}
}

// localDial replaces the host's dialer: a test never connects to an
// address outside this machine. to maps the addresses the policy let
// through to local listeners; anything else fails and is remembered.
// The tests' outside addresses are in 172.32.0.0/16, public ones just past
// the private 172.16.0.0/12 (netpolicy refuses the documentation ranges).
type localDial struct {
	mu     sync.Mutex
	to     map[string]string
	dialed []string
}

func (d *localDial) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.dialed = append(d.dialed, addr)
	target, ok := d.to[addr]
	d.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("test: %s is not a local test address", addr)
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, target)
}

func findDest(s Stats, proto, host string, port uint16, allowed bool) (Destination, bool) {
	for _, d := range s.Destinations {
		if d.Protocol == proto && d.Host == host && d.Port == int(port) && d.Allowed == allowed {
			return d, true
		}
	}
	return Destination{}, false
}

// waitGoroutines waits for the goroutine count to come back near base.
func waitGoroutines(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := runtime.NumGoroutine()
		if n <= base+2 {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines after Close, %d before:\n%s", n, base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func portOf(t testing.TB, addr string) uint16 {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return ap.Port()
}

// TestEndToEnd drives a real namespace through the egress: HTTP to the
// host's loopback through host.sandbox.internal, names allowed and not,
// ports allowed and not, a name resolving to loopback, UDP, DNS over TCP,
// then Close.
func TestEndToEnd(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "hello from the host "+r.Host)
	}))
	defer srv.Close()
	other, err := net.Listen("tcp", "127.0.0.1:0") // listening, but not listed
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	srvAddr := srv.Listener.Addr().String()
	port, otherPort := portOf(t, srvAddr), portOf(t, other.Addr().String())

	n := newSandboxNet(t, DefaultMTU)
	base := runtime.NumGoroutine()
	policy := mustPolicy(t, fmt.Sprintf("host.sandbox.internal:%d", port), "public.test:80", "*.wild.test:80",
		"allowed.test", "private.test", "172.32.0.64/26:80")
	dialer := &localDial{to: map[string]string{
		fmt.Sprintf("127.0.0.1:%d", port): srvAddr,
		"172.32.0.1:80":                   srvAddr,
		"172.32.0.2:80":                   srvAddr,
		"172.32.0.65:80":                  srvAddr,
	}}
	e, err := Start(context.Background(), n.tun, Config{
		Policy: policy,
		Resolver: fakeResolver(map[string]string{
			"public.test":   "172.32.0.1",
			"a.b.wild.test": "172.32.0.2",
			"allowed.test":  "127.0.0.1",
			"private.test":  "10.1.2.3",
			"denied.test":   "172.32.0.3",
		}),
		Dial:      dialer.dial,
		HostAddrs: []netip.Addr{},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()

	if r := py(t, n, "get", fmt.Sprintf("http://%s:%d/hello", HostInternalName, port)); !r.OK || r.Body != fmt.Sprintf("hello from the host %s:%d", HostInternalName, port) {
		t.Errorf("host.sandbox.internal: %+v", r)
	}
	failsFast(t, py(t, n, "connect", HostInternalName, fmt.Sprint(otherPort)), "an unlisted port of host.sandbox.internal")
	failsFast(t, py(t, n, "connect", HostInternalAddr, fmt.Sprint(otherPort)), "an unlisted port of "+HostInternalAddr)
	failsFast(t, py(t, n, "connect", GatewayAddr, "22"), "the gateway's port 22")
	if r := py(t, n, "resolve", "denied.test"); r.OK || !strings.Contains(r.Error, "gaierror") {
		t.Errorf("a name not allowed resolved: %+v", r)
	}
	if r := py(t, n, "resolve", "allowed.test"); r.OK {
		t.Errorf("a name resolving to loopback resolved: %+v", r)
	}
	if r := py(t, n, "resolve", "private.test"); r.OK {
		t.Errorf("a name resolving to a private address resolved: %+v", r)
	}
	if r := py(t, n, "resolve", "public.test"); !r.OK || strings.Join(r.Addrs, ",") != "172.32.0.1" {
		t.Errorf("public.test: %+v", r)
	}
	if r := py(t, n, "get", "http://public.test/x"); !r.OK || r.Body != "hello from the host public.test" {
		t.Errorf("public.test: %+v", r)
	}
	if r := py(t, n, "get", "http://a.b.wild.test/x"); !r.OK || r.Body != "hello from the host a.b.wild.test" {
		t.Errorf("a.b.wild.test: %+v", r)
	}
	if r := py(t, n, "get", "http://172.32.0.65/x"); !r.OK || r.Body != "hello from the host 172.32.0.65" {
		t.Errorf("172.32.0.65 (CIDR entry): %+v", r)
	}
	failsFast(t, py(t, n, "connect", "public.test", "81"), "public.test:81")
	failsFast(t, py(t, n, "connect", "172.32.0.9", "80"), "an address not resolved through the sandbox's DNS")
	failsFast(t, py(t, n, "connect", "172.32.0.65", "81"), "a CIDR entry's address on another port")
	hitsBefore := hits.Load()
	failsFast(t, py(t, n, "connect", "127.0.0.1", fmt.Sprint(port)), "127.0.0.1 inside the namespace")
	if r := py(t, n, "udp", "172.32.0.1", "123"); r.OK {
		t.Errorf("UDP went through: %+v", r)
	}
	// DNS to a server of its own choosing gets the same answers.
	if r := py(t, n, "dnsq", "172.32.0.53", "public.test"); !r.OK || r.Body != "rcode=0" || strings.Join(r.Addrs, ",") != "172.32.0.1" {
		t.Errorf("DNS to 172.32.0.53: %+v", r)
	}
	if r := py(t, n, "dnsq", "172.32.0.53", "denied.test"); !r.OK || r.Body != "rcode=3" || len(r.Addrs) != 0 {
		t.Errorf("DNS to 172.32.0.53: %+v", r)
	}
	if hits.Load() != hitsBefore {
		t.Error("the host's server saw a request from the namespace's own loopback")
	}
	// DNS over TCP, from a Go client in the namespace.
	if addrs := dnsTCP(t, n, GatewayAddr, "public.test"); strings.Join(addrs, ",") != "172.32.0.1" {
		t.Errorf("DNS over TCP: %q", addrs)
	}

	s := e.Stats()
	js, _ := json.MarshalIndent(s, "", "  ")
	t.Logf("stats: %s", js)
	for _, want := range []struct {
		proto, host string
		port        uint16
		allowed     bool
		reason      string
		bytes       bool
	}{
		{"tcp", HostInternalName, port, true, "", true},
		{"tcp", HostInternalName, otherPort, false, "not listed", false},
		{"tcp", GatewayAddr, 22, false, "gateway", false},
		{"dns", "denied.test", 0, false, "allow-list", false},
		{"dns", "allowed.test", 0, false, "127.0.0.1 is a loopback address", false},
		{"dns", "private.test", 0, false, "10.1.2.3 is a private address", false},
		{"dns", "public.test", 0, true, "", false},
		{"dns", HostInternalName, 0, true, "", false},
		{"tcp", "public.test", 80, true, "", true},
		{"tcp", "a.b.wild.test", 80, true, "", true},
		{"tcp", "172.32.0.65", 80, true, "", true},
		{"tcp", "public.test", 81, false, "port 81 is not allowed for public.test", false},
		{"tcp", "172.32.0.9", 80, false, "not in the allow-list", false},
		{"tcp", "172.32.0.65", 81, false, "not in the allow-list", false},
		{"udp", "172.32.0.1", 123, false, "udp", false},
	} {
		d, ok := findDest(s, want.proto, want.host, want.port, want.allowed)
		switch {
		case !ok:
			t.Errorf("no destination %s %s:%d", want.proto, want.host, want.port)
		case d.Allowed != want.allowed || !strings.Contains(d.Reason, want.reason) || d.Connections == 0:
			t.Errorf("destination %s %s:%d: %+v", want.proto, want.host, want.port, d)
		case want.bytes && (d.BytesOut == 0 || d.BytesIn == 0):
			t.Errorf("destination %s %s:%d counted no bytes: %+v", want.proto, want.host, want.port, d)
		}
	}
	if s.Allowed == 0 || s.Denied == 0 || s.BytesOut == 0 || s.BytesIn == 0 {
		t.Errorf("totals: %+v", s)
	}
	if _, ok := findDest(s, "tcp", "127.0.0.1", port, false); ok {
		t.Error("the namespace's own loopback reached the egress")
	}
	dialer.mu.Lock()
	for _, a := range dialer.dialed {
		if _, ok := dialer.to[a]; !ok {
			t.Errorf("the egress dialed %s", a)
		}
	}
	dialer.mu.Unlock()

	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e.Close()
	srv.CloseClientConnections()
	waitGoroutines(t, base)
	if s2 := e.Stats(); len(s2.Destinations) != len(s.Destinations) {
		t.Errorf("Stats after Close lost destinations: %d, had %d", len(s2.Destinations), len(s.Destinations))
	}
}

// dnsTCP looks name up (A) over TCP to server:53 from inside n.
func dnsTCP(t *testing.T, n *sandboxNet, server, name string) []string {
	t.Helper()
	c, err := n.dial(net.JoinHostPort(server, "53"), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 7, RecursionDesired: true})
	b.StartQuestions()
	b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name + "."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	q, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(append([]byte{byte(len(q) >> 8), byte(len(q))}, q...)); err != nil {
		t.Fatal(err)
	}
	var l [2]byte
	if _, err := io.ReadFull(c, l[:]); err != nil {
		t.Fatal(err)
	}
	resp := make([]byte, int(l[0])<<8|int(l[1]))
	if _, err := io.ReadFull(c, resp); err != nil {
		t.Fatal(err)
	}
	var m dnsmessage.Message
	if err := m.Unpack(resp); err != nil {
		t.Fatal(err)
	}
	if m.ID != 7 || !m.Response {
		t.Errorf("DNS over TCP: header %+v", m.Header)
	}
	var addrs []string
	for _, a := range m.Answers {
		if r, ok := a.Body.(*dnsmessage.AResource); ok {
			addrs = append(addrs, netip.AddrFrom4(r.A).String())
		}
	}
	return addrs
}

// blaster serves size bytes to every connection, or reads everything and
// answers "ok".
func blaster(t testing.TB, send int64) net.Listener {
	return serveTCP(t, func(c net.Conn) {
		if send > 0 {
			io.CopyN(c, zeros{}, send)
			return
		}
		io.Copy(io.Discard, c)
		io.WriteString(c, "ok")
	})
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestByteLimits: past MaxBytesIn or MaxBytesOut the connection is closed,
// the total stops at the limit and new connections are refused.
func TestByteLimits(t *testing.T) {
	n := newSandboxNet(t, DefaultMTU)
	const limit = 1 << 20
	for _, dir := range []string{"bytes_in", "bytes_out"} {
		t.Run(dir, func(t *testing.T) {
			send := int64(0)
			cfg := Config{HostAddrs: []netip.Addr{}}
			if dir == "bytes_in" {
				send, cfg.MaxBytesIn = 16<<20, limit
			} else {
				cfg.MaxBytesOut = limit
			}
			ln := blaster(t, send)
			port := portOf(t, ln.Addr().String())
			cfg.Policy = mustPolicy(t, fmt.Sprintf("%s:%d", HostInternalName, port))
			e, err := Start(context.Background(), n.tun, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			var r result
			if dir == "bytes_in" {
				r = py(t, n, "read", HostInternalAddr, fmt.Sprint(port))
				if r.OK || r.N > limit {
					t.Errorf("reading 16 MiB past a 1 MiB limit: %+v (want a reset, at most %d bytes)", r, limit)
				}
			} else {
				r = py(t, n, "write", HostInternalAddr, fmt.Sprint(port), fmt.Sprint(16<<20))
				if r.OK {
					t.Errorf("writing 16 MiB past a 1 MiB limit succeeded: %+v", r)
				}
			}
			s := e.Stats()
			got := s.BytesIn
			if dir == "bytes_out" {
				got = s.BytesOut
			}
			if s.Limit != dir || got != limit {
				t.Errorf("stats: limit %q, %s %d (want %d): %+v", s.Limit, dir, got, limit, s)
			}
			failsFast(t, py(t, n, "connect", HostInternalAddr, fmt.Sprint(port)), "a connection after the limit")
		})
	}
}

// TestMaxConns: past MaxConns open connections, a new one is reset; one
// closing makes room again.
func TestMaxConns(t *testing.T) {
	ln := serveTCP(t, func(c net.Conn) { io.Copy(c, c) })
	port := portOf(t, ln.Addr().String())
	n := newSandboxNet(t, DefaultMTU)
	base := runtime.NumGoroutine()
	e, err := Start(context.Background(), n.tun, Config{
		Policy:    mustPolicy(t, fmt.Sprintf("%s:%d", HostInternalName, port)),
		MaxConns:  2,
		HostAddrs: []netip.Addr{},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	addr := fmt.Sprintf("%s:%d", HostInternalAddr, port)
	var conns []net.Conn
	for i := 0; i < 2; i++ {
		c, err := n.dial(addr, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		echo(t, c)
	}
	start := time.Now()
	if c, err := n.dial(addr, 30*time.Second); err == nil {
		c.Close()
		t.Error("a third connection was accepted with MaxConns 2")
	} else if time.Since(start) > 5*time.Second {
		t.Errorf("the third connection took %v to fail", time.Since(start))
	}
	conns[0].Close()
	var c net.Conn
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err = n.dial(addr, 30*time.Second)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("no room after a connection closed: %v", err)
	}
	echo(t, c)
	if s := e.Stats(); s.Limit != "connections" || s.Denied == 0 {
		t.Errorf("stats: %+v", s)
	}
	// Close ends the open connections.
	e.Close()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("a connection survived Close")
	}
	c.Close()
	conns[1].Close()
	waitGoroutines(t, base)
}

func echo(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo: %q %v", buf, err)
	}
	c.SetDeadline(time.Time{})
}

// TestContextEndsEgress: when Start's context ends, the egress closes.
func TestContextEndsEgress(t *testing.T) {
	n := newSandboxNet(t, DefaultMTU)
	base := runtime.NumGoroutine()
	ctx, cancel := context.WithCancel(context.Background())
	e, err := Start(ctx, n.tun, Config{Policy: mustPolicy(t, "host.sandbox.internal:1")})
	if err != nil {
		t.Fatal(err)
	}
	if e.checker.host != netpolicy.Interfaces() || !e.checker.host.Contains(netip.MustParseAddr("127.0.0.1")) {
		t.Errorf("HostAddrs nil did not take the host's addresses: %v", e.checker.host)
	}
	cancel()
	waitGoroutines(t, base)
	e.Close()
	if _, err := Start(context.Background(), nil, Config{}); err == nil {
		t.Error("Start without a TUN device succeeded")
	}
	if _, err := Start(context.Background(), n.tun, Config{MTU: 100}); err == nil {
		t.Error("Start with MTU 100 succeeded")
	}
}

// TestCloseDuringDial: Close cancels a host dial in progress and returns
// promptly; the waiting program sees its connection fail.
func TestCloseDuringDial(t *testing.T) {
	n := newSandboxNet(t, DefaultMTU)
	base := runtime.NumGoroutine()
	dialing := make(chan struct{}, 1)
	e, err := Start(context.Background(), n.tun, Config{
		Policy:    mustPolicy(t, "host.sandbox.internal:9"),
		HostAddrs: []netip.Addr{},
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dialing <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		c, err := n.dial(HostInternalAddr+":9", 60*time.Second)
		if err == nil {
			c.Close()
		}
		errc <- err
	}()
	select {
	case <-dialing:
	case <-time.After(30 * time.Second):
		t.Fatal("the egress never dialed")
	}
	start := time.Now()
	e.Close()
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Close took %v during a dial", d)
	}
	if err := <-errc; err == nil {
		t.Error("the connection succeeded")
	}
	waitGoroutines(t, base)
	if s := e.Stats(); len(s.Destinations) != 1 || !strings.Contains(s.Destinations[0].Error, "context canceled") {
		t.Errorf("stats: %+v", s)
	}
}

func fakeNotFound(host string) error {
	return &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}
