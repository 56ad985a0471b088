package egress

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	"gvisor.dev/gvisor/pkg/waiter"

	"github.com/sandbox-run/sandbox-run/pkg/netpolicy"
)

const (
	dnsTTL         = 60
	dnsMaxAnswers  = 8
	dnsParallel    = 32
	resolveTimeout = 5 * time.Second
	cacheFor       = 30 * time.Second
	dnsTCPIdle     = 10 * time.Second
)

// serveDNS answers the sandbox's queries over UDP to c, the endpoint of
// GatewayAddr:53 or GatewayAddr6:53.
func (e *Egress) serveDNS(c *gonet.UDPConn) {
	defer e.wg.Done()
	sem := make(chan struct{}, dnsParallel)
	buf := make([]byte, 4096)
	for {
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			if e.ctx.Err() != nil {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		q := bytes.Clone(buf[:n])
		select {
		case sem <- struct{}{}:
		default:
			continue // too many lookups in flight: the client retries
		}
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			defer func() { <-sem }()
			if resp := e.answer(q); resp != nil {
				c.WriteTo(resp, from)
			}
		}()
	}
}

// serveDNSTCP answers length-prefixed queries on a TCP connection to
// GatewayAddr:53 or GatewayAddr6:53.
func (e *Egress) serveDNSTCP(r *tcp.ForwarderRequest) {
	var wq waiter.Queue
	ep, terr := r.CreateEndpoint(&wq)
	if terr != nil {
		r.Complete(true)
		return
	}
	r.Complete(false)
	f := &flow{sandbox: gonet.NewTCPConn(&wq, ep), ep: ep}
	if !e.track(f) {
		f.close()
		return
	}
	defer e.untrack(f)
	c := f.sandbox
	for {
		c.SetReadDeadline(time.Now().Add(dnsTCPIdle))
		var l [2]byte
		if _, err := io.ReadFull(c, l[:]); err != nil {
			return
		}
		q := make([]byte, binary.BigEndian.Uint16(l[:]))
		if _, err := io.ReadFull(c, q); err != nil {
			return
		}
		resp := e.answer(q)
		if resp == nil {
			return
		}
		out := binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(resp)), uint16(len(resp)))
		if _, err := c.Write(append(out, resp...)); err != nil {
			return
		}
	}
}

// answer builds the reply to one query (nil: drop it).
func (e *Egress) answer(query []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil || h.Response {
		return nil
	}
	rh := dnsmessage.Header{ID: h.ID, Response: true, OpCode: h.OpCode, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	q, err := p.Question()
	if err != nil {
		rh.RCode = dnsmessage.RCodeFormatError
		return buildDNS(rh, nil, nil)
	}
	if h.OpCode != 0 {
		rh.RCode = dnsmessage.RCodeNotImplemented
		return buildDNS(rh, &q, nil)
	}
	name := netpolicy.CanonicalName(q.Name.String())
	if q.Class != dnsmessage.ClassINET || !e.policy().AllowsName(name) {
		e.record("dns", name, netip.Addr{}, 0, false, "name not in the allow-list")
		rh.RCode = dnsmessage.RCodeNameError
		return buildDNS(rh, &q, nil)
	}
	var family func(netip.Addr) bool
	switch q.Type {
	case dnsmessage.TypeA:
		family = netip.Addr.Is4
	case dnsmessage.TypeAAAA:
		family = netip.Addr.Is6
	default:
		// The other types of an allowed name get an empty answer (not
		// recorded: the A and AAAA queries beside them are).
		return buildDNS(rh, &q, nil)
	}
	if name == HostInternalName {
		// IPv4 only: AAAA gets an empty answer.
		e.record("dns", name, netip.Addr{}, 0, true, "")
		if q.Type == dnsmessage.TypeAAAA {
			return buildDNS(rh, &q, nil)
		}
		return buildDNS(rh, &q, []netip.Addr{hostInternalIP})
	}

	addrs, err := e.resolve(name)
	if err != nil {
		ds := e.record("dns", name, netip.Addr{}, 0, true, "")
		e.setError(ds, err)
		var de *net.DNSError
		if errors.As(err, &de) && de.IsNotFound {
			rh.RCode = dnsmessage.RCodeNameError
		} else {
			rh.RCode = dnsmessage.RCodeServerFailure
		}
		return buildDNS(rh, &q, nil)
	}
	// The name is judged by all its addresses, of both families: one
	// that has only denied ones does not exist; one with none of the
	// query's family that may be reached gets an empty answer.
	var ok []netip.Addr
	usable, why := false, ""
	for _, a := range addrs {
		a = a.Unmap().WithZone("")
		if c := e.checker.refusal(a); c != "" && !e.policy().CoversAddr(a) {
			if why == "" {
				why = "resolves only to denied addresses (" + a.String() + " is " + c + ")"
			}
			continue
		}
		usable = true
		// An IPv6 address the host has no route to is not given: a
		// host without IPv6 leaves its sandboxes' clients to IPv4.
		if family(a) && len(ok) < dnsMaxAnswers && (a.Is4() || e.routed(a)) {
			ok = append(ok, a)
		}
	}
	if !usable && why != "" {
		e.record("dns", name, netip.Addr{}, 0, false, why)
		rh.RCode = dnsmessage.RCodeNameError
		return buildDNS(rh, &q, nil)
	}
	if len(ok) == 0 {
		e.record("dns", name, netip.Addr{}, 0, true, "")
		return buildDNS(rh, &q, nil)
	}

	e.mu.Lock()
	for _, a := range ok {
		names, known := e.names[a]
		if !known && len(e.names) >= maxNames {
			continue
		}
		found := false
		for _, n := range names {
			found = found || n == name
		}
		if !found {
			e.names[a] = append(names, name)
		}
	}
	e.recordLocked("dns", name, netip.Addr{}, 0, true, "")
	e.mu.Unlock()
	return buildDNS(rh, &q, ok)
}

// resolve looks name up on the host, caching the answer briefly.
func (e *Egress) resolve(name string) ([]netip.Addr, error) {
	e.mu.Lock()
	c, ok := e.cache[name]
	e.mu.Unlock()
	if ok && time.Since(c.at) < cacheFor {
		return c.addrs, c.err
	}
	ctx, cancel := context.WithTimeout(e.ctx, resolveTimeout)
	defer cancel()
	addrs, err := e.cfg.Resolver(ctx, name)
	if err == nil || isNotFound(err) {
		e.mu.Lock()
		if len(e.cache) < maxNames {
			e.cache[name] = cached{addrs: addrs, err: err, at: time.Now()}
		}
		e.mu.Unlock()
	}
	return addrs, err
}

func isNotFound(err error) bool {
	var de *net.DNSError
	return errors.As(err, &de) && de.IsNotFound
}

func buildDNS(h dnsmessage.Header, q *dnsmessage.Question, addrs []netip.Addr) []byte {
	b := dnsmessage.NewBuilder(make([]byte, 0, 512), h)
	b.EnableCompression()
	if q != nil {
		if err := b.StartQuestions(); err != nil {
			return nil
		}
		if err := b.Question(*q); err != nil {
			return nil
		}
		if err := b.StartAnswers(); err != nil {
			return nil
		}
		for _, a := range addrs {
			rh := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: dnsTTL}
			var err error
			if a.Is4() {
				err = b.AResource(rh, dnsmessage.AResource{A: a.As4()})
			} else {
				err = b.AAAAResource(rh, dnsmessage.AAAAResource{AAAA: a.As16()})
			}
			if err != nil {
				return nil
			}
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}
