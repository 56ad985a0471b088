package webhook

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/netpolicy"
)

// Real deliveries to receivers on 127.0.0.1, and the address policy.

const testSecret = "test-callback-secret-0123456789"

// testSender is a sender with quick retries that may reach allow.
func testSender(t testing.TB, allow ...string) *Sender {
	t.Helper()
	prefixes, err := config.ParseAllowList(allow)
	if err != nil {
		t.Fatal(err)
	}
	return New(Config{Secret: testSecret, Retries: 5, RetryDelay: 50 * time.Millisecond, Timeout: 5 * time.Second, Allow: prefixes})
}

// receiver is a callback receiver on 127.0.0.1 that answers the first
// len(statuses) calls with them, then 204.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	calls    []receivedCall
	statuses []int
}

type receivedCall struct {
	header http.Header
	body   []byte
}

func newReceiver(t testing.TB, statuses ...int) *receiver {
	rc := &receiver{statuses: statuses}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		n := len(rc.calls)
		rc.calls = append(rc.calls, receivedCall{r.Header.Clone(), body})
		rc.mu.Unlock()
		if n < len(rc.statuses) {
			w.WriteHeader(rc.statuses[n])
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) received() []receivedCall {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]receivedCall(nil), rc.calls...)
}

func (rc *receiver) port() string { return rc.URL[strings.LastIndex(rc.URL, ":")+1:] }

// Retried answers are retried, with the wait reported; every attempt is
// signed; a refusing answer ends the delivery; no secret, no signature.
func TestDeliver(t *testing.T) {
	t.Parallel()
	w := testSender(t, "127.0.0.1/32")
	rc := newReceiver(t, http.StatusInternalServerError, http.StatusTooManyRequests)
	body := []byte(`{"status":"completed"}`)
	var attempts []Attempt
	n, err := w.Deliver(context.Background(), rc.URL+"/hook?x=1", "exec_01", body, func(a Attempt) { attempts = append(attempts, a) })
	if err != nil || n != 3 || len(attempts) != 3 {
		t.Fatalf("delivery: %d attempts (%d reported), %v", n, len(attempts), err)
	}
	if a := attempts[0]; a.HTTPStatus != 500 || a.Err == nil || a.Retry != 50*time.Millisecond || a.At.IsZero() {
		t.Errorf("first attempt %+v", a)
	}
	if a := attempts[1]; a.HTTPStatus != 429 || a.Retry != 100*time.Millisecond {
		t.Errorf("second attempt %+v", a)
	}
	if a := attempts[2]; a.HTTPStatus != 204 || a.Err != nil || a.Retry != 0 {
		t.Errorf("last attempt %+v", a)
	}
	for i, c := range rc.received() {
		ts := c.header.Get("X-Sandbox-Run-Timestamp")
		sec, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || time.Since(time.Unix(sec, 0)).Abs() > time.Minute {
			t.Errorf("call %d: timestamp %q", i, ts)
		}
		mac := hmac.New(sha256.New, []byte(testSecret))
		mac.Write([]byte(ts + "."))
		mac.Write(c.body)
		want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
		if got := c.header.Get("X-Sandbox-Run-Signature"); got != want || got != SignCallback([]byte(testSecret), ts, c.body) {
			t.Errorf("call %d: signature %q, want %q", i, got, want)
		}
		if c.header.Get("X-Sandbox-Run-Execution-Id") != "exec_01" || c.header.Get("Content-Type") != "application/json" || string(c.body) != string(body) {
			t.Errorf("call %d: %v %s", i, c.header, c.body)
		}
	}

	rc = newReceiver(t, http.StatusGone)
	attempts = nil
	n, err = w.Deliver(context.Background(), rc.URL, "exec_02", body, func(a Attempt) { attempts = append(attempts, a) })
	if err == nil || !strings.Contains(err.Error(), "410") || n != 1 || len(attempts) != 1 || attempts[0].Retry != 0 || len(rc.received()) != 1 {
		t.Errorf("a 410: %d attempts, %v, %+v", n, err, attempts)
	}

	// A canceled delivery says so, and is not reported.
	rc = newReceiver(t, http.StatusServiceUnavailable)
	ctx, cancel := context.WithCancel(context.Background())
	attempts = nil
	n, err = w.Deliver(ctx, rc.URL, "exec_03", body, func(a Attempt) { attempts = append(attempts, a); cancel() })
	if !errors.Is(err, context.Canceled) || n != 1 || len(attempts) != 1 {
		t.Errorf("canceled: %d attempts, %v, %+v", n, err, attempts)
	}

	// Without a secret the callback goes unsigned.
	rc = newReceiver(t)
	n, err = New(Config{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}).Deliver(context.Background(), rc.URL, "exec_04", body, nil)
	if got := rc.received(); n != 1 || err != nil || len(got) != 1 || got[0].header.Get(headerSignature) != "" ||
		got[0].header.Get(headerExecutionID) != "exec_04" {
		t.Errorf("without a secret: %d attempts, %v, %d calls", n, err, len(got))
	}
}

