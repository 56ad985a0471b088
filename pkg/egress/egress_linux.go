package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	"gvisor.dev/gvisor/pkg/tcpip/transport/icmp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"

	"github.com/sandbox-run/sandbox-run/pkg/netpolicy"
)

const (
	nicID = 1
	// maxDestinations caps Stats.Destinations; further ones only count.
	maxDestinations = 512
	// maxNames caps the addresses remembered from DNS answers.
	maxNames = 8192
	// copyBuf is the size a connection's copy buffers (one each way)
	// start at, and copyBufBulk what one grows to once a read fills it:
	// a bulk transfer moves ~1.5 times as fast through larger copies, a
	// chatty connection keeps the small one.
	copyBuf     = 64 << 10
	copyBufBulk = 256 << 10
)

var (
	gatewayIP      = netip.MustParseAddr(GatewayAddr)
	gatewayIP6     = netip.MustParseAddr(GatewayAddr6)
	hostInternalIP = netip.MustParseAddr(HostInternalAddr)
	loopbackIP     = netip.MustParseAddr("127.0.0.1")
)

// Egress serves one run's TUN device. Its methods are safe to call
// concurrently.
type Egress struct {
	cfg     Config
	checker checker
	stack   *stack.Stack
	link    *tunLink
	fd      int
	dns     []*gonet.UDPConn // the DNS server's endpoints: GatewayAddr:53, GatewayAddr6:53
	dialer  net.Dialer

	ctx       context.Context
	cancel    context.CancelFunc
	stopCtx   func() bool
	closeOnce sync.Once
	wg        sync.WaitGroup

	bytesOut, bytesIn atomic.Int64
	// pol is the run's policy: Config.Policy, until SetPolicy.
	pol atomic.Pointer[Policy]
	// budgets are Config.Budgets' counters, by entry (SetPolicy changes
	// them).
	budgets atomic.Pointer[map[string]*budget]

	mu      sync.Mutex
	closed  bool
	open    int
	flows   map[*flow]struct{}
	dests   map[destKey]*destStat
	order   []*destStat
	dropped int
	allowed int
	denied  int
	limit   string
	udpDNS  int                     // DNS datagrams to other servers in flight
	names   map[netip.Addr][]string // addresses our DNS handed out, and for which names
	cache   map[string]cached       // resolver answers, per name
}

type destKey struct {
	proto, host, ip string
	port            uint16
	allowed         bool
}

type destStat struct {
	Destination
	bytesOut, bytesIn atomic.Int64
}

type cached struct {
	addrs []netip.Addr
	err   error
	at    time.Time
}

// flow is one forwarded connection, to dst:port, within budget (nil:
// none).
type flow struct {
	sandbox, host net.Conn
	ep            tcpip.Endpoint // the sandbox side's
	dst           netip.Addr
	port          uint16
	name          string // the host it was decided for (Stats)
	budget        *budget
}

// budget is the bytes the connections an allow entry allows may move.
type budget struct {
	entry string
	max   atomic.Int64 // SetPolicy may change it
	used  atomic.Int64
}

// unbounded is the max of a budget SetPolicy dropped: the connections it
// still bounds go on without one.
const unbounded = math.MaxInt64

// setBudgets makes the budgets by entry: an entry that had one keeps it,
// and what it has moved, with its new max; one left out is dropped.
func (e *Egress) setBudgets(budgets map[string]int64) {
	old := map[string]*budget{}
	if p := e.budgets.Load(); p != nil {
		old = *p
	}
	next := make(map[string]*budget, len(budgets))
	for entry, n := range budgets {
		b := old[entry]
		if b == nil {
			b = &budget{entry: entry}
		}
		b.max.Store(n)
		next[entry] = b
	}
	for entry, b := range old {
		if next[entry] == nil {
			b.max.Store(unbounded)
		}
	}
	e.budgets.Store(&next)
}

// abort resets both sides: the program sees a reset, not an end of file
// it could take for a complete answer.
func (f *flow) abort() {
	if f.ep != nil {
		f.ep.Abort()
	}
	if tc, ok := f.host.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	f.close()
}

func (f *flow) close() {
	f.sandbox.Close()
	if f.host != nil {
		f.host.Close()
	}
}

