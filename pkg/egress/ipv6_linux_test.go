package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The tests' outside IPv6 addresses are in 3ffe::/16, the retired 6bone's:
// public to netpolicy, routed nowhere (and never dialed: localDial).

// TestIPv6: the sandbox's IPv6 goes through the egress as its IPv4 does.
// A connection to an address reaches the host's [::1] listener through an
// IP entry in IPv6 form and is reset at once without it; a name allowed
// resolves to its IPv6 address (AAAA), which then counts as the name;
// an unlisted address, the gateway's other ports and UDP are refused; DNS
// is served on the IPv6 gateway, over UDP and TCP, and to any other IPv6
// server; the result lists the IPv6 destinations.
func TestIPv6(t *testing.T) {
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback on the host: %v", err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from the host "+r.Host)
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	defer srv.Close()
	srvAddr := ln.Addr().String()

	n := newSandboxNet(t, DefaultMTU)
	entries := []string{"3ffe::10", "six.test:80", "dual.test:80", "loop6.test", "::1"}
	dialer := &localDial{to: map[string]string{
		"[3ffe::10]:80": srvAddr,
		"[3ffe::20]:80": srvAddr,
	}}
	e, err := Start(context.Background(), n.tun, Config{
		Policy: mustPolicy(t, entries...),
		Resolver: fakeResolver(map[string]string{
			"six.test":   "3ffe::20",
			"dual.test":  "172.32.0.5,3ffe::5",
			"loop6.test": "::1",
		}),
		Dial:      dialer.dial,
		HostAddrs: []netip.Addr{},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	without := func(entry string) Policy {
		return mustPolicy(t, slices.DeleteFunc(slices.Clone(entries), func(s string) bool { return s == entry })...)
	}
	refused := func(r result, what string) {
		t.Helper()
		failsFast(t, r, what)
		if !strings.Contains(r.Error, "ConnectionRefused") {
			t.Errorf("%s: %s, want a reset (connection refused)", what, r.Error)
		}
	}

	// By address: the entry 3ffe::10 allows it, and only it.
	if r := py(t, n, "get", "http://[3ffe::10]/x"); !r.OK || r.Body != "hello from the host [3ffe::10]" {
		t.Errorf("[3ffe::10]: %+v", r)
	}
	e.SetPolicy(without("3ffe::10"))
	refused(py(t, n, "connect", "3ffe::10", "80"), "[3ffe::10]:80 without its entry")
	e.SetPolicy(mustPolicy(t, entries...))

	// By name: an AAAA answer, its address then the name's.
	if r := py(t, n, "resolve", "six.test"); !r.OK || strings.Join(r.Addrs, ",") != "3ffe::20" {
		t.Errorf("resolving six.test: %+v", r)
	}
	if r := py(t, n, "get", "http://six.test/x"); !r.OK || r.Body != "hello from the host six.test" {
		t.Errorf("six.test: %+v", r)
	}
	refused(py(t, n, "connect", "six.test", "81"), "six.test:81")
	if r := py(t, n, "resolve", "dual.test"); !r.OK || strings.Join(r.Addrs, ",") != "172.32.0.5,3ffe::5" {
		t.Errorf("resolving dual.test: %+v", r)
	}
	// A name resolving to ::1 resolves only because the entry ::1 names
	// the address.
	if r := py(t, n, "resolve", "loop6.test"); !r.OK || strings.Join(r.Addrs, ",") != "::1" {
		t.Errorf("resolving loop6.test: %+v", r)
	}
	e.SetPolicy(without("::1"))
	if r := py(t, n, "resolve", "loop6.test"); r.OK || !strings.Contains(r.Error, "gaierror") {
		t.Errorf("loop6.test resolved without the entry ::1: %+v", r)
	}
	e.SetPolicy(mustPolicy(t, entries...))

	// What no entry allows.
	refused(py(t, n, "connect", "3ffe::99", "80"), "[3ffe::99]:80, unlisted")
	refused(py(t, n, "connect", GatewayAddr6, "22"), "the IPv6 gateway's port 22")
	refused(py(t, n, "connect", "fd5b:77::9", "80"), "an address of the sandbox's own prefix")
	if r := py(t, n, "udp", "3ffe::10", "123"); r.OK || !strings.Contains(r.Error, "ConnectionRefused") {
		t.Errorf("UDP over IPv6: %+v, want refused", r)
	}

	// DNS on the IPv6 gateway, and to another server, over IPv6.
	for _, tc := range []struct{ server, name, qtype, want string }{
		{GatewayAddr6, "dual.test", "1", "172.32.0.5"},
		{GatewayAddr6, "dual.test", "28", "3ffe::5"},
		{"3ffe::53", "six.test", "28", "3ffe::20"},
		{GatewayAddr6, "six.test", "1", ""},
	} {
		if r := py(t, n, "dnsq", tc.server, tc.name, tc.qtype); !r.OK || r.Body != "rcode=0" || strings.Join(r.Addrs, ",") != tc.want {
			t.Errorf("DNS to %s for %s type %s: %+v, want %q", tc.server, tc.name, tc.qtype, r, tc.want)
		}
	}
	if r := py(t, n, "dnsq", GatewayAddr6, "other.test", "28"); !r.OK || r.Body != "rcode=3" {
		t.Errorf("DNS for a name not listed: %+v", r)
	}
	if addrs := dnsTCP(t, n, GatewayAddr6, "dual.test"); strings.Join(addrs, ",") != "172.32.0.5" {
		t.Errorf("DNS over TCP to the IPv6 gateway: %q", addrs)
	}

	s := e.Stats()
	for _, want := range []struct {
		proto, host, ip string
		port            uint16
		allowed         bool
		reason          string
	}{
		{"tcp", "3ffe::10", "3ffe::10", 80, true, ""},
		{"tcp", "3ffe::10", "3ffe::10", 80, false, "not in the allow-list"},
		{"tcp", "six.test", "3ffe::20", 80, true, ""},
		{"tcp", "six.test", "3ffe::20", 81, false, "port 81 is not allowed for six.test"},
		{"tcp", "3ffe::99", "3ffe::99", 80, false, "not in the allow-list"},
		{"tcp", GatewayAddr6, GatewayAddr6, 22, false, "gateway"},
		{"tcp", "fd5b:77::9", "fd5b:77::9", 80, false, "not in the allow-list"},
		{"udp", "3ffe::10", "3ffe::10", 123, false, "udp"},
		{"dns", "six.test", "", 0, true, ""},
		{"dns", "loop6.test", "", 0, false, "::1 is a loopback address"},
	} {
		d, ok := findDest(s, want.proto, want.host, want.port, want.allowed)
		switch {
		case !ok:
			t.Errorf("no destination %s %s port %d allowed %v", want.proto, want.host, want.port, want.allowed)
		case d.IP != want.ip || !strings.Contains(d.Reason, want.reason) || d.Connections == 0:
			t.Errorf("destination %s %s port %d: %+v", want.proto, want.host, want.port, d)
		case want.proto == "tcp" && want.allowed && (d.BytesOut == 0 || d.BytesIn == 0):
			t.Errorf("destination %s %s port %d counted no bytes: %+v", want.proto, want.host, want.port, d)
		}
	}
	dialer.mu.Lock()
	defer dialer.mu.Unlock()
	for _, a := range dialer.dialed {
		if _, ok := dialer.to[a]; !ok {
			t.Errorf("the egress dialed %s", a)
		}
	}
	if len(dialer.dialed) != 2 {
		t.Errorf("the egress dialed %q, want [3ffe::10]:80 and [3ffe::20]:80 once each", dialer.dialed)
	}
}

// TestIPv6CheckedDialer: the host's dialer refuses the host's [::1] even
// when something listens there, and reaches it once an entry names ::1.
func TestIPv6CheckedDialer(t *testing.T) {
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback on the host: %v", err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	for _, tc := range []struct {
		entries []string
		ok      bool
	}{
		{[]string{"localhost", "127.0.0.1"}, false},
		{[]string{"::1"}, true},
		{[]string{fmt.Sprintf("[::1]:%d", portOf(t, ln.Addr().String()))}, true},
		{[]string{"[::1]:1"}, false},
		{[]string{"::/0"}, true},
	} {
		p := mustPolicy(t, tc.entries...)
		c := checker{policy: func() *Policy { return &p }}
		d := net.Dialer{Control: c.control}
		conn, err := d.Dial("tcp", ln.Addr().String())
		if err == nil {
			conn.Close()
		}
		if (err == nil) != tc.ok || !tc.ok && !strings.Contains(err.Error(), "::1 is a loopback address") {
			t.Errorf("with %q: dialing %s: %v", tc.entries, ln.Addr(), err)
		}
	}
}