// The dial-time check: a name that resolves to a refused address (here
// localhost; DNS rebinding would look the same) is refused when it is
// connected to, whatever was checked before.
func TestCallbackDialTimeRefusal(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t)
	attempts, err := testSender(t).Deliver(context.Background(), "http://localhost:"+rc.port()+"/hook", "exec_00", []byte(`{}`), nil)
	var refused *netpolicy.RefusedError
	if err == nil || attempts != 1 || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("delivery to localhost: %d attempts, %v", attempts, err)
	} else if !errors.As(err, &refused) {
		t.Errorf("not a refusal: %v", err)
	}
	if n := len(rc.received()); n != 0 {
		t.Errorf("the receiver got %d calls", n)
	}
	// Allowed, the same delivery goes through.
	if attempts, err := testSender(t, "127.0.0.0/8", "::1").Deliver(context.Background(), "http://localhost:"+rc.port()+"/hook", "exec_00", []byte(`{}`), nil); err != nil || attempts != 1 {
		t.Errorf("allowed delivery: %d attempts, %v", attempts, err)
	}
	if n := len(rc.received()); n != 1 {
		t.Errorf("the receiver got %d calls, want 1", n)
	}
}

func TestCallbackAddressPolicy(t *testing.T) {
	t.Parallel()
	allow, err := config.ParseAllowList([]string{"10.9.0.0/16", "fd12::1"})
	if err != nil {
		t.Fatal(err)
	}
	p := newAddrPolicy(allow)
	for addr, ok := range map[string]bool{
		"8.8.8.8": true, "1.1.1.1": true, "2606:4700:4700::1111": true, "10.9.3.4": true, "fd12::1": true,
		"127.0.0.1": false, "127.1.2.3": false, "::1": false, "::ffff:127.0.0.1": false, "10.0.0.1": false,
		"172.16.0.1": false, "172.31.255.255": false, "192.168.1.1": false, "fc00::1": false, "fd12::2": false,
		"169.254.169.254": false, "fe80::1%eth0": false, "0.0.0.0": false, "::": false, "100.64.0.1": false,
		"100.127.255.255": false, "224.0.0.1": false, "ff02::1": false, "255.255.255.255": false,
		"198.18.0.1": false, "64:ff9b::a00:1": false, "64:ff9b::808:808": true, "2002:7f00:1::": false,
		"172.32.0.1": true, "100.128.0.1": true,
	} {
		err := p.Check(netip.MustParseAddr(addr))
		if (err == nil) != ok {
			t.Errorf("%s: %v, want allowed=%v", addr, err, ok)
		}
	}
	for _, bad := range []string{"localhost", "10.0.0.0/33", "fe80::1%eth0", ""} {
		if _, err := config.ParseAllowList([]string{bad}); err == nil {
			t.Errorf("callback_allow %q accepted", bad)
		}
	}
}

// CheckURL, at submission: the URL's form, then every address its host
// names.
func TestCheckURL(t *testing.T) {
	t.Parallel()
	w := testSender(t)
	for raw, want := range map[string]string{
		"http://127.0.0.1:8080/":                      "loopback",
		"http://localhost:8080/":                      "loopback",
		"http://[::ffff:127.0.0.1]/":                  "loopback",
		"http://10.1.2.3/":                            "private",
		"http://169.254.169.254/latest/":              "169.254.169.254 is a link-local address (a cloud metadata service)",
		"http://169.254.1.1/":                         "link-local",
		"http://192.0.2.1/":                           "documentation",
		"http://100.64.0.1/":                          "CGNAT",
		"ftp://example.com/x":                         "http or https",
		"http://user:pw@example.com/":                 "credentials",
		"/relative":                                   "absolute",
		"http://:80/":                                 "no host",
		"http://8.8.8.8:99999/":                       "port",
		"http://8.8.8.8/" + strings.Repeat("a", 2048): "longer than 2048 bytes",
	} {
		if err := w.CheckURL(context.Background(), raw); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%.60s: %v, want refused with %q", raw, err, want)
		}
	}
	for _, raw := range []string{"http://8.8.8.8/hook", "https://[2606:4700:4700::1111]:8443/x?y=1"} {
		if err := w.CheckURL(context.Background(), raw); err != nil {
			t.Errorf("%s refused: %v", raw, err)
		}
	}
	if err := testSender(t, "127.0.0.1").CheckURL(context.Background(), "http://127.0.0.1:8080/"); err != nil {
		t.Errorf("an allowed address refused: %v", err)
	}
}