// Start serves tun, a TUN device opened with IFF_TUN|IFF_NO_PI, until
// Close or until ctx ends. Opened with IFF_VNET_HDR too, and TUN_F_CSUM
// offload set, neither side checksums the TCP segments they pass each
// other (see tunLink). Start uses a
// duplicate of tun's descriptor: the caller may close tun once Start has
// returned.
func Start(ctx context.Context, tun *os.File, cfg Config) (*Egress, error) {
	if tun == nil {
		return nil, errors.New("egress: no TUN device")
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.MTU <= 0 {
		cfg.MTU = DefaultMTU
	}
	if cfg.MTU < 1280 || cfg.MTU > 65535 {
		return nil, fmt.Errorf("egress: MTU %d out of range (1280-65535)", cfg.MTU)
	}
	switch {
	case cfg.routes != nil:
	case cfg.Dial != nil:
		cfg.routes = func(netip.Addr) bool { return true } // the tests' dialer decides
	default:
		cfg.routes = hostRoutes
	}
	if cfg.Resolver == nil {
		cfg.Resolver = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	var host netpolicy.HostAddrs = netpolicy.NewAddrSet(cfg.HostAddrs...)
	if cfg.HostAddrs == nil {
		ifaddrs := netpolicy.Interfaces()
		if err := ifaddrs.Refresh(); err != nil {
			return nil, fmt.Errorf("egress: %w", err)
		}
		host = ifaddrs
	}

	raw, err := tun.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("egress: TUN device: %w", err)
	}
	fd := -1
	var dupErr error
	if err := raw.Control(func(tfd uintptr) {
		fd, dupErr = unix.FcntlInt(tfd, unix.F_DUPFD_CLOEXEC, 3)
	}); err != nil {
		return nil, fmt.Errorf("egress: TUN device: %w", err)
	}
	if dupErr != nil {
		return nil, fmt.Errorf("egress: duplicating the TUN descriptor: %w", dupErr)
	}

	e := &Egress{
		cfg:     cfg,
		checker: checker{host: host},
		fd:      fd,
		flows:   map[*flow]struct{}{},
		dests:   map[destKey]*destStat{},
		names:   map[netip.Addr][]string{},
		cache:   map[string]cached{},
	}
	e.pol.Store(&cfg.Policy)
	e.checker.policy = e.policy
	e.setBudgets(cfg.Budgets)
	e.dialer = net.Dialer{Control: e.checker.control, KeepAlive: 30 * time.Second}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	if err := e.setup(); err != nil {
		e.teardown()
		return nil, err
	}
	for _, c := range e.dns {
		e.wg.Add(1)
		go e.serveDNS(c)
	}
	e.stopCtx = context.AfterFunc(ctx, func() { e.Close() })
	return e, nil
}

func (e *Egress) setup() error {
	// IPv6 without duplicate address detection, router advertisements,
	// router solicitations or MLD (ipv6.NewProtocol's defaults): the link
	// has two ends, both configured. ICMPv6 is registered only to hold
	// back echo replies (below).
	e.stack = stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol, ipv6.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcp.NewProtocol, udp.NewProtocol, icmp.NewProtocol6},
	})
	sack := tcpip.TCPSACKEnabled(true)
	e.stack.SetTransportProtocolOption(tcp.ProtocolNumber, &sack)
	moderate := tcpip.TCPModerateReceiveBufferOption(true)
	e.stack.SetTransportProtocolOption(tcp.ProtocolNumber, &moderate)

	// The link owns the descriptor from here on.
	link, err := newTUNLink(e.fd, uint32(e.cfg.MTU))
	e.fd = -1
	if err != nil {
		return fmt.Errorf("egress: TUN link: %w", err)
	}
	e.link = link
	if err := e.stack.CreateNICWithOptions(nicID, link, stack.NICOptions{Name: "sandbox"}); err != nil {
		link.Close()
		return fmt.Errorf("egress: netstack NIC: %s", err)
	}
	// Every destination is ours: accept packets to any address and answer
	// from it.
	if err := e.stack.SetPromiscuousMode(nicID, true); err != nil {
		return fmt.Errorf("egress: promiscuous mode: %s", err)
	}
	if err := e.stack.SetSpoofing(nicID, true); err != nil {
		return fmt.Errorf("egress: spoofing: %s", err)
	}
	gws := []struct {
		proto tcpip.NetworkProtocolNumber
		addr  tcpip.AddressWithPrefix
	}{
		{ipv4.ProtocolNumber, tcpip.AddressWithPrefix{Address: tcpip.AddrFrom4(gatewayIP.As4()), PrefixLen: PrefixLen}},
		{ipv6.ProtocolNumber, tcpip.AddressWithPrefix{Address: tcpip.AddrFrom16(gatewayIP6.As16()), PrefixLen: PrefixLen6}},
	}
	for _, gw := range gws {
		if err := e.stack.AddProtocolAddress(nicID, tcpip.ProtocolAddress{Protocol: gw.proto, AddressWithPrefix: gw.addr}, stack.AddressProperties{}); err != nil {
			return fmt.Errorf("egress: gateway address %s: %s", gw.addr, err)
		}
	}
	e.stack.SetRouteTable([]tcpip.Route{
		{Destination: header.IPv4EmptySubnet, NIC: nicID},
		{Destination: header.IPv6EmptySubnet, NIC: nicID},
	})

	fwd := tcp.NewForwarder(e.stack, 0, 2*e.cfg.MaxConns+16, e.handleTCP)
	e.stack.SetTransportProtocolHandler(tcp.ProtocolNumber, fwd.HandlePacket)
	e.stack.SetTransportProtocolHandler(udp.ProtocolNumber, udp.NewForwarder(e.stack, e.handleUDP).HandlePacket)
	// Promiscuous, the stack would answer an echo request to any IPv6
	// address (IPv4 answers only its own): one to another address than
	// the gateway's is taken here and dropped.
	e.stack.SetTransportProtocolHandler(header.ICMPv6ProtocolNumber, func(id stack.TransportEndpointID, _ *stack.PacketBuffer) bool {
		return toAddr(id.LocalAddress) != gatewayIP6
	})

	for _, gw := range gws {
		dns, err := gonet.DialUDP(e.stack, &tcpip.FullAddress{NIC: nicID, Addr: gw.addr.Address, Port: 53}, nil, gw.proto)
		if err != nil {
			return fmt.Errorf("egress: DNS endpoint: %w", err)
		}
		e.dns = append(e.dns, dns)
	}
	return nil
}

