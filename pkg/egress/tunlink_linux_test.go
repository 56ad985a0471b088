package egress

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestTUNData: bytes cross the egress intact both ways, in TCP segments
// of every size, over tun0 made as the engine makes it (IFF_VNET_HDR:
// neither kernel nor netstack checksums the segments, the virtio header
// says so) and made plainly (both checksumming). A header
// mistake shows here as lost or corrupted data, or a stall.
func TestTUNData(t *testing.T) {
	const size = 8 << 20
	data := make([]byte, size)
	rng := rand.NewChaCha8([32]byte{7})
	rng.Read(data)
	want := sha256.Sum256(data)

	// The server: 'u' reads to EOF and answers the digest; 'd' sends
	// data and closes.
	ln := serveTCP(t, func(c net.Conn) {
		var op [1]byte
		if _, err := io.ReadFull(c, op[:]); err != nil {
			return
		}
		switch op[0] {
		case 'u':
			h := sha256.New()
			io.Copy(h, c)
			c.Write(h.Sum(nil))
		case 'd':
			c.Write(data)
		}
	})
	port := portOf(t, ln.Addr().String())

	for _, vnet := range []bool{true, false} {
		t.Run(fmt.Sprintf("vnet=%v", vnet), func(t *testing.T) {
			n := newSandboxNetWith(t, DefaultMTU, vnet)
			e, err := Start(context.Background(), n.tun, Config{
				Policy:    mustPolicy(t, fmt.Sprintf("%s:%d", HostInternalName, port)),
				HostAddrs: []netip.Addr{},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			dial := func() net.Conn {
				c, err := n.dial(fmt.Sprintf("%s:%d", HostInternalAddr, port), 10*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				c.SetDeadline(time.Now().Add(time.Minute))
				return c
			}

			// Upload in writes of odd sizes, small and large.
			c := dial()
			c.Write([]byte{'u'})
			for off, i := 0, 0; off < size; i++ {
				m := min([]int{1, 100, 1460, 1461, 9000, 65536, 300000}[i%7], size-off)
				if _, err := c.Write(data[off : off+m]); err != nil {
					t.Fatal(err)
				}
				off += m
			}
			c.(*net.TCPConn).CloseWrite()
			got, err := io.ReadAll(c)
			c.Close()
			if err != nil || !bytes.Equal(got, want[:]) {
				t.Errorf("upload: the server saw other bytes (digest %x, err %v)", got, err)
			}

			c = dial()
			c.Write([]byte{'d'})
			h := sha256.New()
			m, err := io.Copy(h, c)
			c.Close()
			if err != nil || m != size || !bytes.Equal(h.Sum(nil), want[:]) {
				t.Errorf("download: %d bytes of %d, intact %v, err %v", m, size, bytes.Equal(h.Sum(nil), want[:]), err)
			}
			if s := e.Stats(); s.BytesOut < size || s.BytesIn < size {
				t.Errorf("counted %d out, %d in", s.BytesOut, s.BytesIn)
			}
		})
	}
}

// TestCloseUnderTraffic: Close ends while the sandbox keeps sending (new
// connections and datagrams arrive as the stack goes away). netstack
// removes the NIC holding its own lock, which a packet being delivered
// may wait for; a reader still running then would hold Close forever (it
// did so in CI once).
func TestCloseUnderTraffic(t *testing.T) {
	ln := serveTCP(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	port := portOf(t, ln.Addr().String())
	for _, vnet := range []bool{true, false} {
		n := newSandboxNetWith(t, DefaultMTU, vnet)
		for round := 0; round < 20; round++ {
			e, err := Start(context.Background(), n.tun, Config{
				Policy:    mustPolicy(t, fmt.Sprintf("%s:%d", HostInternalName, port)),
				HostAddrs: []netip.Addr{},
			})
			if err != nil {
				t.Fatal(err)
			}
			// Sockets made in the sandbox's namespace keep it: they are
			// connected from this goroutine while Close runs.
			var fds []int
			n.do(func() {
				for i := 0; i < 64; i++ {
					typ := unix.SOCK_STREAM
					if i%2 == 1 {
						typ = unix.SOCK_DGRAM
					}
					fd, err := unix.Socket(unix.AF_INET, typ|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
					if err != nil {
						t.Error(err)
						return
					}
					fds = append(fds, fd)
				}
			})
			to := &unix.SockaddrInet4{Port: int(port), Addr: netip.MustParseAddr(HostInternalAddr).As4()}
			other := &unix.SockaddrInet4{Port: 9, Addr: [4]byte{192, 0, 2, 1}} // denied
			closed := make(chan struct{})
			go func() {
				defer close(closed)
				e.Close()
			}()
			for i, fd := range fds {
				if i%2 == 0 {
					unix.Connect(fd, to)
				} else {
					unix.Sendto(fd, []byte("x"), 0, other)
				}
			}
			select {
			case <-closed:
			case <-time.After(10 * time.Minute):
				t.Fatalf("vnet=%v round %d: Close did not return", vnet, round)
			}
			for _, fd := range fds {
				unix.Close(fd)
			}
		}
	}
}
