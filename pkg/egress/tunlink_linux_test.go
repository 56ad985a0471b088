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
)

// TestTUNData: bytes cross the egress intact both ways, in TCP segments
// of every size, over tun0 made as the engine makes it (IFF_VNET_HDR:
// neither kernel nor netstack checksums the segments, the virtio header
// says so) and made plainly (fdbased, both checksumming). A header
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