// Close stops serving the TUN device, closes every connection and waits
// for the package's goroutines. It is safe to call more than once.
func (e *Egress) Close() error {
	e.closeOnce.Do(func() {
		if e.stopCtx != nil {
			e.stopCtx()
		}
		e.mu.Lock()
		e.closed = true
		flows := make([]*flow, 0, len(e.flows))
		for f := range e.flows {
			flows = append(flows, f)
		}
		e.mu.Unlock()
		e.cancel()
		for _, f := range flows {
			f.abort()
		}
		for _, c := range e.dns {
			c.Close()
		}
		// Closing the stack aborts its endpoints, handshakes in progress
		// too, so that no handler stays blocked.
		e.stack.Close()
		e.waitHandlers()
		e.wait()
	})
	return nil
}

// waitHandlers waits for the package's goroutines. A connection's handler
// that was past its check of closed but not yet in its handshake when the
// stack closed starts a handshake that nothing will finish (the stack's
// protocols are stopped), so what the stack has registered is aborted
// again, now and then, until every handler has returned.
func (e *Egress) waitHandlers() {
	done := make(chan struct{})
	go func() {
		e.wg.Wait()
		close(done)
	}()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
			for _, ep := range e.stack.RegisteredEndpoints() {
				ep.Abort()
			}
		}
	}
}

// teardown undoes a Start that failed half-way.
func (e *Egress) teardown() {
	e.cancel()
	for _, c := range e.dns {
		c.Close()
	}
	if e.stack != nil {
		e.stack.Close()
	}
	e.wait()
}

// wait waits for the closed stack and the TUN reader, then closes our
// descriptor of the TUN device.
func (e *Egress) wait() {
	if e.link != nil {
		e.link.stop() // before netstack takes its lock to remove the NIC
	}
	if e.stack != nil {
		e.stack.Wait()
	}
	if e.link != nil {
		e.link.Wait()
	}
	if e.fd >= 0 {
		unix.Close(e.fd)
		e.fd = -1
	}
}

