package sandbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// tunName is the network device a run with a Spec.Network has.
const tunName = "tun0"

// attachTUN makes tun0 in the network namespace of the sandbox whose PID 1
// is pid (our child: its pid is its own), as attachTUNAt does.
func attachTUN(pid int, n *Network) (*os.File, error) {
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	return attachTUNAt(int(ns.Fd()), n)
}

// attachTUNAt makes tun0 in the network namespace ns, configured as n says
// (addresses, MTU, up, default routes via n.Gateway and n.Gateway6), and
// returns the host's end of it. The host does it, not PID 1: from a
// thread of its own that enters the namespace, so that the sandbox's
// processes never hold the device's descriptor nor the rights to change
// it (the program has no capability there; PID 1 never sees the
// descriptor).
func attachTUNAt(ns int, n *Network) (*os.File, error) {
	return onThrowawayThread(func() (*os.File, error) {
		if err := unix.Setns(ns, unix.CLONE_NEWNET); err != nil {
			return nil, fmt.Errorf("enter the network namespace: %w", err)
		}
		return makeTUN(n)
	})
}

// onThrowawayThread runs f on an OS thread of its own, which f may move
// into other namespaces: it is never unlocked, so Go ends it with its
// goroutine instead of reusing it.
func onThrowawayThread(f func() (*os.File, error)) (*os.File, error) {
	type result struct {
		f   *os.File
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		f, err := f()
		done <- result{f, err}
	}()
	r := <-done
	return r.f, r.err
}

// makeTUN makes and configures tun0 in the calling thread's network
// namespace.
func makeTUN(n *Network) (_ *os.File, err error) {
	fd, err := openTUN()
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			unix.Close(fd)
		}
	}()
	sock, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(sock)
	set := func(name string, req uint, fill func(*unix.Ifreq) error) error {
		ifr, err := unix.NewIfreq(tunName)
		if err == nil {
			err = fill(ifr)
		}
		if err == nil {
			err = unix.IoctlIfreq(sock, req, ifr)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
	mtu := n.MTU
	if mtu == 0 {
		mtu = 1500
	}
	mask := netip.AddrFrom4(maskOf(n.Address.Bits()))
	steps := []struct {
		name string
		req  uint
		fill func(*unix.Ifreq) error
	}{
		{"MTU", unix.SIOCSIFMTU, func(r *unix.Ifreq) error { r.SetUint32(uint32(mtu)); return nil }},
		{"address", unix.SIOCSIFADDR, func(r *unix.Ifreq) error { return r.SetInet4Addr(n.Address.Addr().AsSlice()) }},
		{"netmask", unix.SIOCSIFNETMASK, func(r *unix.Ifreq) error { return r.SetInet4Addr(mask.AsSlice()) }},
		{"up", unix.SIOCSIFFLAGS, func(r *unix.Ifreq) error { r.SetUint16(unix.IFF_UP | unix.IFF_RUNNING); return nil }},
	}
	for _, s := range steps {
		if err := set(s.name, s.req, s.fill); err != nil {
			return nil, err
		}
	}
	if err := addDefaultRoute(n.Gateway, 0); err != nil {
		return nil, fmt.Errorf("default route: %w", err)
	}
	if n.hasIPv6() {
		if err := addIPv6(n); err != nil {
			return nil, err
		}
	}
	return tunFile(fd)
}

// addIPv6 gives tun0, up, n's IPv6 address, without duplicate address
// detection (the link has two ends, both configured: the address is
// usable at once), and a default route via n.Gateway6. Where the kernel
// has no IPv6, or has it disabled in the namespace, tun0 keeps IPv4 only.
func addIPv6(n *Network) error {
	index, err := tunIndex()
	if err != nil {
		return err
	}
	ifa := unix.IfAddrmsg{Family: unix.AF_INET6, Prefixlen: uint8(n.Address6.Bits()), Flags: unix.IFA_F_NODAD,
		Scope: unix.RT_SCOPE_UNIVERSE, Index: uint32(index)}
	addr := n.Address6.Addr().As16()
	body := append((*[unix.SizeofIfAddrmsg]byte)(unsafe.Pointer(&ifa))[:], rtAttr(unix.IFA_ADDRESS, addr[:])...)
	err = rtnetlink(unix.RTM_NEWADDR, unix.NLM_F_CREATE|unix.NLM_F_EXCL, body)
	switch {
	case errors.Is(err, unix.EAFNOSUPPORT), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EACCES):
		// No IPv6 (ipv6.disable=1), or disable_ipv6 set: IPv4 only.
		return nil
	case err != nil:
		return fmt.Errorf("IPv6 address: %w", err)
	}
	if err := addDefaultRoute(n.Gateway6, index); err != nil {
		return fmt.Errorf("default IPv6 route: %w", err)
	}
	return nil
}