// IPv6 forms of internal IPv4 addresses are refused like the IPv4 forms:
// by the policy, and when dialed.
func TestCallbackEmbeddedIPv4(t *testing.T) {
	t.Parallel()
	p := newAddrPolicy(nil)
	for addr, want := range map[string]string{
		"::127.0.0.1":                          "loopback",
		"::7f00:1":                             "loopback",
		"::10.0.0.1":                           "private",
		"::8.8.8.8":                            "IPv4-compatible",
		"::ffff:0:7f00:1":                      "loopback",
		"::ffff:0:a9fe:a9fe":                   "metadata",
		"::ffff:0:808:808":                     "IPv4-translated",
		"::ffff:127.0.0.1":                     "loopback",
		"64:ff9b::127.0.0.1":                   "NAT64 address (64:ff9b::/96) embedding 127.0.0.1, a loopback address",
		"64:ff9b::a9fe:a9fe":                   "NAT64 address (64:ff9b::/96) embedding 169.254.169.254, a link-local address (a cloud metadata service)",
		"64:ff9b::a9fe:101":                    "NAT64 address (64:ff9b::/96) embedding 169.254.1.1, a link-local address",
		"64:ff9b:1::808:808":                   "local-use NAT64",
		"2002:7f00:1::1":                       "6to4 address (2002::/16) embedding 127.0.0.1, a loopback address",
		"2002:c0a8:101::1":                     "6to4 address (2002::/16) embedding 192.168.1.1, a private address",
		"2001:0:4136:e378:8000:63bf:80ff:fffe": "client 127.0.0.1 is a loopback address",
		"2001:0:a00:1::1":                      "server 10.0.0.1 is a private address",
		"fec0::1":                              "site-local",
	} {
		err := p.Check(netip.MustParseAddr(addr))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want refused as %q", addr, err, want)
		}
	}
	for _, addr := range []string{"::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1", "2001:0:4136:e378:8000:63bf:f7f7:f7f7"} {
		if err := p.Check(netip.MustParseAddr(addr)); err != nil {
			t.Errorf("%s refused: %v", addr, err)
		}
	}

	// At dial time too (what a name resolving there would reach).
	rc := newReceiver(t)
	w := testSender(t)
	for _, host := range []string{"[::127.0.0.1]", "[::ffff:0:7f00:1]"} {
		attempts, err := w.Deliver(context.Background(), "http://"+host+":"+rc.port()+"/hook", "exec_00", []byte(`{}`), nil)
		var refused *netpolicy.RefusedError
		if !errors.As(err, &refused) || attempts != 1 || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("delivery to %s: %d attempts, %v; want refused at dial time", host, attempts, err)
		}
	}
	if n := len(rc.received()); n != 0 {
		t.Errorf("the receiver got %d calls", n)
	}
}

// ownAddr returns one of this machine's own addresses that is not
// loopback (nor link-local, which a URL would need a zone for).
func ownAddr(t *testing.T) netip.Addr {
	t.Helper()
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var found []netip.Addr
	for _, ia := range ifaddrs {
		n, ok := ia.(*net.IPNet)
		if !ok {
			continue
		}
		a, ok := netip.AddrFromSlice(n.IP)
		if a = a.Unmap(); !ok || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsMulticast() || a.IsUnspecified() {
			continue
		}
		found = append(found, a)
	}
	slices.SortStableFunc(found, func(a, b netip.Addr) int { return cmp.Compare(a.BitLen(), b.BitLen()) }) // IPv4 first
	if len(found) == 0 {
		t.Skip("this machine has no address but loopback and link-local ones")
	}
	return found[0]
}

// A callback_url naming one of the server's own addresses (not loopback:
// its eth0's, say) is refused at submission and never delivered, whatever
// else the address is; callback_allow listing it lets it through.
func TestCallbackHostOwnAddress(t *testing.T) {
	t.Parallel()
	own := ownAddr(t)
	// The receiver listens on 127.0.0.1 only (tests listen nowhere else):
	// its port is free on own, so nothing can answer there.
	rc := newReceiver(t)
	hook := "http://" + net.JoinHostPort(own.String(), rc.port()) + "/hook"
	w := testSender(t)
	err := w.CheckURL(context.Background(), hook)
	if err == nil || !strings.Contains(err.Error(), own.String()+" is ") || !strings.Contains(err.Error(), "this host's own address") {
		t.Errorf("CheckURL(%s) = %v, want refused as this host's own address", hook, err)
	}
	attempts, err := w.Deliver(context.Background(), hook, "exec_00", []byte(`{}`), nil)
	var refused *netpolicy.RefusedError
	if !errors.As(err, &refused) || attempts != 1 || refused.Addr != own || !strings.Contains(refused.Reason, "this host's own address") {
		t.Errorf("delivery to %s: %d attempts, %v; want refused at dial time", hook, attempts, err)
	}
	if n := len(rc.received()); n != 0 {
		t.Errorf("the receiver got %d calls", n)
	}

	// Listed in callback_allow, it passes CheckURL and is dialed: the
	// connection, not the policy, fails.
	allowed := New(Config{Timeout: 5 * time.Second, Allow: []netip.Prefix{netip.PrefixFrom(own, own.BitLen())}})
	if err := allowed.CheckURL(context.Background(), hook); err != nil {
		t.Errorf("CheckURL(%s) with callback_allow listing it: %v", hook, err)
	}
	attempts, err = allowed.Deliver(context.Background(), hook, "exec_00", []byte(`{}`), nil)
	var opErr *net.OpError
	if errors.As(err, &refused) || !errors.As(err, &opErr) || opErr.Op != "dial" || attempts != 1 {
		t.Errorf("delivery to %s with callback_allow listing it: %d attempts, %v; want a connection error", hook, attempts, err)
	}
}
