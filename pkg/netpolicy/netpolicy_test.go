package netpolicy

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// testHost is the host's own (injected) address in the tests: a public
// one, so that only its being the host's refuses it.
var testHost = netip.MustParseAddr("172.32.9.50")

// TestReason judges every class: refused with the reason's words, or
// allowed ("").
func TestReason(t *testing.T) {
	host := NewAddrSet(testHost, netip.MustParseAddr("2600:1f18::50"), netip.MustParseAddr("10.0.0.5"))
	for _, tc := range []struct{ addr, want string }{
		// Loopback, unspecified, "this network".
		{"127.0.0.1", "a loopback address"},
		{"127.9.9.9", "a loopback address"},
		{"::1", "a loopback address"},
		{"0.0.0.0", "the unspecified address"},
		{"::", "the unspecified address"},
		{"0.1.2.3", `a "this network" address`},
		// Private.
		{"10.1.2.3", "a private address"},
		{"172.16.0.1", "a private address"},
		{"172.31.255.255", "a private address"},
		{"192.168.1.1", "a private address"},
		{"fc00::1", "a private (unique local) address"},
		{"fd12:3456::1", "a private (unique local) address"},
		// Link-local, site-local.
		{"169.254.1.1", "a link-local address"},
		{"fe80::1", "a link-local address"},
		{"fe80::1%eth0", "a link-local address"},
		{"febf::1", "a link-local address"},
		{"fec0::1", "a site-local address"},
		// CGNAT and the other special IPv4 ranges.
		{"100.64.0.1", "a shared (CGNAT) address"},
		{"100.127.255.254", "a shared (CGNAT) address"},
		{"192.0.0.8", "an IETF protocol assignment address"},
		{"198.18.0.1", "a benchmarking address"},
		{"198.19.255.255", "a benchmarking address"},
		{"240.0.0.1", "a reserved address"},
		{"255.255.255.254", "a reserved address"},
		{"255.255.255.255", "the broadcast address"},
		{"192.88.99.1", "a 6to4 relay anycast address"},
		// Multicast.
		{"224.0.0.1", "a multicast address"},
		{"239.255.255.250", "a multicast address"},
		{"ff02::1", "a multicast address"},
		// Documentation.
		{"192.0.2.1", "a documentation address"},
		{"198.51.100.7", "a documentation address"},
		{"203.0.113.9", "a documentation address"},
		{"2001:db8::1", "a documentation address"},
		{"3fff::1", "a documentation address"},
		// Other IPv6.
		{"100::1", "a discard-only address"},
		{"5f00::1", "a segment routing (SRv6) address"},
		{"2001:2::1", "a benchmarking address"},
		{"2001:2:0:ffff::1", "a benchmarking address"},
		{"2001:10::1", "an ORCHID address"},
		{"2001:2f:ffff::1", "an ORCHIDv2"},
		{"1::1", "a reserved IPv6 address"},
		{"4000::1", "a reserved IPv6 address"},
		// Cloud metadata.
		{"169.254.169.254", "a link-local address (a cloud metadata service)"},
		{"169.254.170.2", "a link-local address (a cloud metadata service)"},
		{"100.100.100.200", "a shared (CGNAT) address (a cloud metadata service)"},
		{"168.63.129.16", "a cloud metadata service address"},
		{"192.0.0.192", "an IETF protocol assignment address (a cloud metadata service)"},
		{"fd00:ec2::254", "a private (unique local) address (a cloud metadata service)"},
		{"fd20:ce::254", "a private (unique local) address (a cloud metadata service)"},
		// The host's own addresses.
		{"172.32.9.50", "one of this host's own addresses"},
		{"2600:1f18::50", "one of this host's own addresses"},
		{"10.0.0.5", "a private address (one of this host's own addresses)"},
		// IPv4-mapped: the IPv4 address.
		{"::ffff:127.0.0.1", "a loopback address"},
		{"::ffff:10.0.0.1", "a private address"},
		{"::ffff:169.254.169.254", "a link-local address (a cloud metadata service)"},
		{"::ffff:172.32.9.50", "one of this host's own addresses"},
		// IPv4-compatible and IPv4-translated: refused whole.
		{"::127.0.0.1", "an IPv4-compatible address (::/96, deprecated) embedding 127.0.0.1, a loopback address"},
		{"::7f00:1", "embedding 127.0.0.1, a loopback address"},
		{"::10.0.0.1", "embedding 10.0.0.1, a private address"},
		{"::8.8.8.8", "an IPv4-compatible address (::/96, deprecated)"},
		{"::ffff:0:7f00:1", "an IPv4-translated address (::ffff:0:0:0/96) embedding 127.0.0.1, a loopback address"},
		{"::ffff:0:a9fe:a9fe", "embedding 169.254.169.254, a link-local address (a cloud metadata service)"},
		{"::ffff:0:808:808", "an IPv4-translated address (::ffff:0:0:0/96)"},
		// NAT64: the embedded address.
		{"64:ff9b::7f00:1", "a NAT64 address (64:ff9b::/96) embedding 127.0.0.1, a loopback address"},
		{"64:ff9b::a00:1", "embedding 10.0.0.1, a private address"},
		{"64:ff9b::a9fe:a9fe", "embedding 169.254.169.254, a link-local address (a cloud metadata service)"},
		{"64:ff9b::ac20:932", "embedding 172.32.9.50, one of this host's own addresses"},
		{"64:ff9b::c000:201", "embedding 192.0.2.1, a documentation address"},
		{"64:ff9b:1::808:808", "a local-use NAT64 address (64:ff9b:1::/48)"},
		// 6to4: the address in bits 16-47.
		{"2002:7f00:1::1", "a 6to4 address (2002::/16) embedding 127.0.0.1, a loopback address"},
		{"2002:c0a8:101::1", "embedding 192.168.1.1, a private address"},
		{"2002:ac20:932::1", "embedding 172.32.9.50, one of this host's own addresses"},
		// Teredo: the server, then the client (inverted).
		{"2001:0:a00:1::1", "a Teredo address (2001::/32) whose server 10.0.0.1 is a private address"},
		{"2001:0:4136:e378:8000:63bf:80ff:fffe", "whose client 127.0.0.1 is a loopback address"},
		{"2001:0:4136:e378:8000:63bf:53df:f6cd", "whose client 172.32.9.50 is one of this host's own addresses"},

		// Ordinary public addresses pass, next to the refused ranges.
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"172.32.0.1", ""},
		{"172.15.255.255", ""},
		{"100.128.0.1", ""},
		{"100.63.255.255", ""},
		{"169.255.0.1", ""},
		{"198.17.255.255", ""},
		{"198.20.0.1", ""},
		{"223.255.255.255", ""},
		{"2606:4700:4700::1111", ""},
		{"::ffff:8.8.8.8", ""},
		{"64:ff9b::808:808", ""},
		{"2002:808:808::1", ""},
		{"2001:0:4136:e378:8000:63bf:f7f7:f7f7", ""},
		{"2001:db9::1", ""},
		{"2001:2:1::1", ""},   // past benchmarking's /48
		{"2001:30::1", ""},    // past ORCHIDv2
		{"2001:4:112::1", ""}, // AS112, public
	} {
		got := Reason(netip.MustParseAddr(tc.addr), host)
		if (got == "") != (tc.want == "") || !strings.Contains(got, tc.want) {
			t.Errorf("Reason(%s) = %q, want %q", tc.addr, got, tc.want)
		}
	}
	// Without the host's addresses, only the ranges count.
	if got := Reason(testHost, nil); got != "" {
		t.Errorf("Reason(%s, nil) = %q", testHost, got)
	}
	if got := Reason(netip.Addr{}, nil); got == "" {
		t.Error("the zero Addr is allowed")
	}
}

