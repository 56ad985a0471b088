package egress

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/pkg/netpolicy"
)

func mustPolicy(t testing.TB, entries ...string) Policy {
	t.Helper()
	p, err := ParsePolicy(entries)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestChecker: what netpolicy refuses (its tests judge every class) is
// refused, the host's own addresses included, unless an explicit IP or
// CIDR entry re-allows the address on its port; a name resolving to it
// does not.
func TestChecker(t *testing.T) {
	host := netip.MustParseAddr("172.32.9.50")
	p := mustPolicy(t, "10.0.0.0/8:5432", "127.0.0.1:9", "fd00::/8", "db.internal.example", "172.32.9.50:8443")
	c := checker{policy: func() *Policy { return &p }, host: netpolicy.NewAddrSet(host)}
	for _, tc := range []struct {
		ap   string
		want string // "": allowed
	}{
		{"10.1.2.3:5432", ""},
		{"10.1.2.3:5433", "10.1.2.3 is a private address"},
		{"[::ffff:10.1.2.3]:5432", ""},
		{"127.0.0.1:9", ""},
		{"127.0.0.1:10", "127.0.0.1 is a loopback address"},
		{"[fd00::1]:80", ""},
		{"[fc00::1]:80", "private"},
		{"192.168.1.1:80", "private"},
		{"169.254.169.254:80", "metadata"},
		{"[64:ff9b::a9fe:a9fe]:80", "metadata"},
		{"[2002:a01:203::1]:5432", "10.1.2.3"}, // 6to4: the entry names the IPv4 form only
		{"192.0.2.1:80", "documentation"},
		{"172.32.0.1:80", ""},
		{"172.32.9.50:80", "172.32.9.50 is one of this host's own addresses"},
		{"[::ffff:172.32.9.50]:80", "host's own"},
		{"172.32.9.50:8443", ""},
	} {
		ap := netip.MustParseAddrPort(tc.ap)
		got := c.check(ap)
		if (got == "") != (tc.want == "") || !strings.Contains(got, tc.want) {
			t.Errorf("check(%s) = %q, want %q", tc.ap, got, tc.want)
		}
		if err := c.control("tcp", tc.ap, nil); (err == nil) != (tc.want == "") {
			t.Errorf("control(%s) = %v", tc.ap, err)
		}
	}
}

// TestCheckedDialer: the default dialer refuses the host's loopback even
// when something listens there, unless an entry names it.
func TestCheckedDialer(t *testing.T) {
	ln := serveTCP(t, func(net.Conn) {})
	p := mustPolicy(t, "localhost")
	deny := checker{policy: func() *Policy { return &p }}
	d := net.Dialer{Control: deny.control}
	if c, err := d.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Fatal("the checked dialer reached the host's loopback")
	} else if !strings.Contains(err.Error(), "loopback") {
		t.Errorf("error %v does not say loopback", err)
	}
	ap := mustPolicy(t, ln.Addr().String())
	allow := checker{policy: func() *Policy { return &ap }}
	d = net.Dialer{Control: allow.control}
	c, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("an explicit entry did not re-allow %s: %v", ln.Addr(), err)
	}
	c.Close()
}
