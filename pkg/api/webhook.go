package api

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/config"
)

// Callbacks. When an async execution with a callback_url finishes, the
// server POSTs its result (the body GET /api/sandbox/executions/{id}
// answers once it is done) to the URL, with these headers:
//
//	Content-Type: application/json
//	X-Sandbox-Run-Execution-Id: exec_...
//	X-Sandbox-Run-Timestamp: <Unix time in seconds>
//	X-Sandbox-Run-Signature: sha256=<hex of HMAC-SHA256(callback_secret, timestamp + "." + body)>
//
// A receiver recomputes the HMAC over the timestamp, a dot and the raw
// body, compares it in constant time (hmac.Equal) and refuses timestamps
// older than a few minutes, so that a captured delivery cannot be replayed.
//
// Delivery is at least once: a network error, a timeout, 408, 429 or a 5xx
// answer is retried callback_retries times with exponential backoff from
// callback_retry_delay_seconds; any other answer but 2xx (redirects are not
// followed) ends it. A delivery cut short by a shutdown is made again after
// the restart. The state of the delivery (attempts, the last answer or
// error, delivered or given up, and when) is stored with the job after
// every attempt and shown as its "callback" object (jobs.go).
//
// SSRF (Judge0 CVE-2024-29021): a callback may not reach loopback, private,
// link-local, CGNAT, unspecified, multicast or reserved addresses unless
// callback_allow lists the address or its network. IPv6 forms of IPv4
// addresses are judged as the IPv4 address (::ffff:a.b.c.d, NAT64
// 64:ff9b::/96, 6to4 2002::/16, Teredo 2001::/32), and the IPv4-compatible
// ::/96 and IPv4-translated ::ffff:0:0:0/96 ranges are refused whole. The URL is checked when
// the job is submitted (400), and each connection's actual address is
// checked again when it is dialed, so a name that resolves elsewhere later
// (DNS rebinding) cannot bypass the check. No proxy is used.

// Callback headers.
const (
	headerExecutionID = "X-Sandbox-Run-Execution-Id"
	headerTimestamp   = "X-Sandbox-Run-Timestamp"
	headerSignature   = "X-Sandbox-Run-Signature"
)

// SignCallback returns the X-Sandbox-Run-Signature value of a callback.
func SignCallback(secret []byte, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(timestamp))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// addrPolicy says which addresses callbacks may reach.
type addrPolicy struct {
	allow []netip.Prefix
}

// Ranges refused besides those netip classifies (loopback, private,
// link-local, unspecified, multicast).
var refusedCallbackRanges = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "a \"this network\" address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a shared (CGNAT) address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "an IETF protocol address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address"},
}

// IPv6 ranges refused whatever they hold: those that embed an IPv4 address
// but are not routed on the internet (a host or a translator may still
// deliver them to the embedded address, so ::127.0.0.1 could reach
// loopback), and other ranges that are not globally reachable.
var refusedIPv6Ranges = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("::/96"), "an IPv4-compatible IPv6 address (::/96, deprecated)"},
	{netip.MustParsePrefix("::ffff:0:0:0/96"), "an IPv4-translated IPv6 address (::ffff:0:0:0/96)"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a local-use NAT64 address (64:ff9b:1::/48)"},
	{netip.MustParsePrefix("100::/64"), "a discard-only address"},
	{netip.MustParsePrefix("2001:db8::/32"), "a documentation address"},
	{netip.MustParsePrefix("fec0::/10"), "a site-local address"},
}

// IPv6 prefixes that embed a routable IPv4 address (NAT64, 6to4, Teredo):
// the embedded address is checked as if it were dialed.
var (
	nat64Prefix = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour   = netip.MustParsePrefix("2002::/16")
	teredo      = netip.MustParsePrefix("2001::/32")
)

