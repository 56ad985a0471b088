package egress

import (
	"fmt"
	"net/netip"
	"syscall"

	"github.com/sandbox-run/sandbox-run/pkg/netpolicy"
)

// checker decides which addresses the host may dial for a run: those
// netpolicy refuses (loopback, private, metadata, the host's own, ...)
// only when an IP or CIDR entry of the run's policy names them with the
// port.
type checker struct {
	policy func() *Policy      // the run's, as it is now
	host   netpolicy.HostAddrs // the server's own addresses
}

// refusal returns why netpolicy refuses a, or "" (the entries aside).
func (c *checker) refusal(a netip.Addr) string {
	return netpolicy.Reason(a, c.host)
}

// check returns why the host may not dial ap, or "" when it may: an
// address netpolicy refuses is refused unless an IP or CIDR entry names
// it with its port (a name resolving to it is not enough).
func (c *checker) check(ap netip.AddrPort) string {
	a := ap.Addr().WithZone("").Unmap()
	why := c.refusal(a)
	if why == "" || c.policy().AllowsAddr(a, ap.Port()) {
		return ""
	}
	return fmt.Sprintf("address %s is %s", a, why)
}

// control is a net.Dialer Control function: the last check, on the
// address the socket is about to connect to.
func (c *checker) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("egress: refusing to dial %q: %v", address, err)
	}
	if why := c.check(ap); why != "" {
		return fmt.Errorf("egress: refusing to dial %s: %s", address, why)
	}
	return nil
}
