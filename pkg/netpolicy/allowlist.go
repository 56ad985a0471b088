package netpolicy

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// HostInternalName is the name a sandbox's network egress gives the host:
// an allow-list entry host.sandbox.internal:PORT lets a run reach the
// host's 127.0.0.1:PORT.
const HostInternalName = "host.sandbox.internal"

type entryKind uint8

const (
	kindName         entryKind = iota // exact host name
	kindWildcard                      // "*.suffix": names strictly below suffix
	kindPrefix                        // an IP address or a CIDR
	kindHostInternal                  // host.sandbox.internal:PORT
)

type entry struct {
	raw    string
	kind   entryKind
	name   string       // kindName: the name; kindWildcard: the suffix
	prefix netip.Prefix // kindPrefix
	port   uint16       // 0: every port (never for kindHostInternal)
}

// Policy is a parsed allow-list of network egress (network.allow, a
// request's network.allow): the names, addresses and ports a sandboxed run
// may reach. Its IP and CIDR entries are the egress's explicit exceptions
// to Reason. The zero Policy allows nothing.
type Policy struct {
	entries []entry
}

// ParsePolicy parses allow-list entries. Each is one of
//
//	name[:port]          pypi.org:443, api.example.com (every port)
//	*.suffix[:port]      *.pythonhosted.org:443 (a.x.org and b.a.x.org, not x.org)
//	ip[:port]            203.0.113.7:443, 2001:db8::1, [2001:db8::1]:443
//	cidr[:port]          203.0.113.0/24:8080, 2001:db8::/32, [2001:db8::/32]:443
//	host.sandbox.internal:PORT   the host's 127.0.0.1:PORT (a port is required)
//
// Names are case-insensitive and may end with a dot. An error names the
// first bad entry.
func ParsePolicy(entries []string) (Policy, error) {
	var p Policy
	for _, s := range entries {
		e, err := parseEntry(s)
		if err != nil {
			return Policy{}, fmt.Errorf("allow entry %q: %w", s, err)
		}
		p.entries = append(p.entries, e)
	}
	return p, nil
}

// Empty reports whether p allows nothing.
func (p Policy) Empty() bool { return len(p.entries) == 0 }

// Entries returns the entries as written.
func (p Policy) Entries() []string {
	out := make([]string, len(p.entries))
	for i, e := range p.entries {
		out[i] = e.raw
	}
	return out
}

// Within reports whether every entry of p is covered by an entry of max
// (the server's maximum egress): the same or a wider name, wildcard or
// CIDR, with the same port or every port. The error names the first entry
// that is not.
func (p Policy) Within(max Policy) error {
	for _, e := range p.entries {
		covered := false
		for _, m := range max.entries {
			if m.covers(e) {
				covered = true
				break
			}
		}
		if !covered {
			return fmt.Errorf("allow entry %q: not within the server's allowed egress", e.raw)
		}
	}
	return nil
}

func (m entry) covers(e entry) bool {
	if m.port != 0 && m.port != e.port {
		return false
	}
	switch e.kind {
	case kindHostInternal:
		return m.kind == kindHostInternal
	case kindName:
		return (m.kind == kindName && m.name == e.name) || (m.kind == kindWildcard && underSuffix(e.name, m.name))
	case kindWildcard:
		return m.kind == kindWildcard && (m.name == e.name || underSuffix(e.name, m.name))
	case kindPrefix:
		return m.kind == kindPrefix && m.prefix.Bits() <= e.prefix.Bits() && m.prefix.Contains(e.prefix.Addr())
	}
	return false
}

func underSuffix(name, suffix string) bool {
	return len(name) > len(suffix) && strings.HasSuffix(name, suffix) && name[len(name)-len(suffix)-1] == '.'
}

func (e entry) matchesName(name string) bool {
	switch e.kind {
	case kindName:
		return e.name == name
	case kindWildcard:
		return underSuffix(name, e.name)
	}
	return false
}

// AllowsName reports whether the sandbox's DNS may answer for name (on
// some port). host.sandbox.internal counts only through its own entries.
func (p Policy) AllowsName(name string) bool {
	name = CanonicalName(name)
	if name == HostInternalName {
		return p.hostInternal()
	}
	for _, e := range p.entries {
		if e.matchesName(name) {
			return true
		}
	}
	return false
}

// AllowsNamePort reports whether an entry for name allows port.
func (p Policy) AllowsNamePort(name string, port uint16) bool {
	name = CanonicalName(name)
	if name == HostInternalName {
		return p.AllowsHostInternal(port)
	}
	for _, e := range p.entries {
		if e.matchesName(name) && (e.port == 0 || e.port == port) {
			return true
		}
	}
	return false
}

// AllowsAddr reports whether an IP or CIDR entry names addr with port.
// Such an entry also lifts the refusal of addr (Reason) for the egress.
func (p Policy) AllowsAddr(addr netip.Addr, port uint16) bool {
	addr = addr.Unmap()
	for _, e := range p.entries {
		if e.kind == kindPrefix && e.prefix.Contains(addr) && (e.port == 0 || e.port == port) {
			return true
		}
	}
	return false
}

// CoversAddr reports whether an IP or CIDR entry names addr (on any port).
func (p Policy) CoversAddr(addr netip.Addr) bool {
	addr = addr.Unmap()
	for _, e := range p.entries {
		if e.kind == kindPrefix && e.prefix.Contains(addr) {
			return true
		}
	}
	return false
}