// TestIPv6NoRoute: an IPv6 address the host has no route to is left out
// of AAAA answers (a host without IPv6 leaves its sandboxes' clients to
// IPv4); the A answer and the name's routed addresses are as before.
func TestIPv6NoRoute(t *testing.T) {
	n := newSandboxNet(t, DefaultMTU)
	unrouted := netip.MustParseAddr("3ffe::5")
	e, err := Start(context.Background(), n.tun, Config{
		Policy:    mustPolicy(t, "dual.test:80", "six.test:80"),
		Resolver:  fakeResolver(map[string]string{"dual.test": "172.32.0.5,3ffe::5", "six.test": "3ffe::20,3ffe::5"}),
		Dial:      (&localDial{}).dial,
		HostAddrs: []netip.Addr{},
		routes:    func(a netip.Addr) bool { return a != unrouted },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, tc := range []struct{ name, qtype, want string }{
		{"dual.test", "28", ""},
		{"dual.test", "1", "172.32.0.5"},
		{"six.test", "28", "3ffe::20"},
	} {
		if r := py(t, n, "dnsq", GatewayAddr, tc.name, tc.qtype); !r.OK || r.Body != "rcode=0" || strings.Join(r.Addrs, ",") != tc.want {
			t.Errorf("DNS for %s type %s: %+v, want %q", tc.name, tc.qtype, r, tc.want)
		}
	}
}

// TestHostRoutes: the host's routing table answers whether an IPv6
// address can be reached; in a network namespace with no routes, none.
func TestHostRoutes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace")
	}
	if ln, err := net.Listen("tcp6", "[::1]:0"); err == nil {
		ln.Close()
		if !hostRoutes(netip.MustParseAddr("::1")) {
			t.Error("no route to ::1 on a host that listens there")
		}
	}
	got := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with this goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			got <- err
			return
		}
		if hostRoutes(netip.MustParseAddr("3ffe::1")) {
			got <- errors.New("a route to 3ffe::1 in a namespace with no routes")
			return
		}
		got <- nil
	}()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}