// Stats returns what the run's egress did so far.
func (e *Egress) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := Stats{
		Destinations: make([]Destination, 0, len(e.order)),
		Allowed:      e.allowed,
		Denied:       e.denied,
		BytesOut:     e.bytesOut.Load(),
		BytesIn:      e.bytesIn.Load(),
		Limit:        e.limit,
		Dropped:      e.dropped,
	}
	for _, d := range e.order {
		c := d.Destination
		c.BytesOut, c.BytesIn = d.bytesOut.Load(), d.bytesIn.Load()
		s.Destinations = append(s.Destinations, c)
	}
	return s
}

// record counts one attempt to reach a destination and returns its entry
// (nil past the cap).
func (e *Egress) record(proto, host string, ip netip.Addr, port uint16, allowed bool, reason string) *destStat {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.recordLocked(proto, host, ip, port, allowed, reason)
}

func (e *Egress) recordLocked(proto, host string, ip netip.Addr, port uint16, allowed bool, reason string) *destStat {
	if allowed {
		e.allowed++
	} else {
		e.denied++
	}
	ipStr := ""
	if ip.IsValid() {
		ipStr = ip.String()
	}
	if host == "" {
		host = ipStr
	}
	k := destKey{proto: proto, host: host, ip: ipStr, port: port, allowed: allowed}
	d := e.dests[k]
	if d == nil {
		if len(e.order) >= maxDestinations {
			e.dropped++
			return nil
		}
		d = &destStat{Destination: Destination{Host: host, IP: ipStr, Port: int(port), Protocol: proto, Allowed: allowed}}
		e.dests[k] = d
		e.order = append(e.order, d)
	}
	d.Connections++
	if !allowed {
		d.Reason = reason
	}
	return d
}

func (e *Egress) setError(d *destStat, err error) {
	if d == nil {
		return
	}
	e.mu.Lock()
	d.Error = err.Error()
	e.mu.Unlock()
}

// handleUDP sees every datagram no endpoint took (all but DNS to the
// gateway). DNS to another server is answered here as if by that server
// (programs that ignore resolv.conf see the same policy); the rest is
// denied, and the stack answers ICMP port unreachable.
func (e *Egress) handleUDP(r *udp.ForwarderRequest) bool {
	id := r.ID()
	if id.LocalPort != 53 {
		e.record("udp", "", toAddr(id.LocalAddress).Unmap(), id.LocalPort, false, "udp is not allowed (only DNS)")
		return false
	}
	e.mu.Lock()
	if e.closed || e.udpDNS >= dnsParallel {
		e.mu.Unlock()
		return true // dropped: the client retries
	}
	e.udpDNS++
	e.wg.Add(1)
	e.mu.Unlock()
	release := func() {
		e.mu.Lock()
		e.udpDNS--
		e.mu.Unlock()
		e.wg.Done()
	}
	var wq waiter.Queue
	ep, err := r.CreateEndpoint(&wq)
	if err != nil {
		release()
		return true
	}
	go func() {
		defer release()
		c := gonet.NewUDPConn(&wq, ep)
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(time.Second))
		buf := make([]byte, 4096)
		n, err := c.Read(buf)
		if err != nil {
			return
		}
		if resp := e.answer(buf[:n]); resp != nil {
			c.Write(resp)
		}
	}()
	return true
}

func toAddr(a tcpip.Address) netip.Addr {
	if a.Len() == 4 {
		return netip.AddrFrom4(a.As4())
	}
	if a.Len() == 16 {
		return netip.AddrFrom16(a.As16())
	}
	return netip.Addr{}
}

// policy is the run's policy as it is now.
func (e *Egress) policy() *Policy { return e.pol.Load() }

// SetPolicy changes the run's policy while it runs: new connections and
// lookups are decided by p at once, and open connections p does not allow
// are reset (each recorded as denied, its reason the change).
func (e *Egress) SetPolicy(p Policy) {
	e.pol.Store(&p)
	e.recheck("the policy changed: ")
}

// SetBudgets replaces Config.Budgets while the run runs: an entry that had
// one keeps what it has moved (its connections are reset, and new ones
// refused, if that spends its new budget already); one left out no longer
// bounds anything. With a new policy, set its budgets first.
func (e *Egress) SetBudgets(budgets map[string]int64) {
	e.setBudgets(budgets)
	e.recheck("the budgets changed: ")
}

