package e2b

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"net/http/httputil"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/live"
)

// A sandbox's ports: Host PORT-ID.<domain> (getHost) reaches port PORT on
// the loopback of sandbox ID's own network namespace, HTTP and WebSocket
// alike, whatever the sandbox's egress policy (it has none by default).
// The server dials into that namespace; nothing else is reachable so.

// portLabel is the first label of a port's host name.
var portLabel = regexp.MustCompile(`^([0-9]{1,5})-(sbx[0-9a-f]{24})$`)

// portHost parses Host PORT-ID.<domain>.
func portHost(host string) (port int, id string, ok bool) {
	first, _, found := strings.Cut(host, ".")
	if !found {
		return 0, "", false
	}
	m := portLabel.FindStringSubmatch(strings.ToLower(first))
	if m == nil {
		return 0, "", false
	}
	port, err := strconv.Atoi(m[1])
	if err != nil || port < 1 || port > 65535 {
		return 0, "", false
	}
	return port, m[2], true
}

// ClaimsHost says the door serves host: a sandbox's port.
func (d *Door) ClaimsHost(host string) bool {
	_, _, ok := portHost(host)
	return ok
}

// proxy relays r to port of sandbox id.
func (d *Door) proxy(w http.ResponseWriter, r *http.Request, id string, port int) {
	m := d.svc.Live()
	if m == nil {
		writeError(w, http.StatusBadGateway, "no such sandbox")
		return
	}
	sb, err := m.Find(id)
	if err != nil {
		writeError(w, http.StatusBadGateway, "sandbox "+id+" is not running")
		return
	}
	if sb.PrivatePorts {
		tok := r.Header.Get("E2B-Traffic-Access-Token")
		if subtle.ConstantTimeCompare([]byte(tok), []byte(sb.Token)) != 1 {
			writeError(w, http.StatusForbidden, "this sandbox's ports need its traffic access token (E2B-Traffic-Access-Token)")
			return
		}
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
			pr.Out.Host = r.Host
			pr.Out.Header.Del("E2B-Traffic-Access-Token")
			pr.SetXForwarded()
		},
		Transport: portTransport(sb, port),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			writeError(w, http.StatusBadGateway, "port "+strconv.Itoa(port)+" of sandbox "+id+": "+err.Error())
		},
		FlushInterval: -1,
	}
	rp.ServeHTTP(w, r)
}

// portTransport dials port in sb's network namespace, one connection per
// request (nothing is kept across sandboxes' namespaces).
func portTransport(sb *live.Sandbox, port int) http.RoundTripper {
	return &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return sb.DialTCP(ctx, port)
		},
		DisableKeepAlives:     true,
		ResponseHeaderTimeout: 0,
	}
}

// signedURL says r carries a valid signature of its path for sb (the SDK's
// uploadUrl and downloadUrl, for clients without the token).
func signedURL(r *http.Request, sb *live.Sandbox) bool {
	q := r.URL.Query()
	sig := q.Get("signature")
	if sig == "" || r.URL.Path != "/files" {
		return false
	}
	op := "read"
	if r.Method == http.MethodPost {
		op = "write"
	}
	user := q.Get("username")
	if user == "" {
		user = "undefined" // the SDK's template of an absent user
	}
	raw := q.Get("path") + ":" + op + ":" + user + ":" + sb.Token
	if exp := q.Get("signature_expiration"); exp != "" {
		n, err := strconv.ParseInt(exp, 10, 64)
		if err != nil || time.Now().Unix() > n {
			return false
		}
		raw += ":" + exp
	}
	sum := sha256.Sum256([]byte(raw))
	want := "v1_" + strings.TrimRight(base64.StdEncoding.EncodeToString(sum[:]), "=")
	return subtle.ConstantTimeCompare([]byte(sig), []byte(want)) == 1
}
