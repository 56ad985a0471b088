package sandbox

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestNetworkDevice: a run with a Spec.Network has tun0 with its address,
// MTU and default route; what it sends goes to the host's end, which
// Attach got before the program started and which detach releases after
// the run; the program cannot change the device; such a sandbox serves
// one run.
func TestNetworkDevice(t *testing.T) {
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skipf("no TUN devices on this host: %v", err)
	}
	var mu sync.Mutex
	var packets [][]byte
	attached, detached := 0, 0
	readDone := make(chan struct{})
	n := &Network{Address: netip.MustParsePrefix("10.77.0.2/24"), Gateway: netip.MustParseAddr("10.77.0.1"), MTU: 1400,
		Attach: func(tun *os.File) (func(), error) {
			attached++
			go func() {
				defer close(readDone)
				buf := make([]byte, 2048)
				for {
					n, err := tun.Read(buf)
					if err != nil {
						return
					}
					mu.Lock()
					packets = append(packets, append([]byte(nil), buf[:n]...))
					mu.Unlock()
				}
			}()
			return func() { detached++; tun.Close() }, nil
		}}
	code := `
import fcntl, socket, struct
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
ifr = fcntl.ioctl(s.fileno(), 0x8921, struct.pack('16s16x', b'tun0'))  # SIOCGIFMTU
print(struct.unpack_from('i', ifr, 16)[0])
for line in open('/proc/net/route').read().splitlines()[1:]:
    f = line.split()
    if f[0] == 'tun0' and f[1] == '00000000':
        print('default', f[2])
for line in open('/proc/net/ipv6_route').read().splitlines():
    f = line.split()
    if f[-1] == 'tun0' and f[0] == '0' * 32:
        print('default IPv6 route')  # none without Address6
s.sendto(b'hello-tun', ('10.77.0.1', 53))
try:
    fcntl.ioctl(s.fileno(), 0x8914, struct.pack('16sH14x', b'tun0', 0))  # SIOCSIFFLAGS: down
    print('changed the device')
except OSError as e:
    print('cannot change the device', e.errno)
`
	res, err := testEngine(t).Run(context.Background(), withDefaults(&Spec{Args: []string{"/usr/bin/python3", "-c", code}, Network: n}))
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
	}
	// 10.77.0.1 in /proc/net/route's little-endian hex.
	if want := "1400\ndefault 01004D0A\ncannot change the device 1\n"; string(res.Stdout) != want {
		t.Errorf("inside: %q, want %q", res.Stdout, want)
	}
	testEngine(t).Quiesce()
	select {
	case <-readDone:
	case <-time.After(30 * time.Second):
		t.Fatal("the host's end was not closed after the run")
	}
	if attached != 1 || detached != 1 {
		t.Errorf("attached %d, detached %d times", attached, detached)
	}
	mu.Lock()
	defer mu.Unlock()
	var found bool
	for _, p := range packets {
		// A virtio_net_hdr (IFF_VNET_HDR), then IPv4, UDP, to
		// 10.77.0.1:53, the payload.
		if len(p) < 10 {
			continue
		}
		p = p[10:]
		if len(p) > 28 && p[0]>>4 == 4 && p[9] == 17 && bytes.Equal(p[16:20], []byte{10, 77, 0, 1}) && p[22] == 0 && p[23] == 53 && bytes.HasSuffix(p, []byte("hello-tun")) {
			found = true
		}
	}
	if !found {
		t.Errorf("the datagram did not reach the host's end (%d packets)", len(packets))
	}
	if poolKey(&initConfig{Network: true}) != "" {
		t.Error("a sandbox with a network device would serve again")
	}
}