// recheck resets the open connections the policy and budgets no longer
// allow, each recorded as denied, why.
func (e *Egress) recheck(why string) {
	e.mu.Lock()
	flows := make([]*flow, 0, len(e.flows))
	for f := range e.flows {
		flows = append(flows, f)
	}
	e.mu.Unlock()
	for _, f := range flows {
		if dec := e.decide(f.dst, f.port); dec.reason != "" {
			e.record("tcp", dec.host, f.dst, f.port, false, why+dec.reason)
			f.abort()
		}
	}
}

// withBudget gives d, allowed, the budget of the entry that allows it (of
// names, dst, port), or refuses it when that budget is spent.
func (e *Egress) withBudget(d *decision, names []string, dst netip.Addr, port uint16) {
	budgets := e.budgets.Load()
	if budgets == nil || len(*budgets) == 0 || d.reason != "" {
		return
	}
	b := (*budgets)[e.policy().Match(names, dst, port)]
	if b == nil {
		return
	}
	if b.used.Load() >= b.max.Load() {
		d.reason = fmt.Sprintf("the byte budget of %s (%d bytes) is spent", b.entry, b.max.Load())
		return
	}
	d.budget = b
}

// spent resets every connection within b, once the bytes it bounds are
// moved (their records say so).
func (e *Egress) spent(b *budget) {
	e.mu.Lock()
	var flows []*flow
	for f := range e.flows {
		if f.budget == b {
			flows = append(flows, f)
		}
	}
	e.mu.Unlock()
	for _, f := range flows {
		e.record("tcp", f.name, f.dst, f.port, false, fmt.Sprintf("the byte budget of %s (%d bytes) is spent", b.entry, b.max.Load()))
		f.abort()
	}
}

// decision is what handleTCP does with a connection.
type decision struct {
	host     string         // for Stats
	dial     netip.AddrPort // what the host dials
	reason   string         // non-empty: denied
	internal bool           // host.sandbox.internal: dial the host's loopback
	budget   *budget        // the budget of the entry that allows it (nil: none)
}

func (e *Egress) decide(dst netip.Addr, port uint16) decision {
	d := decision{dial: netip.AddrPortFrom(dst, port)}
	p := e.policy()
	switch {
	case dst == hostInternalIP:
		d.host = HostInternalName
		if !p.AllowsHostInternal(port) {
			d.reason = fmt.Sprintf("port %d of %s is not listed", port, HostInternalName)
			return d
		}
		d.dial, d.internal = netip.AddrPortFrom(loopbackIP, port), true
		e.withBudget(&d, []string{HostInternalName}, dst, port)
		return d
	case dst == gatewayIP || dst == gatewayIP6:
		d.reason = fmt.Sprintf("port %d of the gateway is closed", port)
		return d
	}
	e.mu.Lock()
	names := e.names[dst]
	e.mu.Unlock()
	viaName := false
	for _, n := range names {
		if p.AllowsNamePort(n, port) {
			d.host, viaName = n, true
			break
		}
	}
	if !viaName && len(names) > 0 {
		d.host = names[0]
	}
	switch {
	case viaName || p.AllowsAddr(dst, port):
		if why := e.checker.check(d.dial); why != "" {
			d.reason = why
		}
		e.withBudget(&d, names, dst, port)
	case len(names) > 0:
		d.reason = fmt.Sprintf("port %d is not allowed for %s", port, d.host)
	default:
		d.reason = "not in the allow-list"
	}
	return d
}

