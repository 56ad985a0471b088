package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/netpolicy"
)

// addrPolicy says which addresses callbacks may reach (the SSRF policy of
// the package doc): netpolicy's, but for the networks callback_allow
// lists. Its Check refuses with a *netpolicy.RefusedError, and its Control
// is the dialer's check of the address it is about to connect to.
type addrPolicy struct {
	netpolicy.Checker
}

func newAddrPolicy(allow []netip.Prefix) *addrPolicy {
	return &addrPolicy{netpolicy.Checker{Allow: allow, Hint: "callbacks may not reach it unless callback_allow lists it"}}
}

// checkURL validates a callback_url at submission: http or https, a host,
// no credentials, and every address the host resolves to allowed.
func (p *addrPolicy) checkURL(ctx context.Context, raw string) error {
	const maxLen = 2048
	if len(raw) > maxLen {
		return fmt.Errorf("callback_url is longer than %d bytes", maxLen)
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Opaque != "" {
		return fmt.Errorf("callback_url %q is not an absolute http or https URL", raw)
	}
	if s := strings.ToLower(u.Scheme); s != "http" && s != "https" {
		return fmt.Errorf("callback_url scheme %q: use http or https", u.Scheme)
	}
	if u.User != nil {
		return errors.New("callback_url must not contain credentials")
	}
	host := u.Hostname()
	if host == "" {
		return errors.New("callback_url has no host")
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("callback_url port %q is invalid", port)
		}
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if err := p.Check(a); err != nil {
			return fmt.Errorf("callback_url refused: %v", err)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return fmt.Errorf("callback_url host %q does not resolve: %v", host, err)
	}
	for _, a := range addrs {
		if err := p.Check(a); err != nil {
			return fmt.Errorf("callback_url refused: %s resolves to %v", host, err)
		}
	}
	return nil
}
