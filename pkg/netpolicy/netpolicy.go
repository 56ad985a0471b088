// Package netpolicy has one job: to say which addresses something that
// dials on a user's behalf may reach. The server does so for a callback
// (pkg/webhook) and for a sandbox's network egress (pkg/egress); both
// refuse what Reason refuses, and each adds only its own explicit
// allow-list (callback_allow; the IP and CIDR entries of network.allow).
//
// Refused are the addresses that are not ordinary public ones: loopback,
// private (RFC 1918, fc00::/7), link-local (169.254.0.0/16, fe80::/10),
// shared CGNAT 100.64.0.0/10, "this network" 0.0.0.0/8, unspecified,
// multicast, broadcast, IETF protocol assignments 192.0.0.0/24,
// benchmarking 198.18.0.0/15 and 2001:2::/48, ORCHID 2001:10::/28 and
// 2001:20::/28, reserved 240.0.0.0/4 and IPv6 outside 2000::/3,
// documentation ranges, discard-only and site-local IPv6, cloud
// metadata services (169.254.169.254, fd00:ec2::254, 100.100.100.200,
// 168.63.129.16 and others), and the host's own addresses (every address
// of the machine's interfaces: Interfaces). An IPv6 address that carries
// an IPv4 one is judged by it: IPv4-mapped ::ffff:a.b.c.d is the IPv4
// address; NAT64 64:ff9b::/96, 6to4 2002::/16 and Teredo 2001::/32 are
// refused when the IPv4 address they embed would be if dialed; the
// IPv4-compatible ::/96, IPv4-translated ::ffff:0:0:0/96 and local-use
// NAT64 64:ff9b:1::/48 ranges, never routed on the internet, are refused
// whole.
//
// A Checker applies the policy to one caller: its Allow list, then
// Reason. Its Control method is a net.Dialer's Control function, so that
// the address actually connected to is the one checked (a name that
// resolves elsewhere later, DNS rebinding, cannot slip past a check made
// earlier).
//
// The package also parses the allow-lists of network egress (Policy,
// ParsePolicy); it imports only the standard library.
package netpolicy

import (
	"fmt"
	"net/netip"
	"syscall"
)

// kind says how a range's addresses are judged.
type kind uint8

const (
	plain      kind = iota // refused, for the range's reason
	loopback               // refused; being the host's own goes without saying
	wholeEmbed             // refused whole; the IPv4 address in the last 32 bits is named when it is refused too
	nat64                  // judged by the IPv4 address in the last 32 bits
	sixToFour              // judged by the IPv4 address in bits 16-47
	teredo                 // judged by the server (bits 32-63) and the client (the last 32, inverted)
)

type addrRange struct {
	prefix netip.Prefix
	kind   kind
	reason string
}

const (
	metadata      = " (a cloud metadata service)"
	private       = "a private address"
	private6      = "a private (unique local) address"
	documentation = "a documentation address"
)

