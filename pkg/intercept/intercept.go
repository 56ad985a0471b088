// Package intercept serves a sandboxed run's HTTP and HTTPS connections in
// its egress: it replaces the placeholders of the run's secrets with their
// values in the requests sent to each secret's hosts, and logs every
// request. The program only ever holds placeholders.
//
// Serve classifies a connection by its first bytes. A TLS ClientHello is
// terminated with a certificate issued by the run's CA for the ClientHello's
// server name (without one: the destination's first name, else its IP),
// after a TLS connection to the upstream has been established and verified
// for that same name; if that fails, so does the program's handshake. Both
// handshakes offer only "http/1.1" by ALPN (a client offering only h2
// fails), and inside, the connection is classified again. An HTTP/1.x request line (GET, HEAD, POST, PUT, DELETE, OPTIONS,
// PATCH, TRACE or CONNECT, then a space) is served request by request.
// Anything else, including the HTTP/2 preface and TLS when Config.CA is nil,
// and any connection whose upstream speaks first, is copied raw both ways,
// untouched and unlogged. A connection whose program sends nothing for 30
// seconds (and whose upstream sends nothing either) is closed.
//
// A request is substituted only when its authority (the Host header's host,
// or the host of an absolute request-URI, lower-cased, port removed; it must
// be a plain DNS name or IP address) is one of the names the run's DNS answered with the connection's address, and,
// over TLS, is also the name the upstream's certificate was verified for.
// TRACE requests are never substituted. For each secret with a host pattern
// that matches that authority and the destination port, every occurrence of
// its placeholder is replaced by its value:
//   - in the request-URI, percent-encoded (url.PathEscape in the path,
//     url.QueryEscape in the query);
//   - in every header value except Host, as is (a CR or LF in a value is
//     sent as a space);
//   - in the body, when its Content-Type is text/*, multipart/form-data,
//     application/x-www-form-urlencoded (value query-escaped), JSON
//     (application/json, */*+json, application/x-ndjson; value escaped as
//     in a JSON string) or XML (application/xml, text/xml, */*+xml; value
//     XML-escaped), it has no Content-Encoding, and it is at most
//     Config.MaxBody bytes. Such a body is sent with a Content-Length (a
//     chunked one too, unless it has trailers). Other bodies, trailers, and
//     placeholders inside encoded data (base64, compressed) are sent
//     unchanged.
//
// A secret with a Header also sets that header on every such request.
// Placeholders of other secrets stay as they are. Responses are relayed
// unmodified: a server that echoes a value back gives it to the program.
// After a 101 Switching Protocols the connection is copied raw (no
// substitution in WebSocket frames). CONNECT is answered 405 and the
// connection closed. A request with Expect: 100-continue is answered
// 100 Continue by the proxy itself and forwarded whole without Expect.
// Request headers are bounded to 1 MiB and a connection to 10,000 requests;
// a request that cannot be parsed is answered 400 and never forwarded.
// Requests are re-serialized (canonical header names, sorted, Host first,
// the program's HTTP/1.0 or HTTP/1.1 kept). When the upstream closes
// without answering, or while the connection is idle, the program's
// connection is closed likewise, so that its client retries as it would
// directly; a response that cannot be parsed is answered 502.
//
// Values never appear in the log or in error strings: every logged string
// has any value, raw or encoded, replaced by "[secret NAME]".
package intercept

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/xml"
	"net"
	"net/netip"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/sandbox-run/sandbox-run/pkg/intercept/carry"
)

// The types of a Proxy's configuration and log are pkg/intercept/carry's
// (where the executor, which links no HTTP, finds them).
type (
	Secret  = carry.Secret
	Header  = carry.Header
	Config  = carry.Config
	Dest    = carry.Dest
	Request = carry.Request
	CA      = carry.CA
)

// Defaults for the zero values of Config.
const (
	DefaultMaxLog  = carry.DefaultMaxLog
	DefaultMaxBody = carry.DefaultMaxBody
)

// NewCA makes a run's CA (carry.NewCA).
func NewCA(validity time.Duration) (*CA, error) { return carry.NewCA(validity) }

// ParseCA makes again the CA its Marshal wrote (carry.ParseCA).
func ParseCA(data []byte) (*CA, error) { return carry.ParseCA(data) }

var _ carry.Carrier = (*Proxy)(nil)

