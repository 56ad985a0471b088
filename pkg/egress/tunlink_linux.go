package egress

import (
	"encoding/binary"
	"os"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
	"gvisor.dev/gvisor/pkg/buffer"
	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
)

// tunLink is netstack's link to a TUN device opened with IFF_VNET_HDR:
// every packet comes and goes behind a virtio_net_hdr, which lets the two
// TCP stacks skip the checksums of what they pass each other. netstack
// leaves the checksum of the TCP segments it sends to the sandbox's
// kernel (host GSO, NEEDS_CSUM), which, for a packet it delivers locally,
// never computes it; the sandbox's kernel, told the device checksums
// (TUN_F_CSUM), leaves those of what it sends, which netstack does not
// check (RXChecksumOffload): both are one kernel's packets to the other,
// through memory. Without the header both stacks checksum every
// byte, and the egress path moved ~40% of the host loopback's throughput.
type tunLink struct {
	vnet bool // packets come and go behind a virtio_net_hdr
	f    *os.File
	raw  interface {
		Write(func(fd uintptr) bool) error
	}
	mtu uint32

	mu         sync.RWMutex
	dispatcher stack.NetworkDispatcher
	onClose    func()
	done       sync.WaitGroup
}

// vnetHdrLen is the size of struct virtio_net_hdr, the TUN device's
// default header size.
const vnetHdrLen = 10

const (
	vnetNeedsCsum = 1 // VIRTIO_NET_HDR_F_NEEDS_CSUM
	vnetGSOTCPv4  = 1 // VIRTIO_NET_HDR_GSO_TCPV4
	vnetGSOTCPv6  = 4 // VIRTIO_NET_HDR_GSO_TCPV6
)

// hasVnetHdr says whether the TUN device fd was opened with IFF_VNET_HDR.
func hasVnetHdr(fd int) (bool, error) {
	ifr, err := unix.NewIfreq("")
	if err != nil {
		return false, err
	}
	if err := unix.IoctlIfreq(fd, unix.TUNGETIFF, ifr); err != nil {
		return false, err
	}
	return ifr.Uint16()&unix.IFF_VNET_HDR != 0, nil
}

// newTUNLink serves the TUN device fd (IFF_TUN|IFF_NO_PI, with or without
// IFF_VNET_HDR), taking it over: closing the link closes fd.
func newTUNLink(fd int, mtu uint32) (*tunLink, error) {
	vnet, err := hasVnetHdr(fd)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "tun")
	raw, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &tunLink{vnet: vnet, f: f, raw: raw, mtu: mtu}, nil
}

func (l *tunLink) MTU() uint32                             { return l.mtu }
func (l *tunLink) SetMTU(mtu uint32)                       { l.mtu = mtu }
func (l *tunLink) MaxHeaderLength() uint16                 { return 0 }
func (l *tunLink) LinkAddress() tcpip.LinkAddress          { return "" }
func (l *tunLink) SetLinkAddress(tcpip.LinkAddress)        {}
func (l *tunLink) ARPHardwareType() header.ARPHardwareType { return header.ARPHardwareNone }
func (l *tunLink) AddHeader(*stack.PacketBuffer)           {}
func (l *tunLink) ParseHeader(*stack.PacketBuffer) bool    { return true }

func (l *tunLink) Capabilities() stack.LinkEndpointCapabilities {
	return stack.CapabilityRXChecksumOffload
}

// GSOMaxSize and SupportedGSO make netstack hand a device with the
// virtio header whole TCP segments of up to 64 KiB with their checksums
// left to it. Without the header netstack sends packets of the MTU with
// their checksums (a TUN without it delivers them as CHECKSUM_NONE); the
// sandbox's kernel computed those of what it sends either way.
func (l *tunLink) GSOMaxSize() uint32 {
	if l.vnet {
		return 1<<16 - 1
	}
	return 0
}

func (l *tunLink) SupportedGSO() stack.SupportedGSO {
	if l.vnet {
		return stack.HostGSOSupported
	}
	return stack.GSONotSupported
}

// Attach starts the reader with a dispatcher; with nil (the NIC going
// away) it stops the reader and waits for it.
func (l *tunLink) Attach(d stack.NetworkDispatcher) {
	l.mu.Lock()
	old := l.dispatcher
	l.dispatcher = d
	l.mu.Unlock()
	switch {
	case d != nil && old == nil:
		l.f.SetReadDeadline(time.Time{})
		l.done.Add(1)
		go l.read()
	case d == nil && old != nil:
		l.stop()
	}
}