// embeddedIPv4 returns the IPv4 address a refused IPv6 range embeds in its
// last 32 bits (::/96, ::ffff:0:0:0/96), if any.
func embeddedIPv4(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() {
		return netip.Addr{}, false
	}
	b := a.As16()
	return netip.AddrFrom4([4]byte(b[12:16])), true
}

// refusedAddrError is a callback address the policy refuses.
type refusedAddrError struct {
	addr netip.Addr
	what string
}

func (e *refusedAddrError) Error() string {
	return fmt.Sprintf("%s is %s; callbacks may not reach it unless callback_allow lists it", e.addr, e.what)
}

// check refuses an address callbacks may not reach.
func (p *addrPolicy) check(a netip.Addr) error {
	a = a.WithZone("").Unmap()
	for _, pfx := range p.allow {
		if pfx.Contains(a) {
			return nil
		}
	}
	if what := classifyAddr(a); what != "" {
		return &refusedAddrError{a, what}
	}
	return nil
}

func classifyAddr(a netip.Addr) string {
	switch {
	case !a.IsValid():
		return "not an address"
	case a.IsLoopback():
		return "a loopback address"
	case a.IsPrivate():
		return "a private address"
	case a.IsMulticast():
		return "a multicast address"
	case a.IsLinkLocalUnicast():
		return "a link-local address"
	case a.IsUnspecified():
		return "the unspecified address"
	}
	for _, r := range refusedCallbackRanges {
		if r.prefix.Contains(a) {
			return r.what
		}
	}
	if !a.Is6() {
		return ""
	}
	for _, r := range refusedIPv6Ranges {
		if r.prefix.Contains(a) {
			if v4, ok := embeddedIPv4(a); ok && r.prefix.Bits() == 96 {
				if what := classifyAddr(v4); what != "" {
					return fmt.Sprintf("%s embedding %s, %s", r.what, v4, what)
				}
			}
			return r.what
		}
	}
	b := a.As16()
	switch {
	case nat64Prefix.Contains(a):
		if what := classifyAddr(netip.AddrFrom4([4]byte(b[12:16]))); what != "" {
			return what + " (NAT64)"
		}
	case sixToFour.Contains(a):
		if what := classifyAddr(netip.AddrFrom4([4]byte(b[2:6]))); what != "" {
			return what + " (6to4)"
		}
	case teredo.Contains(a):
		// The Teredo server in bits 32-63, the client (inverted) in the
		// last 32.
		if what := classifyAddr(netip.AddrFrom4([4]byte(b[4:8]))); what != "" {
			return what + " (Teredo server)"
		}
		client := [4]byte{^b[12], ^b[13], ^b[14], ^b[15]}
		if what := classifyAddr(netip.AddrFrom4(client)); what != "" {
			return what + " (Teredo client)"
		}
	}
	return ""
}

// checkURL validates a callback_url at submission: http or https, a host,
// no credentials, and every address the host resolves to allowed.
func (p *addrPolicy) checkURL(ctx context.Context, raw string) error {
	const maxLen = 2048
	if len(raw) > maxLen {
		return badRequest("callback_url is longer than %d bytes", maxLen)
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Opaque != "" {
		return badRequest("callback_url %q is not an absolute http or https URL", raw)
	}
	if s := strings.ToLower(u.Scheme); s != "http" && s != "https" {
		return badRequest("callback_url scheme %q: use http or https", u.Scheme)
	}
	if u.User != nil {
		return badRequest("callback_url must not contain credentials")
	}
	host := u.Hostname()
	if host == "" {
		return badRequest("callback_url has no host")
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return badRequest("callback_url port %q is invalid", port)
		}
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if err := p.check(a); err != nil {
			return badRequest("callback_url refused: %v", err)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return badRequest("callback_url host %q does not resolve: %v", host, err)
	}
	for _, a := range addrs {
		if err := p.check(a); err != nil {
			return badRequest("callback_url refused: %s resolves to %v", host, err)
		}
	}
	return nil
}

// control is the dialer's check of the address it is about to connect to.
func (p *addrPolicy) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("callback address %q: %w", address, err)
	}
	return p.check(ap.Addr())
}

