package egress

import (
	"fmt"
	"net/netip"
	"syscall"
)

// deniedPrefixes are the address classes a sandbox may not reach unless an
// IP or CIDR entry names them; the first match names the class.
var deniedPrefixes = []struct {
	prefix netip.Prefix
	class  string
}{
	{netip.MustParsePrefix("169.254.169.254/32"), "metadata"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "metadata"},
	{netip.MustParsePrefix("255.255.255.255/32"), "broadcast"},
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "cgnat"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("fc00::/7"), "private"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fec0::/10"), "link-local"}, // deprecated site-local
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// IPv6 ranges that carry an IPv4 address in their last 32 bits (or, for
// 6to4, bits 16-47): denied when the embedded address is.
var (
	v4Compatible = netip.MustParsePrefix("::/96")
	nat64        = netip.MustParsePrefix("64:ff9b::/96")
	nat64Local   = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFour    = netip.MustParsePrefix("2002::/16")
)

// deniedClass names the class of a that egress refuses by default ("" when
// a is an ordinary public address). hostAddrs are the server's own
// addresses.
func deniedClass(a netip.Addr, hostAddrs map[netip.Addr]bool) string {
	if !a.IsValid() {
		return "invalid"
	}
	a = a.WithZone("")
	if a.Is4In6() {
		if c := deniedClass(a.Unmap(), hostAddrs); c != "" {
			return "ipv4-mapped " + c
		}
		return ""
	}
	if hostAddrs[a] {
		return "host address"
	}
	for _, d := range deniedPrefixes {
		if d.prefix.Contains(a) {
			return d.class
		}
	}
	if a.Is6() {
		b := a.As16()
		var inner netip.Addr
		switch {
		case v4Compatible.Contains(a), nat64.Contains(a), nat64Local.Contains(a):
			inner = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
		case sixToFour.Contains(a):
			inner = netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})
		}
		if inner.IsValid() {
			if c := deniedClass(inner, hostAddrs); c != "" {
				return "ipv4-embedded " + c
			}
		}
	}
	return ""
}

// checker decides which addresses the host may dial for a run.
type checker struct {
	policy    Policy
	hostAddrs map[netip.Addr]bool
}

// check returns why the host may not dial ap, or "" when it may: an
// address of a denied class is refused unless an IP or CIDR entry names
// it with its port (a name resolving to it is not enough).
func (c *checker) check(ap netip.AddrPort) string {
	a := ap.Addr().Unmap()
	class := deniedClass(ap.Addr(), c.hostAddrs)
	if class == "" || c.policy.AllowsAddr(a, ap.Port()) {
		return ""
	}
	return fmt.Sprintf("address %s is %s", a, class)
}

// control is a net.Dialer Control function: the last check, on the
// address the socket is about to connect to.
func (c *checker) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("egress: refusing to dial %q: %v", address, err)
	}
	if why := c.check(ap); why != "" {
		return fmt.Errorf("egress: refusing to dial %s: %s", address, why)
	}
	return nil
}
