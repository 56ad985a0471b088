package egress

import "github.com/sandbox-run/sandbox-run/pkg/netpolicy"

// Addresses of the sandbox side of the link and of the services this
// package answers on it. The engine gives the sandbox's TUN device
// SandboxAddr/PrefixLen and SandboxAddr6/PrefixLen6 (a unique local
// address), default routes via GatewayAddr and GatewayAddr6, and a
// resolv.conf naming GatewayAddr; the DNS server answers on GatewayAddr6
// too. HostInternalAddr, the address of HostInternalName, is IPv4 only.
const (
	SandboxAddr      = "10.77.0.2"
	GatewayAddr      = "10.77.0.1"
	HostInternalAddr = "10.77.0.254"
	HostInternalName = netpolicy.HostInternalName
	PrefixLen        = 24

	SandboxAddr6 = "fd5b:77::2"
	GatewayAddr6 = "fd5b:77::1"
	PrefixLen6   = 64
)

// Policy is a parsed allow-list (netpolicy.Policy, where it is parsed
// without this package's netstack).
type Policy = netpolicy.Policy

// ParsePolicy parses allow-list entries: netpolicy.ParsePolicy.
func ParsePolicy(entries []string) (Policy, error) { return netpolicy.ParsePolicy(entries) }