// webhookSender delivers callbacks.
type webhookSender struct {
	client  *http.Client
	secret  []byte
	retries int
	delay   time.Duration
	policy  *addrPolicy
}

func newWebhookSender(cfg *Config) *webhookSender {
	allow, _ := config.ParseAllowList(cfg.CallbackAllow) // checked by Config.Validate
	policy := &addrPolicy{allow: allow}
	timeout := seconds(cfg.CallbackTimeoutSeconds)
	dialer := &net.Dialer{Timeout: timeout, Control: policy.control}
	transport := &http.Transport{
		Proxy:                 nil, // a proxy would dial for us, unchecked
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
	}
	return &webhookSender{
		client: &http.Client{Transport: transport, Timeout: timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		secret: []byte(cfg.CallbackSecret), retries: cfg.CallbackRetries,
		delay: seconds(cfg.CallbackRetryDelaySeconds), policy: policy,
	}
}

// permanentDeliveryError marks a delivery failure that retrying cannot fix.
type permanentDeliveryError struct{ err error }

func (e *permanentDeliveryError) Error() string { return e.err.Error() }
func (e *permanentDeliveryError) Unwrap() error { return e.err }

// deliveryAttempt is what one delivery attempt came to.
type deliveryAttempt struct {
	At         time.Time
	HTTPStatus int           // the receiver's answer; 0 when there was none
	Err        error         // nil when the receiver accepted the delivery
	Retry      time.Duration // when Err is not nil: the wait before the next attempt; 0 for none
}

// deliver POSTs body to rawURL until it is accepted, the retries are used
// up or ctx ends. It returns the attempts made and, when the delivery
// failed, why. A canceled ctx returns ctx's error. report, if set, is
// called after every attempt that ctx did not cut short.
func (w *webhookSender) deliver(ctx context.Context, rawURL, id string, body []byte, report func(deliveryAttempt)) (int, error) {
	delay := w.delay
	var last error
	for attempt := 1; ; attempt++ {
		at := time.Now()
		var status int
		status, last = w.post(ctx, rawURL, id, body)
		if last == nil {
			if report != nil {
				report(deliveryAttempt{At: at, HTTPStatus: status})
			}
			return attempt, nil
		}
		if ctx.Err() != nil {
			return attempt, ctx.Err()
		}
		var perm *permanentDeliveryError
		final := errors.As(last, &perm) || attempt > w.retries
		if report != nil {
			da := deliveryAttempt{At: at, HTTPStatus: status, Err: last}
			if !final {
				da.Retry = delay
			}
			report(da)
		}
		if final {
			return attempt, last
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return attempt, ctx.Err()
		case <-t.C:
		}
		delay = min(2*delay, 5*time.Minute)
	}
}

// post makes one attempt and returns the receiver's HTTP status (0 when
// there was no answer).
func (w *webhookSender) post(ctx context.Context, rawURL, id string, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, bytes.NewReader(body))
	if err != nil {
		return 0, &permanentDeliveryError{err}
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "sandbox-run-callback/1")
	req.Header.Set(headerExecutionID, id)
	req.Header.Set(headerTimestamp, ts)
	req.Header.Set(headerSignature, SignCallback(w.secret, ts, body))
	resp, err := w.client.Do(req)
	if err != nil {
		var refused *refusedAddrError
		if errors.As(err, &refused) {
			return 0, &permanentDeliveryError{refused}
		}
		return 0, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return c, nil
	case c >= 500, c == http.StatusRequestTimeout, c == http.StatusTooManyRequests:
		return c, fmt.Errorf("the receiver answered %s", resp.Status)
	default:
		return c, &permanentDeliveryError{fmt.Errorf("the receiver answered %s", resp.Status)}
	}
}