// Proxy serves all the connections of one run. It is safe for concurrent
// use.
type Proxy struct {
	ca      *CA
	roots   *x509.CertPool
	maxLog  int
	maxBody int64
	set     atomic.Pointer[secretSet] // SetSecrets replaces it

	mu      sync.Mutex
	log     []Request
	dropped int
	forms   []redaction // every value's forms so far, redacted from the log
}

// secretSet is the secrets a Proxy puts in place now, and the replacer
// that redacts every value it has had from its log.
type secretSet struct {
	secrets []*secret
	redact  *strings.Replacer
}

// redaction is a form of a value in a log, and what replaces it.
type redaction struct{ form, name string }

// encoding is how a value is written where a placeholder was.
type encoding int

const (
	encRaw encoding = iota
	encPath
	encQuery
	encJSON
	encXML
	numEnc
)

type secret struct {
	Secret
	hosts []hostPattern
	enc   [numEnc]string // the value in each encoding
}

type hostPattern struct {
	name     string // lower-case; for a wildcard, the suffix ".example.com"
	wildcard bool
	port     uint16 // 0: any
}

// New returns a Proxy for cfg. Secrets with an empty Placeholder and host
// entries that cannot be parsed never match; a Header whose Name is not a
// valid header name is ignored.
func New(cfg Config) *Proxy {
	p := &Proxy{ca: cfg.CA, roots: cfg.Roots, maxLog: cfg.MaxLog, maxBody: cfg.MaxBody}
	if p.maxLog <= 0 {
		p.maxLog = DefaultMaxLog
	}
	if p.maxBody == 0 {
		p.maxBody = DefaultMaxBody
	}
	p.SetSecrets(cfg.Secrets)
	return p
}

// SetSecrets replaces the secrets the proxy puts in place (a live
// sandbox's, changed while it runs): requests from then on see the new
// values; a secret left out is no longer put in place (its placeholder
// goes as it is). Values it had before stay redacted from its log.
func (p *Proxy) SetSecrets(secrets []Secret) {
	set := &secretSet{}
	var rs []redaction
	for _, s := range secrets {
		sec := &secret{Secret: s}
		sec.Hosts = append([]string(nil), s.Hosts...)
		if s.Header != nil && httpguts.ValidHeaderFieldName(s.Header.Name) {
			h := *s.Header
			sec.Header = &h
		} else {
			sec.Header = nil
		}
		for _, h := range s.Hosts {
			if hp, ok := parseHostPattern(h); ok {
				sec.hosts = append(sec.hosts, hp)
			}
		}
		for e := range numEnc {
			sec.enc[e] = encode(s.Value, e)
		}
		if s.Placeholder != "" {
			set.secrets = append(set.secrets, sec)
		}
		if s.Value == "" {
			continue
		}
		forms := sec.enc[:]
		if s.Header != nil && s.Header.Format != "" {
			forms = append(forms, strings.ReplaceAll(s.Header.Format, "{value}", s.Value))
		}
		for _, f := range forms {
			rs = append(rs, redaction{f, "[secret " + s.Name + "]"})
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.forms = append(p.forms, rs...)
	// Longest first, so that no form is half-replaced by a shorter one.
	sort.SliceStable(p.forms, func(i, j int) bool { return len(p.forms[i].form) > len(p.forms[j].form) })
	var pairs []string
	for _, r := range p.forms {
		pairs = append(pairs, r.form, r.name)
	}
	set.redact = strings.NewReplacer(pairs...)
	p.set.Store(set)
}

// Requests returns a copy of the log and the number of requests dropped
// from it once it held Config.MaxLog.
func (p *Proxy) Requests() (reqs []Request, dropped int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	reqs = make([]Request, len(p.log))
	for i, r := range p.log {
		r.Secrets = append([]string(nil), r.Secrets...)
		reqs[i] = r
	}
	return reqs, p.dropped
}

// record logs r with every value redacted.
func (p *Proxy) record(r Request) {
	redact := p.set.Load().redact
	r.Scheme = redact.Replace(r.Scheme)
	r.Host = redact.Replace(r.Host)
	r.Method = redact.Replace(r.Method)
	r.Path = redact.Replace(r.Path)
	r.Error = redact.Replace(r.Error)
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.log) >= p.maxLog {
		p.dropped++
		return
	}
	p.log = append(p.log, r)
}

// match returns the secrets with a host pattern matching host and port.
func (p *Proxy) match(host string, port uint16) []*secret {
	var out []*secret
	for _, s := range p.set.Load().secrets {
		for _, hp := range s.hosts {
			if hp.match(host, port) {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

func parseHostPattern(h string) (hostPattern, bool) {
	h = strings.ToLower(strings.TrimSpace(h))
	var hp hostPattern
	if host, port, err := net.SplitHostPort(h); err == nil {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 {
			return hp, false
		}
		h, hp.port = host, uint16(n)
	}
	h = strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), ".")
	if rest, ok := strings.CutPrefix(h, "*."); ok {
		h, hp.wildcard = "."+rest, true
		if rest == "" {
			return hp, false
		}
	}
	if h == "" || strings.Contains(h, "*") {
		return hp, false
	}
	hp.name = h
	return hp, true
}

func (hp hostPattern) match(host string, port uint16) bool {
	if hp.port != 0 && hp.port != port {
		return false
	}
	if hp.wildcard {
		return len(host) > len(hp.name) && strings.HasSuffix(host, hp.name)
	}
	return host == hp.name
}

// normName lower-cases a name and drops its trailing dot.
func normName(n string) string {
	return strings.ToLower(strings.TrimSuffix(n, "."))
}

// hostOf returns the host of a Host header, lower-cased, without port,
// brackets or trailing dot; "" unless it is a plain name (letters, digits,
// '.', '-', '_') or an IP address, with an optional numeric port.
func hostOf(hostport string) string {
	h := hostport
	if strings.Contains(h, ":") {
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			if !strings.HasPrefix(h, "[") || !strings.HasSuffix(h, "]") {
				return ""
			}
			host, port = h[1:len(h)-1], ""
		}
		for _, c := range port {
			if c < '0' || c > '9' {
				return ""
			}
		}
		if h = host; strings.Contains(h, ":") {
			if a, err := netip.ParseAddr(h); err != nil || a.Zone() != "" {
				return ""
			}
			return strings.ToLower(h)
		}
	}
	for _, c := range []byte(h) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_') {
			return ""
		}
	}
	return normName(h)
}