// TestChecker: Allow lifts any refusal, the host's own addresses
// included; Control checks what a dialer connects to.
func TestChecker(t *testing.T) {
	c := &Checker{
		Allow: []netip.Prefix{netip.MustParsePrefix("10.9.0.0/16"), netip.MustParsePrefix("fd12::1/128"),
			netip.MustParsePrefix("172.32.9.50/32"), netip.MustParsePrefix("::ffff:192.168.7.0/120")},
		Host: NewAddrSet(testHost, netip.MustParseAddr("172.32.9.51")),
		Hint: "unless the test allows it",
	}
	for addr, ok := range map[string]bool{
		"8.8.8.8": true, "10.9.3.4": true, "::ffff:10.9.3.4": true, "fd12::1": true, "172.32.9.50": true,
		"192.168.7.9": true, "::ffff:192.168.7.9": true,
		"10.8.0.1": false, "fd12::2": false, "172.32.9.51": false, "127.0.0.1": false, "192.168.8.1": false,
		"169.254.169.254": false, "64:ff9b::a09:304": false, // NAT64 of an allowed address: Allow names the IPv4 form only
	} {
		err := c.Check(netip.MustParseAddr(addr))
		if (err == nil) != ok {
			t.Errorf("Check(%s) = %v, want allowed=%v", addr, err, ok)
		}
		var refused *RefusedError
		if err != nil && (!errors.As(err, &refused) || !strings.HasSuffix(err.Error(), "; unless the test allows it")) {
			t.Errorf("Check(%s) = %v, not a RefusedError with the hint", addr, err)
		}
	}
	err := c.Check(netip.MustParseAddr("::ffff:172.32.9.51"))
	if err == nil || err.Error() != "172.32.9.51 is one of this host's own addresses; unless the test allows it" {
		t.Errorf("the host's own address: %v", err)
	}

	// A dialer with Control refuses 127.0.0.1 even though a listener is
	// there, and connects once Allow names it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d := net.Dialer{Control: c.Control, Timeout: 5 * time.Second}
	var refused *RefusedError
	if conn, err := d.Dial("tcp", ln.Addr().String()); err == nil {
		conn.Close()
		t.Fatal("the checked dialer reached 127.0.0.1")
	} else if !errors.As(err, &refused) || refused.Reason != "a loopback address" {
		t.Errorf("dialing 127.0.0.1: %v", err)
	}
	allowed := &Checker{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	d.Control = allowed.Control
	conn, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("127.0.0.0/8 allowed: %v", err)
	}
	conn.Close()
	if err := c.Control("tcp", "not an address", nil); err == nil {
		t.Error("Control accepted a bad address")
	}
}