// handleTCP runs, in a goroutine of its own, for every SYN the stack sees.
func (e *Egress) handleTCP(r *tcp.ForwarderRequest) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		r.Complete(true)
		return
	}
	e.wg.Add(1)
	e.mu.Unlock()
	defer e.wg.Done()

	id := r.ID()
	// An IPv4-mapped destination (::ffff:a.b.c.d) is its IPv4 address,
	// as it is decided, recorded and dialed.
	dst, port := toAddr(id.LocalAddress).Unmap(), id.LocalPort
	isDNS := (dst == gatewayIP || dst == gatewayIP6) && port == 53 // DNS over TCP, answered here
	var dec decision
	pol := e.policy() // what it is decided by: SetPolicy may change it meanwhile
	if !isDNS {
		dec = e.decide(dst, port)
	}

	e.mu.Lock()
	switch {
	case dec.reason != "":
	case e.limit == "bytes_out" || e.limit == "bytes_in":
		dec.reason = "the run's byte limit was reached"
	case e.open >= e.cfg.MaxConns:
		dec.reason = fmt.Sprintf("connection limit (%d open)", e.cfg.MaxConns)
		e.limit = "connections"
	}
	var ds *destStat
	if !isDNS || dec.reason != "" {
		ds = e.recordLocked("tcp", dec.host, dst, port, dec.reason == "", dec.reason)
	}
	if dec.reason != "" {
		e.mu.Unlock()
		r.Complete(true)
		return
	}
	e.open++
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.open--
		e.mu.Unlock()
	}()
	if isDNS {
		e.serveDNSTCP(r)
		return
	}

	ctx, cancel := context.WithTimeout(e.ctx, e.cfg.DialTimeout)
	hc, err := e.dial(ctx, dec)
	cancel()
	if err != nil {
		e.setError(ds, err)
		r.Complete(true)
		return
	}
	var wq waiter.Queue
	ep, terr := r.CreateEndpoint(&wq)
	if terr != nil {
		hc.Close()
		r.Complete(true)
		return
	}
	r.Complete(false)
	f := &flow{sandbox: gonet.NewTCPConn(&wq, ep), host: hc, ep: ep, dst: dst, port: port, name: dec.host, budget: dec.budget}
	if !e.track(f) {
		f.close()
		return
	}
	defer e.untrack(f)
	if e.policy() != pol && !isDNS {
		// The policy changed since it was decided, before SetPolicy
		// could see it: decided again.
		if again := e.decide(dst, port); again.reason != "" {
			e.record("tcp", again.host, dst, port, false, "the policy changed: "+again.reason)
			f.abort()
			return
		}
	}
	if e.cfg.Intercept != nil {
		e.cfg.Intercept(e.ctx, f.sandbox, &metered{Conn: hc, e: e, ds: ds, budget: dec.budget}, e.target(dec, dst, port))
		return
	}
	e.proxy(f, ds)
}

// target is where a connection decided as dec goes, for Intercept.
func (e *Egress) target(dec decision, dst netip.Addr, port uint16) Target {
	t := Target{Addr: dst, Port: port}
	if dec.internal {
		t.Names = []string{HostInternalName}
		return t
	}
	e.mu.Lock()
	t.Names = slices.Clone(e.names[dst])
	e.mu.Unlock()
	return t
}

// metered is the host's side of an intercepted connection: what is
// written to it and read from it counts against the run's byte limits and
// the destination's counts, as copy counts them.
type metered struct {
	net.Conn
	e      *Egress
	ds     *destStat
	budget *budget // nil: none
}

// within takes n bytes from m's budget, or fewer: then it is spent.
func (m *metered) within(n int) (int, bool) {
	if m.budget == nil {
		return n, true
	}
	got := reserve(&m.budget.used, m.budget.max.Load(), n)
	return got, got == n
}

// errByteLimit is a write or read past the run's byte limit, errBudget
// past the budget of the entry that allowed the connection.
var (
	errByteLimit = errors.New("egress: the run's byte limit was reached")
	errBudget    = errors.New("egress: the byte budget of the destination is spent")
)

func (m *metered) Write(b []byte) (int, error) {
	n := reserve(&m.e.bytesOut, m.e.cfg.MaxBytesOut, len(b))
	if nb, ok := m.within(n); !ok {
		m.e.bytesOut.Add(int64(nb - n))
		w, _ := m.Conn.Write(b[:nb])
		if m.ds != nil {
			m.ds.bytesOut.Add(int64(w))
		}
		m.e.spent(m.budget)
		return w, errBudget
	}
	w, err := m.Conn.Write(b[:n])
	if w < n {
		m.e.bytesOut.Add(int64(w - n))
	}
	if m.ds != nil {
		m.ds.bytesOut.Add(int64(w))
	}
	if err == nil && n < len(b) {
		m.e.hitLimit("bytes_out")
		err = errByteLimit
	}
	return w, err
}

func (m *metered) Read(b []byte) (int, error) {
	n, err := m.Conn.Read(b)
	if n > 0 {
		if nb, ok := m.within(n); !ok {
			r := reserve(&m.e.bytesIn, m.e.cfg.MaxBytesIn, nb)
			if m.ds != nil {
				m.ds.bytesIn.Add(int64(r))
			}
			m.e.spent(m.budget)
			return r, errBudget
		}
		r := reserve(&m.e.bytesIn, m.e.cfg.MaxBytesIn, n)
		if m.ds != nil {
			m.ds.bytesIn.Add(int64(r))
		}
		if r < n {
			m.e.hitLimit("bytes_in")
			return r, errByteLimit
		}
	}
	return n, err
}

