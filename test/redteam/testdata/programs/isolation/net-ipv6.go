//go:build ignore

// IPv6 loopback egress: os.Args[1] is "[::1]:port" of a listener the test
// runs on the host's ::1 (or "none" when the host has no IPv6 loopback).
// The sandbox's ::1 is its own: the connection is refused.
package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"
)

func main() {
	addr := os.Args[1]
	if addr == "none" {
		fmt.Println("ipv6 SKIPPED: the host has no ::1")
		return
	}
	for _, a := range []string{addr, "[::ffff:127.0.0.1]" + addr[len("[::1]"):]} {
		c, err := net.DialTimeout("tcp", a, 2*time.Second)
		switch {
		case err == nil:
			c.Write([]byte("LEAK from sandbox\n"))
			c.Close()
			fmt.Println("tcp", a, "CONNECTED")
		case errors.Is(err, syscall.ECONNREFUSED):
			fmt.Println("tcp", a, "ECONNREFUSED")
		default:
			fmt.Println("tcp", a, "FAILED", err)
		}
	}
	u, err := net.Dial("udp", addr)
	if err == nil {
		u.Write([]byte("LEAK from sandbox"))
		u.Close()
		fmt.Println("udp6 sent")
	} else {
		fmt.Println("udp6 FAILED", err)
	}
}
