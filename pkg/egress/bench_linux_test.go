package egress

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"
)

const benchBytes = 100 << 20

// benchServer serves, per connection, the command of its first byte: 'u'
// reads to the end and answers "ok", 'd' sends benchBytes, 'c' closes.
func benchServer(b *testing.B) net.Listener {
	return serveTCP(b, func(c net.Conn) {
		var cmd [1]byte
		if _, err := io.ReadFull(c, cmd[:]); err != nil {
			return
		}
		switch cmd[0] {
		case 'u':
			io.Copy(io.Discard, c)
			io.WriteString(c, "ok")
		case 'd':
			io.CopyN(c, zeros{}, benchBytes)
		}
	})
}

// BenchmarkEgressTCP moves 100 MB each way through the egress (a client
// in a namespace, its TUN, the netstack, the host's dial to 127.0.0.1)
// and directly over the host's loopback, and times connection set-up
// both ways; it reports throughputs, set-up times and their ratios.
// tun0 is made as the engine makes it (vnet: IFF_VNET_HDR, checksums left
// to the other side) or plainly (both sides checksumming).
func BenchmarkEgressTCP(b *testing.B) {
	for _, v := range []struct {
		mtu  int
		vnet bool
	}{{DefaultMTU, true}, {DefaultMTU, false}, {1500, true}} {
		name := fmt.Sprintf("mtu%d/plain", v.mtu)
		if v.vnet {
			name = fmt.Sprintf("mtu%d/vnet", v.mtu)
		}
		b.Run(name, func(b *testing.B) { benchEgress(b, v.mtu, v.vnet) })
	}
}

func benchEgress(b *testing.B, mtu int, vnet bool) {
	ln := benchServer(b)
	port := portOf(b, ln.Addr().String())
	n := newSandboxNetWith(b, mtu, vnet)
	e, err := Start(context.Background(), n.tun, Config{
		Policy:    mustPolicy(b, fmt.Sprintf("%s:%d", HostInternalName, port)),
		HostAddrs: []netip.Addr{},
		MTU:       mtu,
		MaxConns:  1024,
	})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	viaEgress := func() (net.Conn, error) {
		return n.dial(fmt.Sprintf("%s:%d", HostInternalAddr, port), 30*time.Second)
	}
	direct := func() (net.Conn, error) {
		return net.DialTimeout("tcp", ln.Addr().String(), 30*time.Second)
	}
	const conns = 50
	var upE, upD, downE, downD, connE, connD time.Duration
	for b.Loop() {
		upE += timed(b, viaEgress, upload)
		upD += timed(b, direct, upload)
		downE += timed(b, viaEgress, download)
		downD += timed(b, direct, download)
		for i := 0; i < conns; i++ {
			connE += timed(b, viaEgress, nil)
			connD += timed(b, direct, nil)
		}
	}
	mbps := func(d time.Duration) float64 { return float64(b.N) * benchBytes / 1e6 / d.Seconds() }
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N*conns) }
	b.ReportMetric(mbps(upE), "up-egress-MB/s")
	b.ReportMetric(mbps(upD), "up-direct-MB/s")
	b.ReportMetric(mbps(upE)/mbps(upD), "up-ratio")
	b.ReportMetric(mbps(downE), "down-egress-MB/s")
	b.ReportMetric(mbps(downD), "down-direct-MB/s")
	b.ReportMetric(mbps(downE)/mbps(downD), "down-ratio")
	b.ReportMetric(us(connE), "connect-egress-µs")
	b.ReportMetric(us(connD), "connect-direct-µs")
	b.ReportMetric(us(connE)/us(connD), "connect-ratio")
	s := e.Stats()
	if want := int64(b.N) * benchBytes; s.BytesOut < want || s.BytesIn < want {
		b.Errorf("egress counted %d out, %d in; want at least %d", s.BytesOut, s.BytesIn, want)
	}
}

// timed dials, runs f (nil: a connection round trip: dial, 'c', wait for
// the close) and returns how long it all took.
func timed(b *testing.B, dial func() (net.Conn, error), f func(*testing.B, net.Conn)) time.Duration {
	start := time.Now()
	c, err := dial()
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Minute))
	if f == nil {
		if _, err := c.Write([]byte{'c'}); err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, c); err != nil {
			b.Fatal(err)
		}
	} else {
		f(b, c)
	}
	return time.Since(start)
}

func upload(b *testing.B, c net.Conn) {
	if _, err := c.Write([]byte{'u'}); err != nil {
		b.Fatal(err)
	}
	if _, err := io.CopyN(c, zeros{}, benchBytes); err != nil {
		b.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	ok, err := io.ReadAll(c)
	if err != nil || string(ok) != "ok" {
		b.Fatalf("upload: %q %v", ok, err)
	}
}

func download(b *testing.B, c net.Conn) {
	if _, err := c.Write([]byte{'d'}); err != nil {
		b.Fatal(err)
	}
	got, err := io.Copy(io.Discard, c)
	if err != nil || got != benchBytes {
		b.Fatalf("download: %d bytes, %v", got, err)
	}
}

// BenchmarkStartClose: the cost a run with egress pays for its netstack.
func BenchmarkStartClose(b *testing.B) {
	n := newSandboxNet(b, DefaultMTU)
	policy := mustPolicy(b, "pypi.org:443")
	for b.Loop() {
		e, err := Start(context.Background(), n.tun, Config{Policy: policy, HostAddrs: []netip.Addr{}})
		if err != nil {
			b.Fatal(err)
		}
		e.Close()
	}
}
