package egress

import (
	"context"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
)

// pingPy sends one ICMP echo request to argv[1] and says whether a reply
// came within 2 s.
const pingPy = `
import socket, struct, sys
def csum(b):
    s = sum(struct.unpack("!%dH" % (len(b)//2), b))
    s = (s >> 16) + (s & 0xffff); s += s >> 16
    return (~s) & 0xffff
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
s.settimeout(2)
h = struct.pack("!BBHHH", 8, 0, 0, 1, 1) + b"abcdefgh"
h = h[:2] + struct.pack("!H", csum(h)) + h[4:]
s.sendto(h, (sys.argv[1], 0))
try:
    d, a = s.recvfrom(1500); print("reply", a, d[20])
except Exception as e:
    print("no reply", e)
`

// TestICMPNotForwarded: an echo request to an outside address gets no
// answer (only the gateway's own address answers pings).
func TestICMPNotForwarded(t *testing.T) {
	n := newSandboxNet(t, DefaultMTU)
	e, err := Start(context.Background(), n.tun, Config{Policy: mustPolicy(t, "192.0.2.0/24"), HostAddrs: []netip.Addr{}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for addr, want := range map[string]string{"192.0.2.1": "no reply", GatewayAddr: "reply"} {
		cmd := exec.Command(python, "-c", pingPy, addr)
		var out []byte
		n.do(func() { out, err = cmd.CombinedOutput() })
		if err != nil || !strings.HasPrefix(string(out), want) {
			t.Errorf("ping %s: %v %s", addr, err, out)
		}
	}
	if s := e.Stats(); len(s.Destinations) != 0 {
		t.Errorf("ICMP recorded destinations: %+v", s)
	}
}

// ping6Py sends one ICMPv6 echo request to argv[1] (the kernel sums it)
// and says whether its reply came within 2 s.
const ping6Py = `
import socket, struct, sys, time
s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
s.sendto(struct.pack("!BBHHH", 128, 0, 0, 7, 1) + b"abcdefgh", (sys.argv[1], 0))
deadline = time.monotonic() + 2
try:
    while True:
        s.settimeout(max(deadline - time.monotonic(), 0.001))
        d, a = s.recvfrom(1500)
        if d[0] == 129 and d[4:6] == b"\0\7":
            print("reply", a[0]); break
except Exception as e:
    print("no reply", e)
`

// TestICMPv6NotForwarded: as in IPv4, an echo request to an outside IPv6
// address gets no answer, and only the gateway's own address answers.
func TestICMPv6NotForwarded(t *testing.T) {
	n := newSandboxNet(t, DefaultMTU)
	e, err := Start(context.Background(), n.tun, Config{Policy: mustPolicy(t, "3ffe::/16"), HostAddrs: []netip.Addr{}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for addr, want := range map[string]string{"3ffe::1": "no reply", GatewayAddr6: "reply " + GatewayAddr6} {
		cmd := exec.Command(python, "-c", ping6Py, addr)
		var out []byte
		n.do(func() { out, err = cmd.CombinedOutput() })
		if err != nil || !strings.HasPrefix(string(out), want) {
			t.Errorf("ping %s: %v %s", addr, err, out)
		}
	}
	if s := e.Stats(); len(s.Destinations) != 0 {
		t.Errorf("ICMPv6 recorded destinations: %+v", s)
	}
}