// openTUN opens the host's end of tun0 in the calling thread's network
// namespace: the device made, or the one kept there (KeepTUN).
func openTUN() (_ int, err error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer func() {
		if err != nil {
			unix.Close(fd)
		}
	}()
	ifr, err := unix.NewIfreq(tunName)
	if err != nil {
		return -1, err
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI | unix.IFF_VNET_HDR)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		return -1, fmt.Errorf("TUNSETIFF: %w", err)
	}
	// The device "checksums" what the sandbox sends: its TCP leaves that
	// to the host's end, which reads it from memory and need not.
	if err := unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, unix.TUN_F_CSUM); err != nil {
		return -1, fmt.Errorf("TUNSETOFFLOAD: %w", err)
	}
	return fd, nil
}

// tunFile is the host's end fd, non-blocking, so that Go's poller serves
// reads and a Close ends them.
func tunFile(fd int) (*os.File, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), "/dev/net/tun:"+tunName), nil
}

// maskOf is the IPv4 netmask of a prefix length.
func maskOf(bits int) [4]byte {
	var m [4]byte
	binary.BigEndian.PutUint32(m[:], ^uint32(0)<<(32-bits))
	return m
}

// addDefaultRoute adds "default via gw" (IPv4 or IPv6), through the device
// whose index is dev when it is not 0, to the main table of the calling
// thread's network namespace.
func addDefaultRoute(gw netip.Addr, dev int32) error {
	family := uint8(unix.AF_INET)
	if gw.Is6() {
		family = unix.AF_INET6
	}
	rtm := unix.RtMsg{Family: family, Table: unix.RT_TABLE_MAIN, Protocol: unix.RTPROT_BOOT,
		Scope: unix.RT_SCOPE_UNIVERSE, Type: unix.RTN_UNICAST}
	body := append((*[unix.SizeofRtMsg]byte)(unsafe.Pointer(&rtm))[:], rtAttr(unix.RTA_GATEWAY, gw.AsSlice())...)
	if dev != 0 {
		body = append(body, rtAttr(unix.RTA_OIF, binary.NativeEndian.AppendUint32(nil, uint32(dev)))...)
	}
	return rtnetlink(unix.RTM_NEWROUTE, unix.NLM_F_CREATE|unix.NLM_F_EXCL, body)
}

// rtAttr is a route attribute of type typ holding data, padded.
func rtAttr(typ uint16, data []byte) []byte {
	n := unix.SizeofRtAttr + len(data)
	attr := make([]byte, (n+unix.RTA_ALIGNTO-1)&^(unix.RTA_ALIGNTO-1))
	binary.NativeEndian.PutUint16(attr[0:], uint16(n))
	binary.NativeEndian.PutUint16(attr[2:], typ)
	copy(attr[unix.SizeofRtAttr:], data)
	return attr
}