// AllowsHostInternal reports whether host.sandbox.internal:port is listed.
func (p Policy) AllowsHostInternal(port uint16) bool {
	for _, e := range p.entries {
		if e.kind == kindHostInternal && e.port == port {
			return true
		}
	}
	return false
}

func (p Policy) hostInternal() bool {
	for _, e := range p.entries {
		if e.kind == kindHostInternal {
			return true
		}
	}
	return false
}

// Match is the first entry (as written) that allows a connection to
// addr:port reached by one of names (the names the run resolved to addr;
// host.sandbox.internal for the host's own ports), or "" when none does.
func (p Policy) Match(names []string, addr netip.Addr, port uint16) string {
	addr = addr.Unmap()
	for _, e := range p.entries {
		switch e.kind {
		case kindHostInternal:
			if e.port == port && slices.Contains(names, HostInternalName) {
				return e.raw
			}
		case kindPrefix:
			if e.prefix.Contains(addr) && (e.port == 0 || e.port == port) {
				return e.raw
			}
		default:
			for _, n := range names {
				if e.matchesName(CanonicalName(n)) && (e.port == 0 || e.port == port) {
					return e.raw
				}
			}
		}
	}
	return ""
}

// CanonicalName returns a host name as the allow-list compares it: lower
// case, without a final dot.
func CanonicalName(s string) string {
	return strings.TrimSuffix(strings.ToLower(s), ".")
}

func parseEntry(s string) (entry, error) {
	e := entry{raw: s}
	switch {
	case s == "":
		return e, errors.New("empty")
	case strings.ContainsAny(s, " \t\r\n"):
		return e, errors.New("contains white space")
	case strings.Contains(s, "://"):
		return e, errors.New("looks like a URL: write host[:port], without a scheme or path")
	case strings.ContainsAny(s, "?#@"):
		return e, errors.New("looks like a URL: write host[:port], without a scheme, user, path or query")
	}
	host, portStr, hasPort := s, "", false
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.Index(s, "]")
		if end < 0 {
			return e, errors.New("missing ]")
		}
		host, portStr = s[1:end], s[end+1:]
		if portStr != "" {
			if !strings.HasPrefix(portStr, ":") {
				return e, errors.New("want [address]:port")
			}
			portStr, hasPort = portStr[1:], true
		}
		if _, err := netip.ParsePrefix(host); err != nil {
			if _, err := netip.ParseAddr(host); err != nil {
				return e, fmt.Errorf("bad IPv6 address or CIDR %q", host)
			}
		}
	case strings.Count(s, ":") == 1:
		i := strings.LastIndex(s, ":")
		host, portStr, hasPort = s[:i], s[i+1:], true
	}
	if hasPort {
		n, err := strconv.ParseUint(portStr, 10, 16)
		if err != nil || n == 0 {
			return e, fmt.Errorf("bad port %q (want 1-65535)", portStr)
		}
		e.port = uint16(n)
	}
	if host == "" {
		return e, errors.New("empty host")
	}

	if strings.Contains(host, "/") {
		prefix, err := netip.ParsePrefix(host)
		if err != nil {
			if i := strings.Index(host, "/"); i > 0 && !strings.ContainsAny(host[i+1:], "0123456789") || strings.Count(host, "/") > 1 {
				return e, errors.New("looks like a URL: write host[:port], without a scheme or path")
			}
			return e, fmt.Errorf("bad CIDR %q", host)
		}
		if prefix.Addr().Zone() != "" {
			return e, errors.New("an address with a zone is not allowed")
		}
		if prefix.Addr().Is4In6() {
			return e, errors.New("IPv4-mapped IPv6: write the IPv4 form")
		}
		if prefix != prefix.Masked() {
			return e, fmt.Errorf("CIDR %s has bits set past /%d (did you mean %s?)", host, prefix.Bits(), prefix.Masked())
		}
		e.kind, e.prefix = kindPrefix, prefix
		return e, nil
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		if addr.Zone() != "" {
			return e, errors.New("an address with a zone is not allowed")
		}
		if addr.Is4In6() {
			return e, errors.New("IPv4-mapped IPv6: write the IPv4 form")
		}
		e.kind, e.prefix = kindPrefix, netip.PrefixFrom(addr, addr.BitLen())
		return e, nil
	}
	if strings.Contains(host, ":") {
		return e, fmt.Errorf("bad IPv6 address %q (write [address]:port for a port)", host)
	}

	name := CanonicalName(host)
	if strings.HasPrefix(name, "*.") {
		e.kind, name = kindWildcard, name[2:]
	} else {
		e.kind = kindName
	}
	if strings.Contains(name, "*") {
		return e, errors.New(`a wildcard is allowed only as a leading "*." (*.example.org)`)
	}
	if err := checkHostName(name); err != nil {
		return e, err
	}
	e.name = name
	if name == HostInternalName {
		if e.kind == kindWildcard {
			return e, fmt.Errorf("no wildcard below %s", HostInternalName)
		}
		if e.port == 0 {
			return e, fmt.Errorf("%s needs a port (%s:PORT)", HostInternalName, HostInternalName)
		}
		e.kind = kindHostInternal
	}
	return e, nil
}

func checkHostName(name string) error {
	if name == "" || len(name) > 253 {
		return errors.New("bad host name")
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return fmt.Errorf("bad host name %q (empty or over-long label)", name)
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return fmt.Errorf("bad host name %q (label starts or ends with -)", name)
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("bad host name %q (character %q)", name, c)
			}
		}
	}
	last := labels[len(labels)-1]
	if strings.Trim(last, "0123456789") == "" {
		return fmt.Errorf("bad host name or IP address %q", name)
	}
	return nil
}