func TestNetworkValidate(t *testing.T) {
	attach := func(*os.File) (func(), error) { return func() {}, nil }
	for _, tc := range []struct {
		n    Network
		want string
	}{
		{Network{Address: netip.MustParsePrefix("fd00::2/64"), Gateway: netip.MustParseAddr("fd00::1"), Attach: attach}, "IPv4"},
		{Network{Address: netip.MustParsePrefix("10.0.0.2/24"), Gateway: netip.MustParseAddr("10.0.1.1"), Attach: attach}, "gateway"},
		{Network{Address: netip.MustParsePrefix("10.0.0.2/24"), Gateway: netip.MustParseAddr("10.0.0.2"), Attach: attach}, "gateway"},
		{Network{Address: netip.MustParsePrefix("10.0.0.2/24"), Gateway: netip.MustParseAddr("10.0.0.1"), MTU: 100, Attach: attach}, "MTU"},
		{Network{Address: netip.MustParsePrefix("10.0.0.2/24"), Gateway: netip.MustParseAddr("10.0.0.1")}, "Attach"},
		{Network{Address: netip.MustParsePrefix("10.0.0.2/24"), Gateway: netip.MustParseAddr("10.0.0.1"), Gateway6: netip.MustParseAddr("fd00::1"), Attach: attach}, "IPv6 address"},
		{Network{Address: netip.MustParsePrefix("10.0.0.2/24"), Gateway: netip.MustParseAddr("10.0.0.1"), Address6: netip.MustParsePrefix("10.0.1.2/24"), Gateway6: netip.MustParseAddr("10.0.1.1"), Attach: attach}, "IPv6 address"},
		{Network{Address: netip.MustParsePrefix("10.0.0.2/24"), Gateway: netip.MustParseAddr("10.0.0.1"), Address6: netip.MustParsePrefix("fd00::2/64"), Attach: attach}, "IPv6 gateway"},
		{Network{Address: netip.MustParsePrefix("10.0.0.2/24"), Gateway: netip.MustParseAddr("10.0.0.1"), Address6: netip.MustParsePrefix("fd00::2/64"), Gateway6: netip.MustParseAddr("fd01::1"), Attach: attach}, "IPv6 gateway"},
		{Network{Address: netip.MustParsePrefix("10.0.0.2/24"), Gateway: netip.MustParseAddr("10.0.0.1"), Address6: netip.MustParsePrefix("fd00::2/64"), Gateway6: netip.MustParseAddr("fd00::1"), MTU: 1000, Attach: attach}, "MTU"},
	} {
		_, err := testEngine(t).Run(context.Background(), withDefaults(&Spec{Args: []string{"true"}, Network: &tc.n}))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error about %s", tc.n, err, tc.want)
		}
	}
}

// TestNetworkDeviceIPv6: a run whose Network has Address6 and Gateway6 has
// them on tun0, the address usable at once (no duplicate address
// detection), and a default IPv6 route via the gateway: a datagram it
// sends to the gateway at once reaches the host's end from its address.
func TestNetworkDeviceIPv6(t *testing.T) {
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skipf("no TUN devices on this host: %v", err)
	}
	got := make(chan []byte, 1)
	n := &Network{Address: netip.MustParsePrefix("10.77.0.2/24"), Gateway: netip.MustParseAddr("10.77.0.1"),
		Address6: netip.MustParsePrefix("fd5b:77::2/64"), Gateway6: netip.MustParseAddr("fd5b:77::1"), MTU: 1400,
		Attach: func(tun *os.File) (func(), error) {
			go func() {
				buf := make([]byte, 2048)
				for {
					n, err := tun.Read(buf)
					if err != nil {
						return
					}
					// A virtio_net_hdr (10 bytes), IPv6 (40), UDP (8).
					if p := buf[10:n]; len(p) > 48 && p[0]>>4 == 6 && p[6] == 17 && bytes.HasSuffix(p, []byte("hello-v6")) {
						select {
						case got <- bytes.Clone(p):
						default:
						}
					}
				}
			}()
			return func() { tun.Close() }, nil
		}}
	code := `
import socket
for line in open('/proc/net/if_inet6').read().splitlines():
    f = line.split()
    if f[5] == 'tun0' and f[3] == '00':
        print('address', f[0], int(f[2], 16), 'tentative' if int(f[4], 16) & 0x40 else 'usable')
for line in open('/proc/net/ipv6_route').read().splitlines():
    f = line.split()
    if f[-1] == 'tun0' and f[0] == '0' * 32 and f[1] == '00':
        print('default via', f[4])
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.sendto(b'hello-v6', ('fd5b:77::1', 53))
`
	res, err := testEngine(t).Run(context.Background(), withDefaults(&Spec{Args: []string{"/usr/bin/python3", "-c", code}, Network: n}))
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
	}
	if want := "address fd5b0077000000000000000000000002 64 usable\ndefault via fd5b0077000000000000000000000001\n"; string(res.Stdout) != want {
		t.Errorf("inside: %q, want %q", res.Stdout, want)
	}
	select {
	case p := <-got:
		if src, dst := netip.AddrFrom16([16]byte(p[8:24])), netip.AddrFrom16([16]byte(p[24:40])); src != n.Address6.Addr() || dst != n.Gateway6 || p[42] != 0 || p[43] != 53 {
			t.Errorf("the datagram went from %v to %v port %d", src, dst, int(p[42])<<8|int(p[43]))
		}
	case <-time.After(30 * time.Second):
		t.Error("the IPv6 datagram did not reach the host's end")
	}
}

