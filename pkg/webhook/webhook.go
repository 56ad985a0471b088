// Package webhook sends the callbacks of async executions: signed HTTP
// POSTs, retried with backoff, that may reach only the addresses its SSRF
// policy allows.
//
// When an async execution with a callback_url finishes, the server POSTs
// its result (the body GET /api/sandbox/executions/{id} answers once it is
// done) to the URL, with these headers:
//
//	Content-Type: application/json
//	X-Sandbox-Run-Execution-Id: exec_...
//	X-Sandbox-Run-Timestamp: <Unix time in seconds>
//	X-Sandbox-Run-Signature: sha256=<hex of HMAC-SHA256(callback_secret, timestamp + "." + body)>
//
// A receiver recomputes the HMAC over the timestamp, a dot and the raw
// body (SignCallback), compares it in constant time (hmac.Equal) and
// refuses timestamps older than a few minutes, so that a captured delivery
// cannot be replayed.
//
// Delivery is at least once: a network error, a timeout, 408, 429 or a 5xx
// answer is retried callback_retries times with exponential backoff from
// callback_retry_delay_seconds; any other answer but 2xx (redirects are not
// followed) ends it. pkg/jobs decides when to deliver, makes a delivery cut
// short by a shutdown again after the restart, and stores the delivery's
// state (attempts, the last answer or error, delivered or given up, and
// when) with the job after every attempt: the job's "callback" object.
//
// SSRF (Judge0 CVE-2024-29021): a callback may not reach what pkg/netpolicy
// refuses (loopback, private, link-local, CGNAT, unspecified, multicast,
// documentation, reserved and cloud metadata addresses, and the server's
// own addresses, those of every interface of its machine) unless
// callback_allow lists the address or its network. IPv6 forms of IPv4
// addresses are judged as the IPv4 address (::ffff:a.b.c.d, NAT64
// 64:ff9b::/96, 6to4 2002::/16, Teredo 2001::/32), and the IPv4-compatible
// ::/96 and IPv4-translated ::ffff:0:0:0/96 ranges are refused whole. The
// URL is checked when the job is submitted (CheckURL), and each
// connection's actual address is checked again when it is dialed, so a
// name that resolves elsewhere later (DNS rebinding) cannot bypass the
// check. No proxy is used.
package webhook

import (
	"bytes"
	"cmp"
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
	"strconv"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/netpolicy"
)

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

// Config sets up a Sender.
type Config struct {
	// Secret signs every callback (callback_secret). Without one,
	// callbacks go unsigned.
	Secret string
	// Method is the callbacks' HTTP method: POST unless set (Judge0's
	// clients expect PUT).
	Method string
	// Retries is how many times a failed delivery is tried again
	// (callback_retries), RetryDelay the wait before the first retry
	// (callback_retry_delay_seconds), doubling up to 5 minutes.
	Retries    int
	RetryDelay time.Duration
	// Timeout bounds each attempt: dialing, TLS, the answer's headers
	// (callback_timeout_seconds).
	Timeout time.Duration
	// Allow lists the networks callbacks may reach although the policy
	// refuses them (callback_allow).
	Allow []netip.Prefix
}

// Sender delivers callbacks.
type Sender struct {
	client  *http.Client
	secret  []byte
	method  string
	retries int
	delay   time.Duration
	policy  *addrPolicy
}

// New builds a Sender.
func New(cfg Config) *Sender {
	policy := newAddrPolicy(cfg.Allow)
	dialer := &net.Dialer{Timeout: cfg.Timeout, Control: policy.Control}
	transport := &http.Transport{
		Proxy:                 nil, // a proxy would dial for us, unchecked
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   cfg.Timeout,
		ResponseHeaderTimeout: cfg.Timeout,
	}
	return &Sender{
		client: &http.Client{Transport: transport, Timeout: cfg.Timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		secret: []byte(cfg.Secret), method: cfg.Method, retries: cfg.Retries, delay: cfg.RetryDelay, policy: policy,
	}
}

// CheckURL validates a callback_url at submission: http or https, a host,
// no credentials, and every address the host resolves to allowed. Its
// errors are the client's (the API answers them 400).
func (w *Sender) CheckURL(ctx context.Context, rawURL string) error {
	return w.policy.checkURL(ctx, rawURL)
}

// permanentError marks a delivery failure that retrying cannot fix.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Attempt is what one delivery attempt came to.
type Attempt struct {
	At         time.Time
	HTTPStatus int           // the receiver's answer; 0 when there was none
	Err        error         // nil when the receiver accepted the delivery
	Retry      time.Duration // when Err is not nil: the wait before the next attempt; 0 for none
}

// Deliver POSTs body, the result of execution id, to rawURL until it is
// accepted, the retries are used up or ctx ends. It returns the attempts
// made and, when the delivery failed, why. Without a secret the callback
// goes unsigned. A canceled ctx returns ctx's error. report, if set, is called
// after every attempt that ctx did not cut short.
func (w *Sender) Deliver(ctx context.Context, rawURL, id string, body []byte, report func(Attempt)) (int, error) {
	delay := w.delay
	var last error
	for attempt := 1; ; attempt++ {
		at := time.Now()
		var status int
		status, last = w.post(ctx, rawURL, id, body)
		if last == nil {
			if report != nil {
				report(Attempt{At: at, HTTPStatus: status})
			}
			return attempt, nil
		}
		if ctx.Err() != nil {
			return attempt, ctx.Err()
		}
		var perm *permanentError
		final := errors.As(last, &perm) || attempt > w.retries
		if report != nil {
			a := Attempt{At: at, HTTPStatus: status, Err: last}
			if !final {
				a.Retry = delay
			}
			report(a)
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
func (w *Sender) post(ctx context.Context, rawURL, id string, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, cmp.Or(w.method, http.MethodPost), rawURL, bytes.NewReader(body))
	if err != nil {
		return 0, &permanentError{err}
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "sandbox-run-callback/1")
	req.Header.Set(headerExecutionID, id)
	req.Header.Set(headerTimestamp, ts)
	if len(w.secret) > 0 {
		req.Header.Set(headerSignature, SignCallback(w.secret, ts, body))
	}
	resp, err := w.client.Do(req)
	if err != nil {
		var refused *netpolicy.RefusedError
		if errors.As(err, &refused) {
			return 0, &permanentError{refused}
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
		return c, &permanentError{fmt.Errorf("the receiver answered %s", resp.Status)}
	}
}
