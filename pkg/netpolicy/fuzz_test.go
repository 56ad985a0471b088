package netpolicy

import (
	"net/netip"
	"strings"
	"testing"
)

// FuzzParsePolicy: parsing never panics, an entry it accepts parses
// again to the same thing and is within itself, and matching never panics.
func FuzzParsePolicy(f *testing.F) {
	for _, s := range []string{"pypi.org:443", "*.x.org", "203.0.113.0/24:8080", "[2001:db8::/32]:443",
		"host.sandbox.internal:8000", "https://x.org/", "a.*.b", "1.2.3.4/33", "[::1]", "::ffff:1.2.3.4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePolicy([]string{s})
		if err != nil {
			if !strings.HasPrefix(err.Error(), "allow entry ") {
				t.Fatalf("%q: error %q does not name the entry", s, err)
			}
			return
		}
		again, err := ParsePolicy(p.Entries())
		if err != nil || len(again.entries) != 1 || again.entries[0] != p.entries[0] {
			t.Fatalf("%q: parsed again to %+v, %v", s, again.entries, err)
		}
		if err := p.Within(p); err != nil {
			t.Fatalf("%q is not within itself: %v", s, err)
		}
		p.AllowsName(s)
		p.AllowsNamePort(s, 443)
		if a, err := netip.ParseAddr(s); err == nil {
			p.AllowsAddr(a, 443)
			Reason(a, nil)
		}
	})
}

// FuzzReason: judging an address never panics, and an address and its
// IPv4-mapped form are judged alike.
func FuzzReason(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "::ffff:10.0.0.1", "64:ff9b::a9fe:a9fe", "2002:7f00:1::1",
		"2001:0:4136:e378:8000:63bf:80ff:fffe", "::127.0.0.1", "fe80::1%eth0", "8.8.8.8"} {
		f.Add([]byte(netip.MustParseAddr(s).AsSlice()))
	}
	host := NewAddrSet(netip.MustParseAddr("172.32.9.50"))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, ok := netip.AddrFromSlice(b)
		if !ok {
			return
		}
		why := Reason(a, host)
		if a.Is4() {
			if mapped := Reason(netip.AddrFrom16(a.As16()), host); mapped != why {
				t.Fatalf("%s: %q, its mapped form %q", a, why, mapped)
			}
		}
	})
}