// tunTap is a Network's host end for tests: it counts attaches and
// detaches and keeps the UDP payloads that reach it.
type tunTap struct {
	mu                 sync.Mutex
	attached, detached int
	payloads           []string
}

func (tt *tunTap) network() *Network {
	return &Network{Address: netip.MustParsePrefix("10.77.0.2/24"), Gateway: netip.MustParseAddr("10.77.0.1"),
		Attach: func(tun *os.File) (func(), error) {
			tt.mu.Lock()
			tt.attached++
			tt.mu.Unlock()
			go func() {
				buf := make([]byte, 2048)
				for {
					n, err := tun.Read(buf)
					if err != nil {
						return
					}
					// A virtio_net_hdr (10 bytes), IPv4 (20), UDP (8).
					if n > 38 && buf[10]>>4 == 4 && buf[19] == 17 {
						tt.mu.Lock()
						tt.payloads = append(tt.payloads, string(buf[38:n]))
						tt.mu.Unlock()
					}
				}
			}()
			return func() {
				tt.mu.Lock()
				tt.detached++
				tt.mu.Unlock()
				tun.Close()
			}, nil
		}}
}

// counts is how often the tap was attached and detached, and whether a
// payload holding s reached it.
func (tt *tunTap) counts(s string) (attached, detached int, got bool) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	for _, p := range tt.payloads {
		got = got || strings.Contains(p, s)
	}
	return tt.attached, tt.detached, got
}

// TestDetachNetwork: a detachable run may have a network: Detach stops
// serving its device (the device goes with it), and its adopter gives it a
// new one (Adopted.AttachNetwork) through which what the program sends
// reaches the adopter's end; a second device is refused; the run's end
// detaches it.
func TestDetachNetwork(t *testing.T) {
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skipf("no TUN devices on this host: %v", err)
	}
	e := detachEngine(t, 6)
	first, second := &tunTap{}, &tunTap{}
	code := `
import socket, time
n = 0
while True:
    n += 1
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.sendto(b'ping-%d' % n, ('10.77.0.1', 53))
        s.close()
    except OSError:
        pass
    time.sleep(0.05)
`
	spec := withDefaults(&Spec{Args: []string{"/usr/bin/python3", "-c", code}, Detachable: true, Stream: true, Network: first.network()})
	p, err := e.Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if !waitUntil(30*time.Second, func() bool { _, _, got := first.counts("ping-"); return got }) {
		t.Fatal("nothing reached the first device")
	}
	d, err := p.Detach()
	if err != nil {
		t.Fatal(err)
	}
	killAtEnd(t, e, d)
	if a, dt, _ := first.counts(""); a != 1 || dt != 1 {
		t.Fatalf("first device: attached %d, detached %d times; want 1 and 1 once detached", a, dt)
	}
	a, err := e.Adopt(roundTrip(t, d))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.AttachNetwork(second.network()); err != nil {
		t.Fatal(err)
	}
	if !waitUntil(30*time.Second, func() bool { _, _, got := second.counts("ping-"); return got }) {
		t.Fatal("nothing reached the adopter's device")
	}
	third := &tunTap{}
	if err := a.AttachNetwork(third.network()); err == nil {
		t.Error("a second device was attached")
	}
	a.Kill()
	awaitEnd(t, a)
	if at, dt, _ := second.counts(""); at != 1 || dt != 1 {
		t.Errorf("adopter's device: attached %d, detached %d times; want 1 and 1 once the run is over", at, dt)
	}
	if at, dt, _ := third.counts(""); at != dt {
		t.Errorf("refused device: attached %d, detached %d times", at, dt)
	}
	if err := a.AttachNetwork(third.network()); !errors.Is(err, ErrRunEnded) {
		t.Errorf("attach after the end: %v, want ErrRunEnded", err)
	}
}
