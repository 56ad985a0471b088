package egress

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// sandboxNet is a network namespace made for a test, as the engine would
// make a sandbox's: lo up, tun0 with SandboxAddr/PrefixLen and
// SandboxAddr6/PrefixLen6, default routes via GatewayAddr and
// GatewayAddr6, and (in a private mount namespace of the same thread)
// /etc/resolv.conf naming GatewayAddr. Code runs in it through do: one OS
// thread, locked and never unlocked, so Go discards it at the end.
type sandboxNet struct {
	// vnetHdr: tun0 has IFF_VNET_HDR and TUN_F_CSUM, as the engine makes
	// it (newSandboxNet); without, the egress checksums what it sends.
	vnetHdr bool
	tun     *os.File
	jobs    chan func()
	done    chan struct{}
}

func newSandboxNet(t testing.TB, mtu int) *sandboxNet {
	t.Helper()
	return newSandboxNetWith(t, mtu, true)
}

func newSandboxNetWith(t testing.TB, mtu int, vnetHdr bool) *sandboxNet {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces and TUN devices")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skipf("no TUN: %v", err)
	}
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver "+GatewayAddr+"\noptions timeout:2 attempts:2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	n := &sandboxNet{vnetHdr: vnetHdr, jobs: make(chan func()), done: make(chan struct{})}
	ready := make(chan error, 1)
	go func() {
		defer close(n.done)
		runtime.LockOSThread() // never unlocked: the thread dies with this goroutine
		if err := n.enter(resolv, mtu); err != nil {
			ready <- err
			return
		}
		ready <- nil
		for f := range n.jobs {
			f()
		}
	}()
	if err := <-ready; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		close(n.jobs)
		<-n.done
		n.tun.Close()
	})
	return n
}

func (n *sandboxNet) enter(resolv string, mtu int) error {
	if err := unix.Unshare(unix.CLONE_NEWNET | unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making / private: %w", err)
	}
	if err := unix.Mount(resolv, "/etc/resolv.conf", "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mounting resolv.conf: %w", err)
	}
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	ifr, err := unix.NewIfreq("tun0")
	if err != nil {
		unix.Close(fd)
		return err
	}
	flags := uint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if n.vnetHdr {
		flags |= unix.IFF_VNET_HDR
	}
	ifr.SetUint16(flags)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return fmt.Errorf("TUNSETIFF: %w", err)
	}
	if n.vnetHdr {
		if err := unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, unix.TUN_F_CSUM); err != nil {
			unix.Close(fd)
			return fmt.Errorf("TUNSETOFFLOAD: %w", err)
		}
	}
	n.tun = os.NewFile(uintptr(fd), "tun0")
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"link", "set", "tun0", "mtu", fmt.Sprint(mtu), "up"},
		{"addr", "add", fmt.Sprintf("%s/%d", SandboxAddr, PrefixLen), "dev", "tun0"},
		{"route", "add", "default", "via", GatewayAddr},
		{"-6", "addr", "add", fmt.Sprintf("%s/%d", SandboxAddr6, PrefixLen6), "dev", "tun0", "nodad"},
		{"-6", "route", "add", "default", "via", GatewayAddr6},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %q: %v: %s", args, err, out)
		}
	}
	return nil
}

// do runs f on the namespace's thread.
func (n *sandboxNet) do(f func()) {
	done := make(chan struct{})
	n.jobs <- func() { defer close(done); f() }
	<-done
}

// start starts cmd from inside the namespace.
func (n *sandboxNet) start(cmd *exec.Cmd) error {
	var err error
	n.do(func() { err = cmd.Start() })
	return err
}

// dial opens a TCP connection from inside the namespace (the socket is
// made on its thread; it can be used from any goroutine).
func (n *sandboxNet) dial(addr string, timeout time.Duration) (c net.Conn, err error) {
	n.do(func() {
		d := net.Dialer{Timeout: timeout}
		c, err = d.DialContext(context.Background(), "tcp", addr)
	})
	return c, err
}
