package gvisor

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/egress"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// TestNetwork: a run with a Spec.Network under gVisor reaches, through
// gVisor's own network stack and the egress that serves tun0, what the
// egress allows and nothing else, by address and by name; its sandbox's
// only device besides loopback is tun0. Cold and from the pool alike;
// the egress is stopped when the run is over, and the namespace goes.
func TestNetwork(t *testing.T) {
	g := testRunner(t)
	g.cfg.Pool = 1
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprint(c, "HTTP/1.0 200 OK\r\n\r\nfrom-the-host")
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	os.WriteFile(resolv, []byte("nameserver "+egress.GatewayAddr+"\noptions timeout:2 attempts:2\n"), 0o644)
	policy, err := egress.ParsePolicy([]string{fmt.Sprintf("%s:%d", egress.HostInternalName, port)})
	if err != nil {
		t.Fatal(err)
	}
	prog := fmt.Sprintf(`
import socket, urllib.request
print(sorted(n for _, n in socket.if_nameindex()))
print(urllib.request.urlopen("http://%s:%d/", timeout=10).read().decode())
for port in (%d, %d):
    try:
        socket.create_connection(("%s", port), timeout=10)
        print("connected", port == %d)
    except OSError:
        print("refused")
`, egress.HostInternalName, port, port, port+1, egress.HostInternalAddr, port)
	for _, round := range []string{"cold", "from the pool"} {
		s := spec("/usr/bin/python3", "-c", prog)
		s.Mounts = append(append([]sandbox.Mount{}, s.Mounts...), sandbox.Mount{Source: resolv, Target: "/etc/resolv.conf"})
		var e *egress.Egress
		var detached atomic.Bool
		s.Network = &sandbox.Network{
			Address: netip.PrefixFrom(netip.MustParseAddr(egress.SandboxAddr), egress.PrefixLen),
			Gateway: netip.MustParseAddr(egress.GatewayAddr),
			MTU:     egress.DefaultMTU,
			Attach: func(tun *os.File) (func(), error) {
				var err error
				e, err = egress.Start(context.Background(), tun, egress.Config{Policy: policy})
				tun.Close()
				return func() { detached.Store(true); e.Close() }, err
			},
		}
		if round == "from the pool" {
			deadline := time.Now().Add(time.Minute)
			for g.readyFor(s) < 1 {
				if time.Now().After(deadline) {
					t.Fatal("no networked sandbox booted ahead")
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		res, err := g.Run(context.Background(), s)
		if err != nil {
			t.Fatalf("%s: %v", round, err)
		}
		want := "['lo', 'tun0']\nfrom-the-host\nconnected True\nrefused\n"
		if string(res.Stdout) != want || res.ExitCode != 0 {
			t.Errorf("%s: exit %d stdout %q stderr %q", round, res.ExitCode, res.Stdout, res.Stderr)
		}
		if !detached.Load() {
			t.Errorf("%s: the network was not detached after the run", round)
		} else if st := e.Stats(); st.Allowed < 2 || st.Denied < 1 {
			t.Errorf("%s: the egress saw %d allowed, %d denied", round, st.Allowed, st.Denied)
		}
	}
	g.Close()
	if mounts, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mounts), g.runs) {
		t.Errorf("a network namespace of a run left mounted under %s", g.runs)
	}
}