// rtnetlink sends one request of type typ (with flags, besides
// NLM_F_REQUEST and NLM_F_ACK) and body to the calling thread's network
// namespace's rtnetlink and waits for its acknowledgement.
func rtnetlink(typ, flags uint16, body []byte) error {
	sock, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer unix.Close(sock)
	if err := unix.Bind(sock, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	msg := make([]byte, unix.SizeofNlMsghdr, unix.SizeofNlMsghdr+len(body))
	binary.NativeEndian.PutUint32(msg[0:], uint32(unix.SizeofNlMsghdr+len(body)))
	binary.NativeEndian.PutUint16(msg[4:], typ)
	binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK|flags)
	binary.NativeEndian.PutUint32(msg[8:], 1) // sequence
	msg = append(msg, body...)
	if err := unix.Sendto(sock, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	nr, _, err := unix.Recvfrom(sock, buf, 0)
	if err != nil {
		return err
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:nr])
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if m.Header.Type == unix.NLMSG_ERROR && len(m.Data) >= 4 {
			if code := int32(binary.NativeEndian.Uint32(m.Data)); code != 0 {
				return unix.Errno(-code)
			}
			return nil
		}
	}
	return fmt.Errorf("no acknowledgement")
}

// NewNetns makes a network namespace for a run that another runtime
// starts (gVisor's runsc, which copies a namespace's devices, addresses
// and routes into its own network stack): lo up, tun0 made and configured
// as n says, kept by a bind mount at path (a file it creates). It returns
// the host's end of tun0, as Network.Attach gets it. The namespace lives
// until path is unmounted and the device's every descriptor closed.
func NewNetns(path string, n *Network) (*os.File, error) {
	if err := n.validate(); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		return nil, err
	}
	tun, err := onThrowawayThread(func() (*os.File, error) {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return nil, fmt.Errorf("new network namespace: %w", err)
		}
		if err := loopbackUp(); err != nil {
			return nil, fmt.Errorf("lo: %w", err)
		}
		f, err := makeTUN(n)
		if err != nil {
			return nil, err
		}
		if err := unix.Mount("/proc/thread-self/ns/net", path, "", unix.MS_BIND, ""); err != nil {
			f.Close()
			return nil, fmt.Errorf("keep the network namespace: %w", err)
		}
		return f, nil
	})
	if err != nil {
		os.Remove(path)
	}
	return tun, err
}

// KeepTUN makes the tun0 whose host end tun is (NewNetns's) outlive its
// descriptors (TUNSETPERSIST): its holder may close its end, and a later
// one take the very same device again (ReopenTUN). A runtime that reads
// the device by its index (gVisor's runsc) goes on reading it. The device
// goes with its namespace.
func KeepTUN(tun *os.File) error {
	c, err := tun.SyscallConn()
	if err != nil {
		return err
	}
	var ioErr error
	if err := c.Control(func(fd uintptr) { ioErr = unix.IoctlSetInt(int(fd), unix.TUNSETPERSIST, 1) }); err != nil {
		return err
	}
	if ioErr != nil {
		return fmt.Errorf("TUNSETPERSIST: %w", ioErr)
	}
	return nil
}

// ReopenTUN is the host's end of the tun0 kept (KeepTUN) in the network
// namespace NewNetns kept at path.
func ReopenTUN(path string) (*os.File, error) {
	ns, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(ns)
	return onThrowawayThread(func() (*os.File, error) {
		if err := unix.Setns(ns, unix.CLONE_NEWNET); err != nil {
			return nil, fmt.Errorf("enter the network namespace: %w", err)
		}
		// The device kept, not a new one by its name (TUNSETIFF would
		// make that).
		if _, err := tunIndex(); err != nil {
			return nil, err
		}
		fd, err := openTUN()
		if err != nil {
			return nil, err
		}
		return tunFile(fd)
	})
}

// tunIndex is tun0's index in the calling thread's network namespace.
func tunIndex() (int32, error) {
	sock, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(sock)
	ifr, err := unix.NewIfreq(tunName)
	if err != nil {
		return 0, err
	}
	if err := unix.IoctlIfreq(sock, unix.SIOCGIFINDEX, ifr); err != nil {
		return 0, fmt.Errorf("%s: %w", tunName, err)
	}
	return int32(ifr.Uint32()), nil
}

// RemoveNetns lets go of a namespace NewNetns kept at path.
func RemoveNetns(path string) {
	unix.Unmount(path, unix.MNT_DETACH)
	os.Remove(path)
}
