package netpolicy

import (
	"net/netip"
	"strings"
	"testing"
)

func mustPolicy(t testing.TB, entries ...string) Policy {
	t.Helper()
	p, err := ParsePolicy(entries)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParsePolicyGood(t *testing.T) {
	for _, tc := range []struct {
		in   string
		kind entryKind
		name string
		cidr string
		port uint16
	}{
		{"pypi.org:443", kindName, "pypi.org", "", 443},
		{"API.Example.COM.", kindName, "api.example.com", "", 0},
		{"*.pythonhosted.org:443", kindWildcard, "pythonhosted.org", "", 443},
		{"*.org", kindWildcard, "org", "", 0},
		{"under_score.example", kindName, "under_score.example", "", 0},
		{"203.0.113.0/24:8080", kindPrefix, "", "203.0.113.0/24", 8080},
		{"203.0.113.7", kindPrefix, "", "203.0.113.7/32", 0},
		{"203.0.113.7:22", kindPrefix, "", "203.0.113.7/32", 22},
		{"2001:db8::1", kindPrefix, "", "2001:db8::1/128", 0},
		{"[2001:db8::1]:443", kindPrefix, "", "2001:db8::1/128", 443},
		{"2001:db8::/32", kindPrefix, "", "2001:db8::/32", 0},
		{"[2001:db8::/32]:443", kindPrefix, "", "2001:db8::/32", 443},
		{"host.sandbox.internal:8000", kindHostInternal, "host.sandbox.internal", "", 8000},
		{"Host.Sandbox.Internal:65535", kindHostInternal, "host.sandbox.internal", "", 65535},
	} {
		p, err := ParsePolicy([]string{tc.in})
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		e := p.entries[0]
		if e.kind != tc.kind || e.name != tc.name || e.port != tc.port || (tc.cidr != "" && e.prefix.String() != tc.cidr) || e.raw != tc.in {
			t.Errorf("%q: got %+v", tc.in, e)
		}
	}
	if p := mustPolicy(t); !p.Empty() {
		t.Error("an empty list is not Empty")
	}
	if got := mustPolicy(t, "a.org", "1.2.3.4").Entries(); strings.Join(got, ",") != "a.org,1.2.3.4" {
		t.Errorf("Entries = %q", got)
	}
}

func TestParsePolicyBad(t *testing.T) {
	for in, want := range map[string]string{
		"":                             "empty",
		" pypi.org":                    "white space",
		"pypi.org:0":                   "bad port",
		"pypi.org:65536":               "bad port",
		"pypi.org:https":               "bad port",
		"pypi.org:":                    "bad port",
		":443":                         "empty host",
		"https://pypi.org":             "URL",
		"https://pypi.org/simple":      "URL",
		"pypi.org/simple":              "URL",
		"pypi.org/simple/x":            "URL",
		"user@pypi.org":                "URL",
		"pypi.org?x=1":                 "URL",
		"203.0.113.0/33":               "bad CIDR",
		"203.0.113.7/24":               "did you mean 203.0.113.0/24",
		"300.1.2.3":                    "bad host name or IP",
		"1.2.3":                        "bad host name or IP",
		"a.*.org":                      "leading",
		"*foo.org":                     "leading",
		"*":                            "leading",
		"*.*.org":                      "leading",
		"foo.*":                        "leading",
		"-bad.org":                     "starts or ends",
		"a..org":                       "empty or over-long",
		"exa mple.org":                 "white space",
		"ex!ample.org":                 "character",
		"host.sandbox.internal":        "needs a port",
		"*.sandbox.internal:80":        "",
		"[2001:db8::1":                 "missing ]",
		"[2001:db8::1]443":             "want [address]:port",
		"[nothex]:443":                 "bad IPv6",
		"fe80::1%eth0":                 "zone",
		"::ffff:1.2.3.4":               "IPv4-mapped",
		"[::ffff:1.2.3.0/120]:80":      "IPv4-mapped",
		"2001:db8::1:443x":             "bad IPv6",
		strings.Repeat("a", 64) + ".o": "over-long",
	} {
		_, err := ParsePolicy([]string{"ok.org", in})
		if in == "*.sandbox.internal:80" {
			// A wildcard above the internal name is a plain wildcard: it
			// must simply not grant the host (TestPolicyMatch).
			if err != nil {
				t.Errorf("%q: %v", in, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%q: no error", in)
			continue
		}
		if !strings.HasPrefix(err.Error(), "allow entry "+quote(in)+": ") || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %q, want it to name the entry and say %q", in, err, want)
		}
	}
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }

func TestPolicyMatch(t *testing.T) {
	p := mustPolicy(t, "pypi.org:443", "*.pythonhosted.org:443", "api.example.com", "203.0.113.0/24:8080",
		"198.51.100.7", "[2001:db8::/32]:443", "host.sandbox.internal:8000", "*.sandbox.internal")
	for _, tc := range []struct {
		name string
		port uint16
		want bool
	}{
		{"pypi.org", 443, true},
		{"PyPI.org.", 443, true},
		{"pypi.org", 80, false},
		{"www.pypi.org", 443, false},
		{"files.pythonhosted.org", 443, true},
		{"a.b.pythonhosted.org", 443, true},
		{"pythonhosted.org", 443, false},
		{"xpythonhosted.org", 443, false},
		{"files.pythonhosted.org", 80, false},
		{"api.example.com", 1, true},
		{"api.example.com", 65535, true},
		{"example.com", 443, false},
		{"host.sandbox.internal", 8000, true},
		{"host.sandbox.internal", 8001, false},
	} {
		if got := p.AllowsNamePort(tc.name, tc.port); got != tc.want {
			t.Errorf("AllowsNamePort(%q, %d) = %v", tc.name, tc.port, got)
		}
	}
	for name, want := range map[string]bool{"pypi.org": true, "x.pythonhosted.org": true, "nope.org": false,
		"host.sandbox.internal": true, "other.sandbox.internal": true} {
		if got := p.AllowsName(name); got != want {
			t.Errorf("AllowsName(%q) = %v", name, got)
		}
	}
	// *.sandbox.internal does not grant the host's loopback.
	if p.AllowsHostInternal(9000) || !p.AllowsHostInternal(8000) {
		t.Error("host.sandbox.internal ports wrong")
	}
	if mustPolicy(t, "*.sandbox.internal").AllowsName(HostInternalName) {
		t.Error("a wildcard granted host.sandbox.internal")
	}
	for _, tc := range []struct {
		addr string
		port uint16
		want bool
	}{
		{"203.0.113.9", 8080, true},
		{"203.0.113.9", 8081, false},
		{"203.0.114.9", 8080, false},
		{"198.51.100.7", 22, true},
		{"198.51.100.8", 22, false},
		{"::ffff:198.51.100.7", 22, true},
		{"2001:db8:1::5", 443, true},
		{"2001:db8:1::5", 80, false},
		{"2001:db9::5", 443, false},
	} {
		if got := p.AllowsAddr(netip.MustParseAddr(tc.addr), tc.port); got != tc.want {
			t.Errorf("AllowsAddr(%s, %d) = %v", tc.addr, tc.port, got)
		}
	}
}

func TestPolicyWithin(t *testing.T) {
	max := mustPolicy(t, "*.example.org", "pypi.org:443", "203.0.113.0/24", "[2001:db8::/32]:443", "host.sandbox.internal:8000", "*.x.org:443")
	for _, entries := range [][]string{
		{},
		{"a.example.org", "b.a.example.org:80", "*.a.example.org", "*.example.org:22"},
		{"pypi.org:443", "203.0.113.0/25:80", "203.0.113.7", "[2001:db8:1::/48]:443", "host.sandbox.internal:8000"},
		{"a.x.org:443", "*.a.x.org:443"},
	} {
		if err := mustPolicy(t, entries...).Within(max); err != nil {
			t.Errorf("%q: %v", entries, err)
		}
	}
	for _, tc := range []struct{ entries []string }{
		{[]string{"a.example.org", "example.org"}},
		{[]string{"pypi.org"}},
		{[]string{"pypi.org:80"}},
		{[]string{"203.0.112.0/23"}},
		{[]string{"203.0.114.1"}},
		{[]string{"[2001:db8::1]:80"}},
		{[]string{"2001:db8::1"}},
		{[]string{"host.sandbox.internal:8001"}},
		{[]string{"*.x.org"}},
		{[]string{"a.x.org"}},
		{[]string{"*.org"}},
	} {
		err := mustPolicy(t, tc.entries...).Within(max)
		last := tc.entries[len(tc.entries)-1]
		if err == nil || !strings.Contains(err.Error(), quote(last)) {
			t.Errorf("%q: err %v, want one naming %q", tc.entries, err, last)
		}
	}
	if err := mustPolicy(t, "a.org").Within(Policy{}); err == nil {
		t.Error("an empty maximum allowed a.org")
	}
}

// TestMatch: the entry that allows a connection is the first that does,
// as written: by name (a wildcard too), by address, the host's own port;
// none for what nothing allows.
func TestMatch(t *testing.T) {
	p, err := ParsePolicy([]string{"api.example.com:443", "*.example.org", "203.0.113.0/24:8080", "host.sandbox.internal:9000", "api.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	a := netip.MustParseAddr("203.0.113.7")
	for _, c := range []struct {
		names []string
		addr  netip.Addr
		port  uint16
		want  string
	}{
		{[]string{"API.example.com."}, a, 443, "api.example.com:443"},
		{[]string{"api.example.com"}, a, 80, "api.example.com"},
		{[]string{"x.y.example.org"}, a, 1, "*.example.org"},
		{nil, a, 8080, "203.0.113.0/24:8080"},
		{nil, a, 8081, ""},
		{[]string{HostInternalName}, a, 9000, "host.sandbox.internal:9000"},
		{[]string{HostInternalName}, a, 9001, ""},
		{[]string{"example.org"}, netip.MustParseAddr("198.51.100.1"), 443, ""},
	} {
		if got := p.Match(c.names, c.addr, c.port); got != c.want {
			t.Errorf("%v %v:%d: %q, want %q", c.names, c.addr, c.port, got, c.want)
		}
	}
}