// TestInterfaces: the machine's addresses are refused without a Host, and
// are read again once InterfacesMaxAge has passed (a failed read keeps
// the last ones).
func TestInterfaces(t *testing.T) {
	if !Interfaces().Contains(netip.MustParseAddr("127.0.0.1")) {
		t.Error("Interfaces lacks 127.0.0.1")
	}
	if err := Interfaces().Refresh(); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	reads := 0
	var list []net.Addr
	var listErr error
	s := &InterfaceAddrs{
		now: func() time.Time { return now },
		list: func() ([]net.Addr, error) {
			reads++
			return list, listErr
		},
	}
	list = []net.Addr{&net.IPNet{IP: net.ParseIP("172.32.9.50").To16(), Mask: net.CIDRMask(120, 128)}, &net.IPAddr{IP: net.ParseIP("2600::5")}}
	c := &Checker{Host: s}
	if c.Check(testHost) == nil || c.Check(netip.MustParseAddr("2600::5")) == nil || c.Check(netip.MustParseAddr("172.32.9.51")) != nil {
		t.Error("the host's addresses were not refused")
	}
	list = []net.Addr{&net.IPNet{IP: net.ParseIP("172.32.9.51"), Mask: net.CIDRMask(24, 32)}}
	now = now.Add(InterfacesMaxAge / 2)
	if !s.Contains(testHost) || reads != 1 {
		t.Errorf("read again before InterfacesMaxAge: %d reads", reads)
	}
	now = now.Add(InterfacesMaxAge)
	if s.Contains(testHost) || !s.Contains(netip.MustParseAddr("172.32.9.51")) || reads != 2 {
		t.Errorf("not read again after InterfacesMaxAge: %d reads", reads)
	}
	listErr = errors.New("netlink on fire")
	now = now.Add(2 * InterfacesMaxAge)
	if !s.Contains(netip.MustParseAddr("172.32.9.51")) || reads != 3 {
		t.Errorf("a failed read lost the last addresses: %d reads", reads)
	}
	if err := s.Refresh(); err == nil || !strings.Contains(err.Error(), "on fire") {
		t.Errorf("Refresh: %v", err)
	}
}
