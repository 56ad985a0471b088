package egress

import (
	"net"
	"testing"
)

// serveTCP listens on the host's 127.0.0.1 until the test ends and hands
// each connection to handle, on a goroutine of its own, closing it after.
func serveTCP(t testing.TB, handle func(net.Conn)) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return ln
}