// ranges are the refused ranges; the first that contains an address
// judges it, so the narrower come first.
var ranges = func() []addrRange {
	r := func(prefix string, k kind, reason string) addrRange {
		return addrRange{netip.MustParsePrefix(prefix), k, reason}
	}
	return []addrRange{
		// Cloud metadata services, named as such whatever range they
		// sit in.
		r("169.254.169.254/32", plain, "a link-local address"+metadata),            // AWS, GCP, Azure, OCI, DigitalOcean, ...
		r("169.254.170.2/32", plain, "a link-local address"+metadata),              // AWS ECS task metadata
		r("169.254.170.23/32", plain, "a link-local address"+metadata),             // AWS EKS Pod Identity
		r("100.100.100.200/32", plain, "a shared (CGNAT) address"+metadata),        // Alibaba Cloud
		r("168.63.129.16/32", plain, "a cloud metadata service address"),           // Azure WireServer, a public address
		r("192.0.0.192/32", plain, "an IETF protocol assignment address"+metadata), // Oracle Cloud (legacy)
		r("fd00:ec2::254/128", plain, private6+metadata),                           // AWS (IPv6)
		r("fd00:ec2::23/128", plain, private6+metadata),                            // AWS EKS Pod Identity (IPv6)
		r("fd20:ce::254/128", plain, private6+metadata),                            // GCP (IPv6)
		r("0.0.0.0/32", plain, "the unspecified address"),
		r("0.0.0.0/8", plain, `a "this network" address`),     // RFC 791
		r("10.0.0.0/8", plain, private),                       // RFC 1918
		r("100.64.0.0/10", plain, "a shared (CGNAT) address"), // RFC 6598
		r("127.0.0.0/8", loopback, "a loopback address"),
		r("169.254.0.0/16", plain, "a link-local address"),                      // RFC 3927
		r("172.16.0.0/12", plain, private),                                      // RFC 1918
		r("192.0.0.0/24", plain, "an IETF protocol assignment address"),         // RFC 6890
		r("192.0.2.0/24", plain, documentation),                                 // TEST-NET-1
		r("192.88.99.0/24", plain, "a 6to4 relay anycast address (deprecated)"), // RFC 7526
		r("192.168.0.0/16", plain, private),                                     // RFC 1918
		r("198.18.0.0/15", plain, "a benchmarking address"),                     // RFC 2544
		r("198.51.100.0/24", plain, documentation),                              // TEST-NET-2
		r("203.0.113.0/24", plain, documentation),                               // TEST-NET-3
		r("224.0.0.0/4", plain, "a multicast address"),
		r("255.255.255.255/32", plain, "the broadcast address"),
		r("240.0.0.0/4", plain, "a reserved address"), // RFC 1112

		r("::/128", plain, "the unspecified address"),
		r("::1/128", loopback, "a loopback address"),
		r("::/96", wholeEmbed, "an IPv4-compatible address (::/96, deprecated)"),
		r("::ffff:0:0:0/96", wholeEmbed, "an IPv4-translated address (::ffff:0:0:0/96)"),
		r("64:ff9b::/96", nat64, "a NAT64 address (64:ff9b::/96)"),
		r("64:ff9b:1::/48", plain, "a local-use NAT64 address (64:ff9b:1::/48)"),
		r("100::/64", plain, "a discard-only address"),
		r("2001::/32", teredo, "a Teredo address (2001::/32)"),
		r("2001:2::/48", plain, "a benchmarking address"),                    // RFC 5180
		r("2001:10::/28", plain, "an ORCHID address (deprecated)"),           // RFC 4843
		r("2001:20::/28", plain, "an ORCHIDv2 (cryptographic hash) address"), // RFC 7343, never routed
		r("2001:db8::/32", plain, documentation),
		r("2002::/16", sixToFour, "a 6to4 address (2002::/16)"),
		r("3fff::/20", plain, documentation), // RFC 9637
		r("5f00::/16", plain, "a segment routing (SRv6) address"),
		r("fc00::/7", plain, private6),
		r("fe80::/10", plain, "a link-local address"),
		r("fec0::/10", plain, "a site-local address (deprecated)"),
		r("ff00::/8", plain, "a multicast address"),
	}
}()

// globalUnicast holds every IPv6 address allocated for the internet.
var globalUnicast = netip.MustParsePrefix("2000::/3")

// hostOwn says that an address is the host's own (alone, or after what
// else it is).
const hostOwn = "one of this host's own addresses"

// Reason returns why a may not be dialed on a user's behalf, or "" when
// it is an ordinary public address. host holds the host's own addresses
// (nil: none; Interfaces has the machine's). An IPv4-mapped address is
// judged as its IPv4 address, and a zone is ignored.
func Reason(a netip.Addr, host HostAddrs) string {
	if !a.IsValid() {
		return "not an IP address"
	}
	a = a.WithZone("").Unmap()
	why, k := classify(a, host)
	if host != nil && k != loopback && host.Contains(a) {
		if why == "" {
			return hostOwn
		}
		return why + " (" + hostOwn + ")"
	}
	return why
}

