package egress

import "github.com/sandbox-run/sandbox-run/pkg/netpolicy"

// Addresses of the sandbox side of the link and of the services this
// package answers on it. The engine gives the sandbox's TUN device
// SandboxAddr/PrefixLen, a default route via GatewayAddr and a resolv.conf
// naming GatewayAddr.
const (
	SandboxAddr      = "10.77.0.2"
	GatewayAddr      = "10.77.0.1"
	HostInternalAddr = "10.77.0.254"
	HostInternalName = netpolicy.HostInternalName
	PrefixLen        = 24
)

// Policy is a parsed allow-list (netpolicy.Policy, where it is parsed
// without this package's netstack).
type Policy = netpolicy.Policy

// ParsePolicy parses allow-list entries: netpolicy.ParsePolicy.
func ParsePolicy(entries []string) (Policy, error) { return netpolicy.ParsePolicy(entries) }