// stop ends the reader and waits for it. The egress calls it before
// netstack removes the NIC: netstack does that (and so calls Attach(nil))
// holding its own lock, which a packet being delivered may be waiting
// for; stopped first, the reader holds up nothing.
func (l *tunLink) stop() {
	l.f.SetReadDeadline(time.Unix(1, 0))
	l.done.Wait()
}

func (l *tunLink) IsAttached() bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.dispatcher != nil
}

// Wait waits for the reader, which ends when the device is closed.
func (l *tunLink) Wait() { l.done.Wait() }

func (l *tunLink) SetOnCloseAction(f func()) {
	l.mu.Lock()
	l.onClose = f
	l.mu.Unlock()
}

// Close closes the device, which ends the reader.
func (l *tunLink) Close() {
	l.mu.Lock()
	onClose := l.onClose
	l.onClose = nil
	l.mu.Unlock()
	l.f.Close()
	if onClose != nil {
		onClose()
	}
}

// read delivers the device's packets to netstack until it is closed.
func (l *tunLink) read() {
	defer l.done.Done()
	hdr := 0
	if l.vnet {
		hdr = vnetHdrLen
	}
	buf := make([]byte, hdr+1<<16)
	for {
		n, err := l.f.Read(buf)
		if err != nil {
			// Closed or stopped (Attach(nil)); a device gone away the same.
			return
		}
		if n <= hdr {
			continue
		}
		// The header says at most that the checksum was left to us
		// (NEEDS_CSUM): netstack does not check it. The device does not
		// hand us GSO packets (no TSO offload was asked for).
		data := buf[hdr:n]
		var proto tcpip.NetworkProtocolNumber
		switch header.IPVersion(data) {
		case header.IPv4Version:
			proto = ipv4.ProtocolNumber
		case header.IPv6Version:
			proto = ipv6.ProtocolNumber
		default:
			continue
		}
		l.mu.RLock()
		d := l.dispatcher
		l.mu.RUnlock()
		if d == nil {
			return
		}
		pkt := stack.NewPacketBuffer(stack.PacketBufferOptions{Payload: buffer.MakeWithData(data)})
		d.DeliverNetworkPacket(proto, pkt)
		pkt.DecRef()
	}
}

// WritePackets writes each packet behind its virtio_net_hdr: a TCP
// segment that netstack left the checksum of says NEEDS_CSUM (and GSO
// with its MSS when it is larger), anything else a zero header.
func (l *tunLink) WritePackets(pkts stack.PacketBufferList) (int, tcpip.Error) {
	n := 0
	for _, pkt := range pkts.AsSlice() {
		if err := l.write(pkt); err != nil {
			if n == 0 {
				return 0, err
			}
			break
		}
		n++
	}
	return n, nil
}

func (l *tunLink) write(pkt *stack.PacketBuffer) tcpip.Error {
	var hdr [vnetHdrLen]byte
	if gso := pkt.GSOOptions; gso.Type != stack.GSONone {
		// Little-endian: a TUN device's header is the host's order
		// unless TUNSETVNETBE says otherwise, and amd64 and arm64 are
		// little-endian.
		binary.LittleEndian.PutUint16(hdr[2:], uint16(pkt.HeaderSize()))
		if gso.NeedsCsum {
			hdr[0] = vnetNeedsCsum
			binary.LittleEndian.PutUint16(hdr[6:], gso.L3HdrLen)
			binary.LittleEndian.PutUint16(hdr[8:], gso.CsumOffset)
		}
		if uint16(pkt.Data().Size()) > gso.MSS {
			switch gso.Type {
			case stack.GSOTCPv4:
				hdr[1] = vnetGSOTCPv4
			case stack.GSOTCPv6:
				hdr[1] = vnetGSOTCPv6
			}
			binary.LittleEndian.PutUint16(hdr[4:], gso.MSS)
		}
	}
	views := pkt.AsSlices()
	var arr [8]unix.Iovec
	iov := arr[:0]
	if l.vnet {
		iov = append(iov, iovec(hdr[:]))
	}
	for _, v := range views {
		if len(v) > 0 {
			iov = append(iov, iovec(v))
		}
	}
	var errno unix.Errno
	if err := l.raw.Write(func(fd uintptr) bool {
		_, _, e := unix.Syscall(unix.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)))
		errno = e
		return true // never wait: a packet the device cannot take is dropped
	}); err != nil {
		return &tcpip.ErrClosedForSend{}
	}
	if errno != 0 {
		return tcpip.TranslateErrno(errno)
	}
	return nil
}

func iovec(b []byte) unix.Iovec {
	v := unix.Iovec{Base: &b[0]}
	v.SetLen(len(b))
	return v
}
