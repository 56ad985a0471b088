package secrets

import (
	"errors"
	"fmt"
	"net/netip"
	"net/textproto"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// hostInternal is the name the sandbox's egress gives the server's host.
const hostInternal = "host.sandbox.internal"

var namePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// ValidName says whether name may be a secret's: an environment
// variable's name of at most 64 characters (its placeholder goes there).
func ValidName(name string) bool { return namePattern.MatchString(name) }

// reservedHeaders are the headers a secret may not set: they frame the
// request or its connection (canonical form).
var reservedHeaders = []string{"Host", "Content-Length", "Transfer-Encoding", "Connection", "Upgrade",
	"Keep-Alive", "Proxy-Connection", "Te", "Trailer"}

// invalid is an error wrapping ErrInvalid about field.
func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
}

// check returns sec validated and normalized, without its times.
func check(sec Secret) (Secret, error) {
	out := Secret{Name: sec.Name, Value: sec.Value}
	if !namePattern.MatchString(sec.Name) {
		return Secret{}, invalid("name", "%q: want a letter or _ then at most 63 letters, digits or _ (it is an environment variable's name)", sec.Name)
	}
	switch {
	case sec.Value == "":
		return Secret{}, invalid("value", "empty")
	case len(sec.Value) > MaxValue:
		return Secret{}, invalid("value", "%d bytes, at most %d", len(sec.Value), MaxValue)
	case strings.ContainsAny(sec.Value, "\x00\r\n"):
		return Secret{}, invalid("value", "contains NUL, CR or LF")
	}
	if len(sec.Hosts) == 0 || len(sec.Hosts) > MaxHosts {
		return Secret{}, invalid("hosts", "%d, want 1 to %d", len(sec.Hosts), MaxHosts)
	}
	for i, h := range sec.Hosts {
		n, err := normalizeHost(h)
		if err != nil {
			return Secret{}, invalid(fmt.Sprintf("hosts[%d]", i), "%q: %v", h, err)
		}
		if !slices.Contains(out.Hosts, n) {
			out.Hosts = append(out.Hosts, n)
		}
	}
	if sec.Header != nil {
		h := *sec.Header
		switch {
		case !isToken(h.Name):
			return Secret{}, invalid("header.name", "%q: want a header name (letters, digits and !#$%%&'*+-.^_`|~)", h.Name)
		case slices.Contains(reservedHeaders, textproto.CanonicalMIMEHeaderKey(h.Name)):
			return Secret{}, invalid("header.name", "%q: a secret may not set it", h.Name)
		case len(h.Format) > MaxFormat:
			return Secret{}, invalid("header.format", "%d bytes, at most %d", len(h.Format), MaxFormat)
		case h.Format != "" && strings.Count(h.Format, "{value}") != 1:
			return Secret{}, invalid("header.format", `%q: want "{value}" exactly once`, h.Format)
		case strings.ContainsAny(h.Format, "\x00\r\n") || !utf8.ValidString(h.Format):
			return Secret{}, invalid("header.format", "contains NUL, CR, LF or invalid UTF-8")
		}
		out.Header = &h
	}
	return out, nil
}

// isToken reports whether s is an RFC 7230 token, as a header name is.
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return s != ""
}

// normalizeHost returns a host of a secret (name, *.name or IP address,
// optionally with :port) in lower case, without a final dot, IPv6 in
// brackets and the port in decimal without leading zeros.
func normalizeHost(s string) (string, error) {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return "", errors.New("not ASCII (write an international name in punycode)")
		}
	}
	host, port, hasPort := strings.ToLower(s), "", false
	if rest, ok := strings.CutPrefix(host, "["); ok {
		var after string
		host, after, ok = strings.Cut(rest, "]")
		if addr, err := netip.ParseAddr(host); !ok || err != nil || !addr.Is6() {
			return "", errors.New("want [IPv6 address] or [IPv6 address]:port")
		}
		if after != "" {
			port, hasPort = strings.CutPrefix(after, ":")
			if !hasPort {
				return "", errors.New("want [IPv6 address]:port")
			}
		}
	} else if strings.Count(host, ":") == 1 {
		host, port, hasPort = strings.Cut(host, ":")
	}
	if hasPort {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || strings.Trim(port, "0123456789") != "" {
			return "", fmt.Errorf("port %q, want 1-65535", port)
		}
		port = ":" + strconv.Itoa(n)
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		switch {
		case addr.Zone() != "":
			return "", errors.New("an address with a zone is not allowed")
		case addr.Is4In6():
			return "", errors.New("IPv4-mapped IPv6: write the IPv4 form")
		case addr.Is6():
			return "[" + addr.String() + "]" + port, nil
		}
		return addr.String() + port, nil
	}
	name, wildcard := strings.CutPrefix(strings.TrimSuffix(host, "."), "*.")
	if err := checkName(name); err != nil {
		return "", err
	}
	switch {
	case wildcard && !strings.Contains(name, "."):
		return "", errors.New(`a wildcard needs at least two labels after "*." (*.example.com)`)
	case name == hostInternal && wildcard:
		return "", errors.New(hostInternal + " takes no wildcard (" + hostInternal + ", or with :PORT)")
	case wildcard:
		name = "*." + name
	}
	return name + port, nil
}

// checkName checks a DNS name in lower case: dot-separated labels of 1 to
// 63 letters, digits, - or _, not starting or ending with -, the last not
// all digits.
func checkName(name string) error {
	if name == "" || len(name) > 253 {
		return errors.New("want a host name, *.name or an IP address, optionally with :port")
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return errors.New("bad host name: a label is empty, over 63 bytes, or starts or ends with -")
		}
		if strings.Trim(l, "abcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
			return errors.New("bad host name: want letters, digits, - and _")
		}
	}
	if strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return errors.New("bad host name or IP address")
	}
	return nil
}
