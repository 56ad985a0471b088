package egress

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
			deniedClass(a, nil)
		}
	})
}
