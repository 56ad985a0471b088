package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// addrPolicy says which addresses callbacks may reach (the SSRF policy of
// the package doc).
type addrPolicy struct {
	allow []netip.Prefix
}

// Ranges refused besides those netip classifies (loopback, private,
// link-local, unspecified, multicast).
var refusedCallbackRanges = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "a \"this network\" address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a shared (CGNAT) address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "an IETF protocol address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address"},
}

// IPv6 ranges refused whatever they hold: those that embed an IPv4 address
// but are not routed on the internet (a host or a translator may still
// deliver them to the embedded address, so ::127.0.0.1 could reach
// loopback), and other ranges that are not globally reachable.
var refusedIPv6Ranges = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("::/96"), "an IPv4-compatible IPv6 address (::/96, deprecated)"},
	{netip.MustParsePrefix("::ffff:0:0:0/96"), "an IPv4-translated IPv6 address (::ffff:0:0:0/96)"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a local-use NAT64 address (64:ff9b:1::/48)"},
	{netip.MustParsePrefix("100::/64"), "a discard-only address"},
	{netip.MustParsePrefix("2001:db8::/32"), "a documentation address"},
	{netip.MustParsePrefix("fec0::/10"), "a site-local address"},
}

// IPv6 prefixes that embed a routable IPv4 address (NAT64, 6to4, Teredo):
// the embedded address is checked as if it were dialed.
var (
	nat64Prefix = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour   = netip.MustParsePrefix("2002::/16")
	teredo      = netip.MustParsePrefix("2001::/32")
)

// embeddedIPv4 returns the IPv4 address a refused IPv6 range embeds in its
// last 32 bits (::/96, ::ffff:0:0:0/96), if any.
func embeddedIPv4(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() {
		return netip.Addr{}, false
	}
	b := a.As16()
	return netip.AddrFrom4([4]byte(b[12:16])), true
}

// refusedAddrError is a callback address the policy refuses.
type refusedAddrError struct {
	addr netip.Addr
	what string
}

func (e *refusedAddrError) Error() string {
	return fmt.Sprintf("%s is %s; callbacks may not reach it unless callback_allow lists it", e.addr, e.what)
}

// check refuses an address callbacks may not reach.
func (p *addrPolicy) check(a netip.Addr) error {
	a = a.WithZone("").Unmap()
	for _, pfx := range p.allow {
		if pfx.Contains(a) {
			return nil
		}
	}
	if what := classifyAddr(a); what != "" {
		return &refusedAddrError{a, what}
	}
	return nil
}

func classifyAddr(a netip.Addr) string {
	switch {
	case !a.IsValid():
		return "not an address"
	case a.IsLoopback():
		return "a loopback address"
	case a.IsPrivate():
		return "a private address"
	case a.IsMulticast():
		return "a multicast address"
	case a.IsLinkLocalUnicast():
		return "a link-local address"
	case a.IsUnspecified():
		return "the unspecified address"
	}
	for _, r := range refusedCallbackRanges {
		if r.prefix.Contains(a) {
			return r.what
		}
	}
	if !a.Is6() {
		return ""
	}
	for _, r := range refusedIPv6Ranges {
		if r.prefix.Contains(a) {
			if v4, ok := embeddedIPv4(a); ok && r.prefix.Bits() == 96 {
				if what := classifyAddr(v4); what != "" {
					return fmt.Sprintf("%s embedding %s, %s", r.what, v4, what)
				}
			}
			return r.what
		}
	}
	b := a.As16()
	switch {
	case nat64Prefix.Contains(a):
		if what := classifyAddr(netip.AddrFrom4([4]byte(b[12:16]))); what != "" {
			return what + " (NAT64)"
		}
	case sixToFour.Contains(a):
		if what := classifyAddr(netip.AddrFrom4([4]byte(b[2:6]))); what != "" {
			return what + " (6to4)"
		}
	case teredo.Contains(a):
		// The Teredo server in bits 32-63, the client (inverted) in the
		// last 32.
		if what := classifyAddr(netip.AddrFrom4([4]byte(b[4:8]))); what != "" {
			return what + " (Teredo server)"
		}
		client := [4]byte{^b[12], ^b[13], ^b[14], ^b[15]}
		if what := classifyAddr(netip.AddrFrom4(client)); what != "" {
			return what + " (Teredo client)"
		}
	}
	return ""
}

// checkURL validates a callback_url at submission: http or https, a host,
// no credentials, and every address the host resolves to allowed.
func (p *addrPolicy) checkURL(ctx context.Context, raw string) error {
	const maxLen = 2048
	if len(raw) > maxLen {
		return fmt.Errorf("callback_url is longer than %d bytes", maxLen)
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Opaque != "" {
		return fmt.Errorf("callback_url %q is not an absolute http or https URL", raw)
	}
	if s := strings.ToLower(u.Scheme); s != "http" && s != "https" {
		return fmt.Errorf("callback_url scheme %q: use http or https", u.Scheme)
	}
	if u.User != nil {
		return errors.New("callback_url must not contain credentials")
	}
	host := u.Hostname()
	if host == "" {
		return errors.New("callback_url has no host")
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("callback_url port %q is invalid", port)
		}
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if err := p.check(a); err != nil {
			return fmt.Errorf("callback_url refused: %v", err)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return fmt.Errorf("callback_url host %q does not resolve: %v", host, err)
	}
	for _, a := range addrs {
		if err := p.check(a); err != nil {
			return fmt.Errorf("callback_url refused: %s resolves to %v", host, err)
		}
	}
	return nil
}

// control is the dialer's check of the address it is about to connect to.
func (p *addrPolicy) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("callback address %q: %w", address, err)
	}
	return p.check(ap.Addr())
}
