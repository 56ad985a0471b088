package netpolicy

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"
)

// HostAddrs holds the host's own addresses.
type HostAddrs interface {
	// Contains reports whether a (unmapped, without a zone) is one.
	Contains(a netip.Addr) bool
}

// AddrSet is a fixed set of addresses: the host's, when a caller knows
// them (tests inject theirs so).
type AddrSet map[netip.Addr]struct{}

// NewAddrSet returns the set of addrs (unmapped, without zones).
func NewAddrSet(addrs ...netip.Addr) AddrSet {
	s := make(AddrSet, len(addrs))
	for _, a := range addrs {
		s[a.WithZone("").Unmap()] = struct{}{}
	}
	return s
}

// Contains reports whether a is in s.
func (s AddrSet) Contains(a netip.Addr) bool {
	_, ok := s[a.WithZone("").Unmap()]
	return ok
}

// InterfacesMaxAge is how long Interfaces trusts the addresses it read:
// an address the machine gains is refused at most this long after.
const InterfacesMaxAge = time.Second

// InterfaceAddrs is the set of the addresses of the machine's
// interfaces, read again when older than InterfacesMaxAge.
type InterfaceAddrs struct {
	mu    sync.Mutex
	read  time.Time
	addrs AddrSet
	now   func() time.Time           // tests
	list  func() ([]net.Addr, error) // tests
}

var interfaces = &InterfaceAddrs{}

// Interfaces returns the addresses of the machine's interfaces, which
// every Checker without a Host refuses.
func Interfaces() *InterfaceAddrs { return interfaces }

// Contains reports whether a is an address of one of the machine's
// interfaces. When they cannot be read, the last addresses read stand
// (and they are tried again at the next call).
func (s *InterfaceAddrs) Contains(a netip.Addr) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.addrs == nil || s.clock().Sub(s.read) > InterfacesMaxAge {
		s.refresh()
	}
	return s.addrs.Contains(a)
}

// Refresh reads the addresses again, now.
func (s *InterfaceAddrs) Refresh() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refresh()
}

func (s *InterfaceAddrs) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

func (s *InterfaceAddrs) refresh() error {
	list := net.InterfaceAddrs
	if s.list != nil {
		list = s.list
	}
	ifaddrs, err := list()
	if err != nil {
		if s.addrs == nil {
			s.addrs = AddrSet{}
		}
		return fmt.Errorf("the host's addresses: %w", err)
	}
	addrs := AddrSet{}
	for _, ia := range ifaddrs {
		var ip net.IP
		switch v := ia.(type) {
		case *net.IPNet:
			ip = v.IP
		case *net.IPAddr:
			ip = v.IP
		}
		if a, ok := netip.AddrFromSlice(ip); ok {
			addrs[a.Unmap()] = struct{}{}
		}
	}
	s.addrs, s.read = addrs, s.clock()
	return nil
}