// CloseWrite half-closes the host's side, as copy does at the program's
// end of file.
func (m *metered) CloseWrite() error {
	if cw, ok := m.Conn.(closeWriter); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (e *Egress) dial(ctx context.Context, dec decision) (net.Conn, error) {
	addr := dec.dial.String()
	if e.cfg.Dial != nil {
		return e.cfg.Dial(ctx, "tcp", addr)
	}
	if dec.internal {
		// host.sandbox.internal:PORT, listed in the policy: the one
		// loopback destination a name gets.
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	return e.dialer.DialContext(ctx, "tcp", addr)
}

func (e *Egress) track(f *flow) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return false
	}
	e.flows[f] = struct{}{}
	return true
}

func (e *Egress) untrack(f *flow) {
	e.mu.Lock()
	delete(e.flows, f)
	e.mu.Unlock()
	f.close()
}

// proxy copies both ways until both sides are done or a limit is hit.
func (e *Egress) proxy(f *flow, ds *destStat) {
	var outCount, inCount *atomic.Int64
	if ds != nil {
		outCount, inCount = &ds.bytesOut, &ds.bytesIn
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.copy(f.host, f.sandbox, &e.bytesOut, e.cfg.MaxBytesOut, outCount, "bytes_out", f)
	}()
	e.copy(f.sandbox, f.host, &e.bytesIn, e.cfg.MaxBytesIn, inCount, "bytes_in", f)
	<-done
}

type closeWriter interface{ CloseWrite() error }

// copy moves src to dst, counting into total (capped at max when max > 0)
// and per. At src's EOF it half-closes dst; on an error, or at the limit,
// it closes the whole flow.
func (e *Egress) copy(dst, src net.Conn, total *atomic.Int64, max int64, per *atomic.Int64, limit string, f *flow) {
	buf := make([]byte, copyBuf)
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			m := reserve(total, max, n)
			overBudget := false
			if b := f.budget; b != nil && m > 0 {
				if mb := reserve(&b.used, b.max.Load(), m); mb < m {
					total.Add(int64(mb - m))
					m, overBudget = mb, true
				}
			}
			if m > 0 {
				w, werr := dst.Write(buf[:m])
				if per != nil {
					per.Add(int64(w))
				}
				if w < m {
					total.Add(int64(w - m))
					if f.budget != nil {
						f.budget.used.Add(int64(w - m))
					}
				}
				if werr != nil {
					f.abort()
					return
				}
			}
			if overBudget {
				e.spent(f.budget)
				return
			}
			if m < n {
				e.hitLimit(limit)
				return
			}
			if n == len(buf) && n < copyBufBulk {
				buf = make([]byte, copyBufBulk) // a bulk transfer
			}
		}
		if rerr != nil {
			if errors.Is(rerr, io.EOF) {
				if cw, ok := dst.(closeWriter); ok {
					cw.CloseWrite()
					return
				}
			}
			f.abort()
			return
		}
	}
}

// reserve takes up to n bytes from what max leaves in total.
func reserve(total *atomic.Int64, max int64, n int) int {
	for {
		cur := total.Load()
		m := int64(n)
		if max > 0 {
			if cur >= max {
				return 0
			}
			m = min(m, max-cur)
		}
		if total.CompareAndSwap(cur, cur+m) {
			return int(m)
		}
	}
}

// hitLimit records a byte limit and closes every connection.
func (e *Egress) hitLimit(limit string) {
	e.mu.Lock()
	if e.limit == "" || e.limit == "connections" {
		e.limit = limit
	}
	flows := make([]*flow, 0, len(e.flows))
	for f := range e.flows {
		flows = append(flows, f)
	}
	e.mu.Unlock()
	for _, f := range flows {
		f.abort()
	}
}

// routed says whether the host routes to a (Config.routes; an egress not
// made by Start: every address).
func (e *Egress) routed(a netip.Addr) bool {
	return e.cfg.routes == nil || e.cfg.routes(a)
}

// hostRoutes says whether the host has a route to a: connecting a UDP
// socket looks the route up and sends nothing.
func hostRoutes(a netip.Addr) bool {
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, 53)))
	if err != nil {
		return false
	}
	c.Close()
	return true
}
