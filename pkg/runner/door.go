package runner

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"mime"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/config"
)

// The door's first half: who is calling, whether such a caller may ask for
// runs at all (origin and content), and whether its key has room (rate,
// concurrency). Every transport passes it for every run it asks for, with
// the number of runs the request holds (a Judge0 batch of N is N), so that
// no transport can skip a rule: the HTTP transports through Caller, stdio
// and the CLI with the zero Caller (nobody but the process's own user).

// Key is an API key as the door knows it: its configuration and the state
// of its limits. A nil *Key is a keyless server's one tenant.
type Key struct {
	config.APIKey
	hash []byte

	mu       sync.Mutex
	tokens   float64
	last     time.Time
	inFlight atomic.Int64
}

// ID names the key in logs and ownership records ("" when auth is off).
func (k *Key) ID() string {
	if k == nil {
		return ""
	}
	return k.APIKey.ID
}

// Keys are the configured API keys, by the SHA-256 of the key.
type Keys struct{ keys []*Key }

// NewKeys holds keys (checked by config.Validate).
func NewKeys(keys []config.APIKey) *Keys {
	kr := &Keys{}
	for _, k := range keys {
		h, _ := hex.DecodeString(k.SHA256)
		kr.keys = append(kr.keys, &Key{APIKey: k, hash: h, tokens: float64(max(k.Burst, 1)), last: time.Now()})
	}
	return kr
}

// Enabled says whether any key is configured (a server without keys serves
// loopback only, as one tenant).
func (kr *Keys) Enabled() bool { return len(kr.keys) > 0 }

// Authenticate finds the key whose secret is token and checks it has scope.
// Without keys configured every caller passes (nil). An *Error of kind
// Unauthorized or Forbidden says why not.
func (kr *Keys) Authenticate(token, scope string) (*Key, error) {
	if len(kr.keys) == 0 {
		return nil, nil
	}
	if token == "" {
		return nil, &Error{Kind: Unauthorized, Msg: "missing API key: send Authorization: Bearer <key> (or X-Auth-Token: <key>)"}
	}
	sum := sha256.Sum256([]byte(token))
	var found *Key
	for _, k := range kr.keys { // every key is compared, in constant time
		if subtle.ConstantTimeCompare(sum[:], k.hash) == 1 {
			found = k
		}
	}
	if found == nil {
		return nil, &Error{Kind: Unauthorized, Msg: "invalid API key"}
	}
	for _, s := range found.Scopes {
		if s == scope || s == config.ScopeAdmin {
			return found, nil
		}
	}
	return nil, &Error{Kind: Forbidden, Msg: "key " + found.APIKey.ID + " lacks the " + scope + " scope"}
}

// take takes n tokens from the key's bucket, all or none, or says how long
// until they are there. More than the burst can never be taken at once.
func (k *Key) take(n int) (time.Duration, bool) {
	if k == nil || k.RatePerSecond <= 0 {
		return 0, true
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	now := time.Now()
	burst := float64(max(k.Burst, 1))
	k.tokens = min(burst, k.tokens+now.Sub(k.last).Seconds()*k.RatePerSecond)
	k.last = now
	need := float64(n)
	if k.tokens >= need {
		k.tokens -= need
		return 0, true
	}
	return time.Duration((min(need, burst) - k.tokens) / k.RatePerSecond * float64(time.Second)), false
}

func (k *Key) enter() bool {
	if k == nil {
		return true
	}
	if k.inFlight.Add(1) > int64(k.MaxConcurrent) && k.MaxConcurrent > 0 {
		k.inFlight.Add(-1)
		return false
	}
	return true
}

func (k *Key) leave() {
	if k != nil {
		k.inFlight.Add(-1)
	}
}

// Caller is who asks for runs, as its transport saw the request.
type Caller struct {
	// Key is the authenticated key (nil on a server without keys).
	Key *Key
	// Web says the request came over HTTP, where a browser page of any
	// site can send it: the fields below are then checked.
	Web bool
	// Origin is the request's Origin header ("" when it has none), Host
	// the host (and port) it was sent to.
	Origin, Host string
	// Body says the request carried a body that the transport decodes,
	// ContentType and ContentEncoding its headers.
	Body                         bool
	ContentType, ContentEncoding string
}

// Tenant is whose compile cache, sessions, files and jobs the caller's runs
// use: the key's id ("" without keys).
func (c Caller) Tenant() string { return c.Key.ID() }

type callerCtx struct{}

// WithCaller is ctx carrying c, for the handlers below an HTTP server's
// authentication.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerCtx{}, c)
}

