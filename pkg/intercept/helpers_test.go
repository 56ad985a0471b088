package intercept

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// The secrets of the tests. value has characters that need escaping in
// URIs, to check each part gets the right encoding.
const (
	ph     = "SANDBOX_SECRET_GH_0123456789abcdef"
	value  = "ghp_R3al/Value+x&y=z"
	ph2    = "SANDBOX_SECRET_OTHER_fedcba9876543210"
	value2 = "other-REAL-value-2"
)

func testSecrets() []Secret {
	return []Secret{
		{Name: "GH", Placeholder: ph, Value: value, Hosts: []string{"api.example.com"}},
		{Name: "OTHER", Placeholder: ph2, Value: value2, Hosts: []string{"other.example.net"}},
	}
}

// valueForms are the forms of the values that must never be logged.
func valueForms() []string {
	var out []string
	for _, v := range []string{value, value2} {
		for e := range numEnc {
			out = append(out, encode(v, e))
		}
	}
	return out
}

// seen is a request as the upstream received it.
type seen struct {
	Method, URI, Host string
	Header            http.Header
	Body              string
	ContentLength     int64
	TransferEncoding  []string
}

// upstream is a test upstream: an httptest server recording what it gets.
type upstream struct {
	srv *httptest.Server
	ca  *CA // the throwaway CA of its certificate, for TLS

	mu    sync.Mutex
	reqs  []seen
	conns int
}

func (u *upstream) requests() []seen {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seen(nil), u.reqs...)
}

func (u *upstream) connCount() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.conns
}

func (u *upstream) roots() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(u.ca.CertPEM())
	return pool
}

// newUpstream starts an upstream; with names, over TLS with a certificate
// for those names from a new CA.
func newUpstream(t *testing.T, handler http.HandlerFunc, names ...string) *upstream {
	t.Helper()
	u := &upstream{}
	h := func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.reqs = append(u.reqs, seen{r.Method, r.RequestURI, r.Host, r.Header.Clone(), string(body), r.ContentLength, r.TransferEncoding})
		u.mu.Unlock()
		if handler != nil {
			handler(w, r)
			return
		}
		io.WriteString(w, "hello from upstream")
	}
	u.srv = httptest.NewUnstartedServer(http.HandlerFunc(h))
	u.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	u.srv.Config.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateNew {
			u.mu.Lock()
			u.conns++
			u.mu.Unlock()
		}
	}
	if len(names) == 0 {
		u.srv.Start()
	} else {
		ca, err := NewCA(time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		u.ca = ca
		u.srv.TLS = &tls.Config{Certificates: []tls.Certificate{serverCert(t, ca, names...)}}
		u.srv.StartTLS()
	}
	t.Cleanup(u.srv.Close)
	return u
}

// serverCert issues a certificate for names from ca.
func serverCert(t *testing.T, ca *CA, names ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	caCert, caKey := caCertKey(t, ca)
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     names,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// harness feeds Serve: each dial makes a TCP pair on 127.0.0.1 whose far
// end is the sandbox side, and dials addr for the upstream side.
type harness struct {
	t      *testing.T
	p      *Proxy
	addr   string
	dest   Dest
	ctx    context.Context
	cancel context.CancelFunc
	ln     net.Listener

	mu     sync.Mutex
	wg     sync.WaitGroup
	dials  int
	served []chan struct{}
}

func newHarness(t *testing.T, cfg Config, addr string, dest Dest) *harness {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{t: t, p: New(cfg), addr: addr, dest: dest, ctx: ctx, cancel: cancel, ln: ln}
	t.Cleanup(func() {
		h.cancel()
		h.ln.Close()
		waitOrFail(t, &h.wg, 5*time.Second, "Serve did not return after cancel")
		checkNoSessionGoroutines(t)
		checkLogClean(t, h.p)
	})
	return h
}

// dial returns the program's end of a new connection being served.
func (h *harness) dial() (net.Conn, error) {
	c, err := net.Dial("tcp", h.ln.Addr().String())
	if err != nil {
		return nil, err
	}
	sb, err := h.ln.Accept()
	if err != nil {
		c.Close()
		return nil, err
	}
	up, err := net.Dial("tcp", h.addr)
	if err != nil {
		c.Close()
		sb.Close()
		return nil, err
	}
	done := make(chan struct{})
	h.mu.Lock()
	h.dials++
	h.served = append(h.served, done)
	h.mu.Unlock()
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer close(done)
		h.p.Serve(h.ctx, sb, up, h.dest)
	}()
	return c, nil
}

func (h *harness) mustDial() net.Conn {
	h.t.Helper()
	c, err := h.dial()
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { c.Close() })
	return c
}

// client is an HTTP client whose connections go through h, trusting ca.
func (h *harness) client(ca *CA, serverName string) *http.Client {
	tr := &http.Transport{
		DialContext:        func(context.Context, string, string) (net.Conn, error) { return h.dial() },
		DisableCompression: true,
		TLSClientConfig:    &tls.Config{ServerName: serverName},
	}
	if ca != nil {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca.CertPEM())
		tr.TLSClientConfig.RootCAs = pool
	}
	h.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func waitOrFail(t *testing.T, wg *sync.WaitGroup, d time.Duration, msg string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatal(msg)
	}
}

// checkNoSessionGoroutines fails if a goroutine of a session outlives the
// Serve calls.
func checkNoSessionGoroutines(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "intercept.(*session)") && !strings.Contains(stacks, "intercept.(*Proxy).Serve") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("session goroutines left after Serve returned:\n%s", stacks)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checkLogClean fails if any logged field holds a form of a value.
func checkLogClean(t *testing.T, p *Proxy) {
	t.Helper()
	reqs, _ := p.Requests()
	b, err := json.Marshal(reqs)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range valueForms() {
		if strings.Contains(string(b), f) {
			t.Errorf("log holds a value (%q): %s", f, b)
		}
	}
}

// rawRequest sends raw on a new connection and returns the response.
func (h *harness) rawRequest(raw string) (*http.Response, string) {
	h.t.Helper()
	c := h.mustDial()
	if _, err := io.WriteString(c, raw); err != nil {
		h.t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		h.t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func mustGet(t *testing.T, c *http.Client, u string, hdr http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return mustDo(t, c, req, hdr)
}

func mustDo(t *testing.T, c *http.Client, req *http.Request, hdr http.Header) (*http.Response, string) {
	t.Helper()
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

func addrOf(u *upstream) string {
	pu, _ := url.Parse(u.srv.URL)
	return pu.Host
}

// waitLog waits until p has logged at least n requests and returns them.
func waitLog(t *testing.T, p *Proxy, n int) []Request {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		reqs, _ := p.Requests()
		if len(reqs) >= n || time.Now().After(deadline) {
			return reqs
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// caCertKey are ca's certificate and private key, read from its Marshal.
func caCertKey(t *testing.T, ca *CA) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	data, err := ca.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var cert *x509.Certificate
	var key *ecdsa.PrivateKey
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			break
		}
		switch b.Type {
		case "CERTIFICATE":
			cert, err = x509.ParseCertificate(b.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(b.Bytes)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return cert, key
}