// classify judges a (unmapped, without a zone) by the ranges alone, and
// says which kind of range did.
func classify(a netip.Addr, host HostAddrs) (string, kind) {
	for _, r := range ranges {
		if !r.prefix.Contains(a) {
			continue
		}
		b := a.As16()
		switch r.kind {
		case plain, loopback:
			return r.reason, r.kind
		case wholeEmbed:
			v4 := netip.AddrFrom4([4]byte(b[12:16]))
			if why := Reason(v4, host); why != "" {
				return fmt.Sprintf("%s embedding %s, %s", r.reason, v4, why), r.kind
			}
			return r.reason, r.kind
		case nat64:
			return embedded(r.reason, netip.AddrFrom4([4]byte(b[12:16])), host), r.kind
		case sixToFour:
			return embedded(r.reason, netip.AddrFrom4([4]byte(b[2:6])), host), r.kind
		case teredo:
			server := netip.AddrFrom4([4]byte(b[4:8]))
			if why := Reason(server, host); why != "" {
				return fmt.Sprintf("%s whose server %s is %s", r.reason, server, why), r.kind
			}
			client := netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]})
			if why := Reason(client, host); why != "" {
				return fmt.Sprintf("%s whose client %s is %s", r.reason, client, why), r.kind
			}
			return "", r.kind
		}
	}
	if a.Is6() && !globalUnicast.Contains(a) {
		return "a reserved IPv6 address (outside 2000::/3)", plain
	}
	return "", plain
}

// embedded judges an address of a range that carries v4 by v4.
func embedded(what string, v4 netip.Addr, host HostAddrs) string {
	if why := Reason(v4, host); why != "" {
		return fmt.Sprintf("%s embedding %s, %s", what, v4, why)
	}
	return ""
}

// RefusedError is an address a Checker refuses.
type RefusedError struct {
	Addr   netip.Addr // as judged: IPv4-mapped addresses unmapped, no zone
	Reason string     // Reason's
	Hint   string     // the Checker's: how to allow it anyway
}

func (e *RefusedError) Error() string {
	s := fmt.Sprintf("%s is %s", e.Addr, e.Reason)
	if e.Hint != "" {
		s += "; " + e.Hint
	}
	return s
}

// Checker is the policy of one caller: it refuses what Reason refuses
// but what Allow lists.
type Checker struct {
	// Allow lists the prefixes the caller may reach anyway.
	Allow []netip.Prefix
	// Host holds the host's own addresses; nil means Interfaces().
	Host HostAddrs
	// Hint ends the message of a refusal, saying how to allow the
	// address ("callbacks may not reach it unless callback_allow lists
	// it").
	Hint string
}

// Check returns a *RefusedError when c refuses a, else nil.
func (c *Checker) Check(a netip.Addr) error {
	a = a.WithZone("").Unmap()
	if Allowed(c.Allow, a) {
		return nil
	}
	host := c.Host
	if host == nil {
		host = Interfaces()
	}
	if why := Reason(a, host); why != "" {
		return &RefusedError{Addr: a, Reason: why, Hint: c.Hint}
	}
	return nil
}

// Control is a net.Dialer Control function: Check on the address the
// socket is about to connect to.
func (c *Checker) Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("refusing to dial %q: %v", address, err)
	}
	return c.Check(ap.Addr())
}

// Allowed reports whether a prefix of allow holds a (IPv4-mapped
// addresses, and prefixes, count as their IPv4 form).
func Allowed(allow []netip.Prefix, a netip.Addr) bool {
	a = a.WithZone("").Unmap()
	for _, p := range allow {
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		if p.Contains(a) {
			return true
		}
	}
	return false
}
