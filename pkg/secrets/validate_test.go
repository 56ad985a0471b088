package secrets

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/pkg/netpolicy"
)

// TestInvalid: each bad input is an error wrapping ErrInvalid that names
// the field, and never holds the value.
func TestInvalid(t *testing.T) {
	const value = "s3cr3t-value"
	ok := Secret{Name: "TOKEN", Value: value, Hosts: []string{"api.example.com"}}
	hosts := func(h ...string) func(*Secret) { return func(s *Secret) { s.Hosts = h } }
	header := func(name, format string) func(*Secret) {
		return func(s *Secret) { s.Header = &Header{Name: name, Format: format} }
	}
	many := make([]string, MaxHosts+1)
	for i := range many {
		many[i] = "example.com"
	}
	cases := []struct {
		field string
		edit  func(*Secret)
	}{
		{"name", func(s *Secret) { s.Name = "" }},
		{"name", func(s *Secret) { s.Name = "1ABC" }},
		{"name", func(s *Secret) { s.Name = "A-B" }},
		{"name", func(s *Secret) { s.Name = "A B" }},
		{"name", func(s *Secret) { s.Name = "A" + strings.Repeat("b", 64) }},
		{"name", func(s *Secret) { s.Name = "É" }},
		{"value", func(s *Secret) { s.Value = "" }},
		{"value", func(s *Secret) { s.Value = strings.Repeat("v", MaxValue+1) }},
		{"value", func(s *Secret) { s.Value = value + "\x00" }},
		{"value", func(s *Secret) { s.Value = value + "\r" }},
		{"value", func(s *Secret) { s.Value = value + "\nX-Injected: 1" }},
		{"hosts", hosts()},
		{"hosts", hosts(many...)},
		{"hosts[0]", hosts("")},
		{"hosts[1]", hosts("example.com", "https://example.com")},
		{"hosts[0]", hosts("example.com/path")},
		{"hosts[0]", hosts("exa mple.com")},
		{"hosts[0]", hosts("ex_ample.com:0")},
		{"hosts[0]", hosts("example.com:65536")},
		{"hosts[0]", hosts("example.com:+443")},
		{"hosts[0]", hosts("example.com:")},
		{"hosts[0]", hosts("example.com:443:1")},
		{"hosts[0]", hosts("*.com")},
		{"hosts[0]", hosts("*")},
		{"hosts[0]", hosts("a.*.example.com")},
		{"hosts[0]", hosts("*.*.example.com")},
		{"hosts[0]", hosts("-a.example.com")},
		{"hosts[0]", hosts("a..example.com")},
		{"hosts[0]", hosts(strings.Repeat("a", 64) + ".com")},
		{"hosts[0]", hosts(strings.Repeat("a.", 127) + "com")},
		{"hosts[0]", hosts("1.2.3.256")},
		{"hosts[0]", hosts("bücher.example")},
		{"hosts[0]", hosts("example.\u212aom")},
		{"hosts[0]", hosts("[1.2.3.4]")},
		{"hosts[0]", hosts("[::1")},
		{"hosts[0]", hosts("[::1]443")},
		{"hosts[0]", hosts("[::1]:99999")},
		{"hosts[0]", hosts("fe80::1%eth0")},
		{"hosts[0]", hosts("::ffff:1.2.3.4")},
		{"hosts[0]", hosts("10.0.0.0/8")},
		{"hosts[0]", hosts("*.host.sandbox.internal:80")},
		{"header.name", header("", "")},
		{"header.name", header("Bad Name", "")},
		{"header.name", header("X:Y", "")},
		{"header.name", header("host", "")},
		{"header.name", header("Content-Length", "")},
		{"header.name", header("transfer-encoding", "")},
		{"header.name", header("Connection", "")},
		{"header.name", header("UPGRADE", "")},
		{"header.format", header("Authorization", "Bearer")},
		{"header.format", header("Authorization", "{value}{value}")},
		{"header.format", header("Authorization", "Bearer {value}\r\nX: 1")},
		{"header.format", header("Authorization", "{value}\x00")},
		{"header.format", header("Authorization", "{value}\xff")},
		{"header.format", header("Authorization", "{value}"+strings.Repeat("x", MaxFormat))},
	}
	s := newStore(t, memory{}, testKey(1))
	if _, err := s.Put("a", ok); err != nil {
		t.Fatalf("the valid secret: %v", err)
	}
	for _, c := range cases {
		sec := ok
		c.edit(&sec)
		_, err := s.Put("a", sec)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), ": "+c.field+": ") || strings.Contains(err.Error(), value) {
			t.Errorf("%+v (header %+v): %v, want ErrInvalid naming %s", sec, sec.Header, err, c.field)
		}
	}
}

// TestHosts: hosts are stored normalized, and every normalized host is an
// entry the egress's allow-list accepts.
func TestHosts(t *testing.T) {
	cases := map[string]string{
		"API.Example.COM":            "api.example.com",
		"example.com.":               "example.com",
		"example.com:0443":           "example.com:443",
		"Example.com.:8080":          "example.com:8080",
		"*.Example.com":              "*.example.com",
		"*.example.com:443":          "*.example.com:443",
		"localhost":                  "localhost",
		"_svc.example.com":           "_svc.example.com",
		"xn--bcher-kva.example":      "xn--bcher-kva.example",
		"203.0.113.7":                "203.0.113.7",
		"203.0.113.7:8443":           "203.0.113.7:8443",
		"2001:DB8::1":                "[2001:db8::1]",
		"[2001:db8:0::1]":            "[2001:db8::1]",
		"[2001:db8::1]:443":          "[2001:db8::1]:443",
		"host.sandbox.internal:8000": "host.sandbox.internal:8000",
		"Host.Sandbox.Internal":      "host.sandbox.internal",
	}
	s := newStore(t, memory{}, testKey(1))
	for in, want := range cases {
		sec, err := s.Put("a", Secret{Name: "T", Value: "v", Hosts: []string{in, want}})
		if err != nil || !slices.Equal(sec.Hosts, []string{want}) {
			t.Errorf("%q: %v %v, want [%s]", in, sec.Hosts, err, want)
			continue
		}
		// Every host is an allow-list's entry too, but the server's host
		// with no port (a secret's for all its ports the run lists).
		if _, err := netpolicy.ParsePolicy(sec.Hosts); err != nil && want != "host.sandbox.internal" {
			t.Errorf("%q: the allow-list refuses it: %v", want, err)
		}
	}
	if got, _ := s.List("a"); len(got) != 1 {
		t.Fatalf("%+v", got)
	}
}

// TestHeader: a header name of any token other than the framing ones is
// kept as given, and so is its format.
func TestHeader(t *testing.T) {
	s := newStore(t, memory{}, testKey(1))
	for _, h := range []Header{{"Authorization", "Bearer {value}"}, {"x-api-key", ""}, {"X!#$%&'*+-.^_`|~9", "token={value};"}} {
		sec, err := s.Put("a", Secret{Name: "T", Value: "v", Hosts: []string{"example.com"}, Header: &h})
		if err != nil || sec.Header == nil || *sec.Header != h || sec.Header == &h {
			t.Errorf("%+v: %+v %v", h, sec.Header, err)
		}
	}
}
