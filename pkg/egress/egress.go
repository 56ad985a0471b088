// Package egress gives a sandboxed run opt-in network access to an
// allow-list, transparently to its programs.
//
// The sandbox's network namespace holds a TUN device (SandboxAddr/PrefixLen
// and SandboxAddr6/PrefixLen6, default routes via GatewayAddr and
// GatewayAddr6, resolv.conf naming GatewayAddr). Its other end is served
// here by a userspace TCP/IP stack (gVisor's netstack, IPv4 and IPv6) on
// the host: a DNS server on GatewayAddr:53 and GatewayAddr6:53 answers
// only for allowed names (A and AAAA), resolving them on the host and
// remembering the addresses it handed out; every TCP connection, to any
// address of either family, is checked against the Policy and
// then dialed by the host to that exact address (never re-resolved) with a
// dialer that refuses the addresses pkg/netpolicy refuses (loopback,
// private, link-local, metadata, the host's own and other special
// addresses) unless an IP or CIDR entry names them; host.sandbox.internal
// reaches the host's 127.0.0.1 on the ports listed for it. Denied
// connections are reset at once; DNS sent to any other server gets the
// same answers; other UDP is refused (ICMP port unreachable) and ICMP is
// not forwarded (only the gateway answers echo requests, in both
// families); limits cap open connections and bytes; Stats lists every
// destination tried.
//
// The package is Linux-only at run time; elsewhere Start returns an error.
package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// Defaults for the zero values of Config.
const (
	DefaultMaxConns    = 64
	DefaultDialTimeout = 10 * time.Second
	// DefaultMTU is the TUN device's MTU the engine should set: the link
	// never leaves the machine, and large packets make the netstack about
	// 4-7 times faster than 1500 (BenchmarkEgressTCP).
	DefaultMTU = 65520
)

// ErrUnsupported is returned by Start off Linux.
var ErrUnsupported = errors.New("egress: network egress is supported only on Linux")

// Config sets up the egress of one run.
type Config struct {
	// Policy is the run's allow-list.
	Policy Policy
	// Resolver resolves allowed names on the host, to addresses of both
	// families (A queries are answered with the IPv4 ones, AAAA with the
	// IPv6 ones); nil means net.DefaultResolver.LookupNetIP(ctx, "ip",
	// host).
	Resolver func(ctx context.Context, host string) ([]netip.Addr, error)
	// MaxConns caps the connections open at once (0: DefaultMaxConns).
	MaxConns int
	// MaxBytesOut and MaxBytesIn cap the bytes the run sends and receives
	// over all its connections (0: no cap); past them every connection is
	// closed and new ones are refused.
	MaxBytesOut, MaxBytesIn int64
	// DialTimeout bounds the host's connect (0: DefaultDialTimeout).
	DialTimeout time.Duration
	// HostAddrs are the server's own addresses, denied like private ones;
	// nil means the addresses of the host's interfaces, read again as
	// netpolicy.Interfaces does.
	HostAddrs []netip.Addr
	// MTU of the TUN device (0: DefaultMTU); it must be the device's.
	MTU int
	// Dial, if set, replaces the host's dialer after every check has
	// passed (tests point it at local listeners). The default dialer
	// checks the address again in its Control function.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Budgets bound the bytes (both ways, over all its connections) the
	// run may move with what an entry of Policy allows, by the entry as
	// written; past one, its connections are reset and new ones refused.
	Budgets map[string]int64
	// Intercept, when set, serves each allowed TCP connection in place of
	// the plain copy (pkg/intercept: a run's secrets put in place in its
	// HTTP and HTTPS requests): sandbox is the program's side, host the
	// destination dialed, to where the connection goes. What it sends to
	// host and reads from it counts against the run's byte limits as the
	// copy's would (past them, every connection is closed). It returns
	// once it is done with both; the egress closes them then, and when
	// the egress closes, ctx ends.
	Intercept func(ctx context.Context, sandbox, host net.Conn, to Target)

	// routes says whether the host has a route to an IPv6 address (nil:
	// the host's routing table, or, with Dial set, every address).
	routes func(netip.Addr) bool
}

// Target is where an intercepted connection goes: the names the run's
// DNS answered with its address (HostInternalName for the host's own
// ports), the address and the port.
type Target struct {
	Names []string
	Addr  netip.Addr
	Port  uint16
}

// Destination and Stats are what a run's egress did, in the API's own
// types (the run's result carries them as they are): every destination
// tried, allowed or denied (one both allowed and denied, by a limit say,
// has an entry for each), its connections, lookups ("dns") or datagrams
// ("udp"), and bytes each way.
type (
	Destination = wire.Destination
	Stats       = wire.NetworkReport
)