func encode(v string, e encoding) string {
	switch e {
	case encPath:
		return url.PathEscape(v)
	case encQuery:
		return url.QueryEscape(v)
	case encJSON:
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.Encode(v) // a string always encodes
		s := strings.TrimSuffix(b.String(), "\n")
		return s[1 : len(s)-1]
	case encXML:
		var b strings.Builder
		xml.EscapeText(&b, []byte(v)) // a strings.Builder never fails
		return b.String()
	}
	return v
}

// substituter replaces the placeholders of a request's matching secrets and
// remembers which it used.
type substituter struct {
	secrets []*secret
	used    []bool
}

func (s *substituter) replace(v string, e encoding) string {
	var pairs []string
	for i, sec := range s.secrets {
		if strings.Contains(v, sec.Placeholder) {
			s.used[i] = true
			pairs = append(pairs, sec.Placeholder, sec.enc[e])
		}
	}
	if pairs == nil {
		return v
	}
	return strings.NewReplacer(pairs...).Replace(v)
}

// uri replaces placeholders in an origin-form request-URI.
func (s *substituter) uri(u string) string {
	path, query, hasQuery := strings.Cut(u, "?")
	path = s.replace(path, encPath)
	if !hasQuery {
		return path
	}
	return path + "?" + s.replace(query, encQuery)
}

func (s *substituter) names() []string {
	var out []string
	for i, sec := range s.secrets {
		if s.used[i] {
			out = append(out, sec.Name)
		}
	}
	return out
}

// Serve serves one connection of the run until both sides are done, then
// closes both. sandbox is the program's side; upstream is already
// connected to the address and port the program connected to. dest says
// which names that address was reached by. Ending ctx closes both
// connections and makes Serve return promptly. sandbox must support read
// deadlines; a connection with CloseWrite is half-closed when the other
// side's copy ends, one without is closed. Serve returns only after every
// goroutine it started has ended.
func (p *Proxy) Serve(ctx context.Context, sandbox, upstream net.Conn, dest Dest) {
	s := &session{p: p, ctx: ctx, dest: dest, sb: sandbox, up: upstream, names: map[string]bool{}}
	for _, n := range dest.Names {
		s.names[normName(n)] = true
	}
	stop := context.AfterFunc(ctx, s.close)
	defer func() {
		stop()
		s.close()
		s.wg.Wait()
	}()
	defer s.recover()
	s.serve()
}