// CallerOf is the Caller ctx carries (the zero Caller when none).
func CallerOf(ctx context.Context) Caller {
	c, _ := ctx.Value(callerCtx{}).(Caller)
	return c
}

// CheckCaller refuses a request that a web page of another site could have
// made a browser send: from a browser (it has an Origin), a body that is not
// JSON (a page sends text/plain, form and multipart bodies to any site
// without asking it first); on a server without keys, any request whose
// Origin is not the server's own (its Host), since such a server trusts
// whoever reaches its loopback address, and a browser on the same machine
// does. A compressed body is refused from anyone (it is never inflated).
// Clients that are not browsers send no Origin: the peers' own clients
// (npm's piston-client posts text/plain) pass, within the wire format their
// transport takes.
func (s *Service) CheckCaller(c Caller) error {
	if !c.Web {
		return nil
	}
	if c.Body {
		ct := c.ContentType
		if c.Origin == "" {
			ct = "" // not a browser: its transport's wire format decides
		}
		if err := CheckBody(ct, c.ContentEncoding); err != nil {
			s.metrics.Rejected.WithLabelValues("cross_origin").Inc()
			return err
		}
	}
	if c.Key == nil && c.Origin != "" && !sameOrigin(c.Origin, c.Host) {
		s.metrics.Rejected.WithLabelValues("cross_origin").Inc()
		return &Error{Kind: Forbidden, Msg: fmt.Sprintf("Origin %.100q is not this server's: a server without API keys runs code only for its own pages and for clients that are not browsers (configure API keys to serve other sites)", c.Origin)}
	}
	return nil
}

// CheckBody refuses (Unsupported) a body that is compressed (it is never
// inflated here) or, with a Content-Type given ("" passes: curl sends none
// with -d), that is not JSON in UTF-8.
func CheckBody(contentType, contentEncoding string) error {
	if ce := contentEncoding; ce != "" && !strings.EqualFold(ce, "identity") {
		return &Error{Kind: Unsupported, Msg: fmt.Sprintf("Content-Encoding %.60q: send the JSON uncompressed", ce)}
	}
	if contentType == "" {
		return nil
	}
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return &Error{Kind: Unsupported, Msg: fmt.Sprintf("Content-Type %.100q: send application/json", contentType)}
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return &Error{Kind: Unsupported, Msg: fmt.Sprintf("charset %.40q: send UTF-8", cs)}
	}
	return nil
}

// sameOrigin says whether a browser's Origin names host (host[:port]).
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false // "null" (a sandboxed frame, a file) and the like
	}
	return strings.EqualFold(hostPort(u.Host, u.Scheme), hostPort(host, u.Scheme))
}

func hostPort(h, scheme string) string {
	if _, _, err := net.SplitHostPort(h); err == nil {
		return h
	}
	if scheme == "https" {
		return net.JoinHostPort(strings.Trim(h, "[]"), "443")
	}
	return net.JoinHostPort(strings.Trim(h, "[]"), "80")
}

// Admit lets a caller's request for n runs in, or says why not: the
// caller's origin and content (CheckCaller), the server's drain, the key's
// rate (n runs take n of its tokens, all or none) and, when hold, one of the
// key's concurrency slots, which leave gives back (leave must be called once
// the request is over; it is a no-op when hold is false).
func (s *Service) Admit(c Caller, n int, hold bool) (leave func(), err error) {
	if err := s.CheckCaller(c); err != nil {
		return nil, err
	}
	if s.draining.Load() {
		s.metrics.Rejected.WithLabelValues("shutdown").Inc()
		return nil, &Error{Kind: Draining, Msg: "the server is shutting down", RetryAfter: 5 * time.Second}
	}
	k := c.Key
	if wait, ok := k.take(max(n, 1)); !ok {
		s.metrics.Rejected.WithLabelValues("rate_limit").Inc()
		msg := "rate limit of key " + k.APIKey.ID + " exceeded"
		if n > 1 {
			msg = fmt.Sprintf("rate limit of key %s exceeded: this request holds %d runs", k.APIKey.ID, n)
		}
		return nil, &Error{Kind: RateLimited, Msg: msg, RetryAfter: max(wait, time.Second)}
	}
	if !hold {
		return func() {}, nil
	}
	if !k.enter() {
		s.metrics.Rejected.WithLabelValues("key_concurrency").Inc()
		return nil, &Error{Kind: RateLimited, Msg: fmt.Sprintf("key %s has %d executions in flight already", k.APIKey.ID, k.MaxConcurrent), RetryAfter: time.Second}
	}
	var once sync.Once
	return func() { once.Do(k.leave) }, nil
}
