package intercept

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

var allNames = []string{"api.example.com", "other.example.net"}

// setup is an upstream, a proxy and a client for one scheme.
type setup struct {
	up   *upstream
	h    *harness
	c    *http.Client
	base string
	ca   *CA
}

// newSetup serves connections to an upstream at dest; over https the
// upstream's certificate is valid for certNames (default allNames) and the
// client's SNI is serverName (default: the URL's host).
func newSetup(t *testing.T, scheme string, cfg Config, dest Dest, handler http.HandlerFunc, certNames []string, serverName string) *setup {
	t.Helper()
	s := &setup{base: scheme + "://api.example.com"}
	if scheme == "https" {
		if certNames == nil {
			certNames = allNames
		}
		s.up = newUpstream(t, handler, certNames...)
		ca, err := NewCA(time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		s.ca = ca
		cfg.CA = ca
		cfg.Roots = s.up.roots()
	} else {
		s.up = newUpstream(t, handler)
	}
	if cfg.Secrets == nil {
		cfg.Secrets = testSecrets()
	}
	if dest.Names == nil {
		dest.Names = []string{"api.example.com"}
	}
	if dest.Port == 0 {
		dest.Port = map[string]uint16{"http": 80, "https": 443}[scheme]
	}
	s.h = newHarness(t, cfg, addrOf(s.up), dest)
	s.c = s.h.client(s.ca, serverName)
	return s
}

func forSchemes(t *testing.T, f func(t *testing.T, scheme string)) {
	for _, scheme := range []string{"http", "https"} {
		t.Run(scheme, func(t *testing.T) { f(t, scheme) })
	}
}

func TestSubstitution(t *testing.T) {
	forSchemes(t, func(t *testing.T, scheme string) {
		s := newSetup(t, scheme, Config{}, Dest{}, nil, nil, "")

		// Header and query.
		resp, body := mustGet(t, s.c, s.base+"/repos/"+ph+"/x?k="+ph+"&o="+ph2, http.Header{
			"Authorization": {"Bearer " + ph},
			"X-Other":       {ph2},
		})
		if resp.StatusCode != 200 || body != "hello from upstream" {
			t.Fatalf("got %d %q", resp.StatusCode, body)
		}
		got := s.up.requests()[0]
		if want := "/repos/" + encode(value, encPath) + "/x?k=" + encode(value, encQuery) + "&o=" + ph2; got.URI != want {
			t.Errorf("URI %q, want %q", got.URI, want)
		}
		if a := got.Header.Get("Authorization"); a != "Bearer "+value {
			t.Errorf("Authorization %q", a)
		}
		if o := got.Header.Get("X-Other"); o != ph2 {
			t.Errorf("other host's placeholder changed: %q", o)
		}
		if got.Host != "api.example.com" {
			t.Errorf("Host %q", got.Host)
		}
		if _, ok := got.Header["User-Agent"]; !ok {
			t.Errorf("the client's User-Agent was dropped")
		}

		// Bodies.
		bodies := []struct{ ct, in, want string }{
			{"application/json", `{"token":"` + ph + `","o":"` + ph2 + `"}`, `{"token":"` + value + `","o":"` + ph2 + `"}`},
			{"application/vnd.api+json; charset=utf-8", `["` + ph + `"]`, `["` + value + `"]`},
			{"application/x-www-form-urlencoded", "a=" + ph + "&b=1", "a=" + encode(value, encQuery) + "&b=1"},
			{"text/plain", "key " + ph, "key " + value},
			{"application/xml", "<k>" + ph + "</k>", "<k>" + encode(value, encXML) + "</k>"},
			{"application/octet-stream", "\x00" + ph + "\xff", "\x00" + ph + "\xff"},
		}
		for i, b := range bodies {
			req, _ := http.NewRequest("POST", s.base+"/post", strings.NewReader(b.in))
			req.Header.Set("Content-Type", b.ct)
			mustDo(t, s.c, req, nil)
			got := s.up.requests()[i+1]
			if got.Body != b.want || got.ContentLength != int64(len(b.want)) {
				t.Errorf("%s: body %q (length %d), want %q", b.ct, got.Body, got.ContentLength, b.want)
			}
		}

		waitLog(t, s.h.p, 1+len(bodies))
		for _, r := range s.up.requests() {
			if strings.Contains(fmt.Sprint(r), value2) {
				t.Errorf("the other host's value was sent: %+v", r)
			}
		}
		reqs, dropped := s.h.p.Requests()
		if len(reqs) != 1+len(bodies) || dropped != 0 {
			t.Fatalf("logged %d, dropped %d", len(reqs), dropped)
		}
		first := reqs[0]
		want := Request{Scheme: scheme, Host: "api.example.com", Method: "GET", Path: "/repos/" + ph + "/x?k=" + ph + "&o=" + ph2,
			Status: 200, BytesOut: first.BytesOut, BytesIn: first.BytesIn, Secrets: []string{"GH"}}
		if !reflect.DeepEqual(first, want) || first.BytesOut < 100 || first.BytesIn < 50 {
			t.Errorf("logged %+v", first)
		}
		if r := reqs[len(reqs)-1]; r.Secrets != nil || r.Method != "POST" {
			t.Errorf("octet-stream logged %+v", r)
		}
	})
}

func TestSecretForOtherHost(t *testing.T) {
	s := newSetup(t, "http", Config{}, Dest{Names: []string{"other.example.net"}}, nil, nil, "")
	mustGet(t, s.c, "http://other.example.net/?a="+ph+"&b="+ph2, http.Header{"Authorization": {"Bearer " + ph}})
	got := s.up.requests()[0]
	if got.URI != "/?a="+ph+"&b="+value2 || got.Header.Get("Authorization") != "Bearer "+ph {
		t.Errorf("got %q %q", got.URI, got.Header.Get("Authorization"))
	}
}

func TestHostSpoofing(t *testing.T) {
	forSchemes(t, func(t *testing.T, scheme string) {
		// Reached by another name: the Host header alone does not count.
		s := newSetup(t, scheme, Config{}, Dest{Names: []string{"evil.example.org"}}, nil, nil, "")
		mustGet(t, s.c, s.base+"/?k="+ph, http.Header{"Authorization": {"Bearer " + ph}})
		got := s.up.requests()[0]
		if got.URI != "/?k="+ph || got.Header.Get("Authorization") != "Bearer "+ph {
			t.Errorf("substituted for a spoofed Host: %q %q", got.URI, got.Header.Get("Authorization"))
		}
		if reqs := waitLog(t, s.h.p, 1); reqs[0].Secrets != nil {
			t.Errorf("logged %+v", reqs[0])
		}
	})
}

func TestSNIMismatch(t *testing.T) {
	s := newSetup(t, "https", Config{}, Dest{Names: allNames}, nil, nil, "other.example.net")
	mustGet(t, s.c, s.base+"/?k="+ph+"&o="+ph2, http.Header{"Authorization": {"Bearer " + ph}})
	got := s.up.requests()[0]
	if got.URI != "/?k="+ph+"&o="+ph2 || got.Header.Get("Authorization") != "Bearer "+ph {
		t.Errorf("substituted with SNI != Host: %q %q", got.URI, got.Header.Get("Authorization"))
	}
}

func TestUpstreamCertInvalid(t *testing.T) {
	s := newSetup(t, "https", Config{}, Dest{}, nil, []string{"wrong.example"}, "")
	req, _ := http.NewRequest("GET", s.base+"/?k="+ph, nil)
	req.Header.Set("Authorization", "Bearer "+ph)
	if resp, err := s.c.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("request succeeded against an upstream whose certificate is not for the name")
	}
	if n := len(s.up.requests()); n != 0 {
		t.Fatalf("upstream got %d requests", n)
	}
	reqs := waitLog(t, s.h.p, 1)
	if len(reqs) == 0 || !strings.HasPrefix(reqs[0].Error, "upstream TLS: ") || reqs[0].Host != "api.example.com" {
		t.Fatalf("logged %+v", reqs)
	}
}

func TestUntrustedRootsFail(t *testing.T) {
	// Roots without the upstream's CA: verification fails.
	s := newSetup(t, "https", Config{}, Dest{}, nil, nil, "")
	s.h.p.roots = x509.NewCertPool()
	if _, err := s.c.Get(s.base + "/"); err == nil {
		t.Fatal("request succeeded with an unverifiable upstream")
	}
}

func TestALPN(t *testing.T) {
	s := newSetup(t, "https", Config{}, Dest{}, nil, nil, "")
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.ca.CertPEM())

	c := tls.Client(s.h.mustDial(), &tls.Config{ServerName: "api.example.com", RootCAs: pool, NextProtos: []string{"h2", "http/1.1"}})
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	if p := c.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
		t.Fatalf("negotiated %q", p)
	}
	fmt.Fprintf(c, "GET /alpn HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n", ph)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatal(resp, err)
	}
	if a := s.up.requests()[0].Header.Get("Authorization"); a != "Bearer "+value {
		t.Errorf("Authorization %q", a)
	}

	h2 := tls.Client(s.h.mustDial(), &tls.Config{ServerName: "api.example.com", RootCAs: pool, NextProtos: []string{"h2"}})
	if err := h2.Handshake(); err == nil {
		t.Fatalf("an h2-only client negotiated %q", h2.ConnectionState().NegotiatedProtocol)
	}
}

func TestKeepAlive(t *testing.T) {
	forSchemes(t, func(t *testing.T, scheme string) {
		s := newSetup(t, scheme, Config{}, Dest{}, func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/head":
				w.Header().Set("Content-Length", "1234")
			case "/empty":
				w.WriteHeader(http.StatusNoContent)
			case "/stream":
				w.Header().Set("Content-Type", "text/plain")
				for i := range 3 {
					fmt.Fprintf(w, "part %d\n", i)
					w.(http.Flusher).Flush()
				}
			default:
				io.WriteString(w, "ok")
			}
		}, nil, "")
		steps := []struct{ method, path string }{
			{"GET", "/a?k=" + ph}, {"HEAD", "/head"}, {"GET", "/empty"}, {"POST", "/stream"}, {"GET", "/b"},
		}
		for _, st := range steps {
			req, _ := http.NewRequest(st.method, s.base+st.path, strings.NewReader(""))
			mustDo(t, s.c, req, http.Header{"X-Key": {ph}})
		}
		if s.h.dials != 1 || s.up.connCount() != 1 {
			t.Fatalf("%d program connections, %d upstream connections: want one each", s.h.dials, s.up.connCount())
		}
		reqs := waitLog(t, s.h.p, len(steps))
		if len(reqs) != len(steps) {
			t.Fatalf("logged %d", len(reqs))
		}
		codes := []int{200, 200, 204, 200, 200}
		for i, r := range reqs {
			if r.Method != steps[i].method || r.Path != steps[i].path || r.Status != codes[i] || r.BytesOut == 0 || r.BytesIn == 0 ||
				!slices.Equal(r.Secrets, []string{"GH"}) || r.Error != "" {
				t.Errorf("request %d logged %+v", i, r)
			}
		}
		if got := s.up.requests()[0].URI; got != "/a?k="+encode(value, encQuery) {
			t.Errorf("URI %q", got)
		}
	})
}

func TestStreamedResponse(t *testing.T) {
	forSchemes(t, func(t *testing.T, scheme string) {
		release := make(chan struct{})
		s := newSetup(t, scheme, Config{}, Dest{}, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: first\n\n")
			w.(http.Flusher).Flush()
			<-release
			io.WriteString(w, "data: last\n\n")
		}, nil, "")
		defer close(release)
		resp, err := s.c.Get(s.base + "/events")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if err != nil || line != "data: first\n" {
			t.Fatalf("first event: %q, %v", line, err)
		}
	})
}

func TestHeaderSecret(t *testing.T) {
	forSchemes(t, func(t *testing.T, scheme string) {
		secrets := []Secret{
			{Name: "KEY", Placeholder: ph, Value: value, Hosts: []string{"*.example.com"}, Header: &Header{Name: "x-api-key", Format: "Key {value}"}},
			{Name: "RAW", Placeholder: ph2, Value: value2, Hosts: []string{"api.example.com"}, Header: &Header{Name: "X-Raw"}},
		}
		s := newSetup(t, scheme, Config{Secrets: secrets}, Dest{}, nil, nil, "")
		mustGet(t, s.c, s.base+"/", http.Header{"X-Api-Key": {"the program's own"}})
		got := s.up.requests()[0].Header
		if got.Get("X-Api-Key") != "Key "+value || len(got["X-Api-Key"]) != 1 || got.Get("X-Raw") != value2 {
			t.Errorf("headers %v", got)
		}
		if reqs := waitLog(t, s.h.p, 1); !slices.Equal(reqs[0].Secrets, []string{"KEY", "RAW"}) {
			t.Errorf("logged %+v", reqs[0])
		}
	})
}

func TestHostPorts(t *testing.T) {
	secrets := []Secret{{Name: "GH", Placeholder: ph, Value: value, Hosts: []string{"api.example.com:8443"}}}
	for _, port := range []uint16{443, 8443} {
		t.Run(fmt.Sprint(port), func(t *testing.T) {
			s := newSetup(t, "http", Config{Secrets: secrets}, Dest{Port: port}, nil, nil, "")
			mustGet(t, s.c, s.base+"/?k="+ph, nil)
			want := map[uint16]string{443: "/?k=" + ph, 8443: "/?k=" + encode(value, encQuery)}[port]
			if got := s.up.requests()[0].URI; got != want {
				t.Errorf("URI %q, want %q", got, want)
			}
		})
	}
}

func TestRawRequests(t *testing.T) {
	s := newSetup(t, "http", Config{MaxBody: 64}, Dest{}, nil, nil, "")
	cases := []struct {
		name, raw            string
		status               int
		uri, host, body, enc string
	}{
		{name: "absolute-form",
			raw:    "GET http://api.example.com/x?k=" + ph + " HTTP/1.1\r\nHost: evil.example.org\r\nConnection: close\r\n\r\n",
			status: 200, uri: "/x?k=" + encode(value, encQuery), host: "api.example.com"},
		{name: "chunked body",
			raw:    "POST /c HTTP/1.1\r\nHost: api.example.com\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\n{\"k\":\r\n" + fmt.Sprintf("%x", len(ph)+3) + "\r\n\"" + ph + "\"}\r\n0\r\n\r\n",
			status: 200, uri: "/c", body: `{"k":"` + value + `"}`},
		{name: "body over MaxBody",
			raw:    "POST /big HTTP/1.1\r\nHost: api.example.com\r\nContent-Type: text/plain\r\nContent-Length: 100\r\nConnection: close\r\n\r\n" + ph + strings.Repeat("x", 100-len(ph)),
			status: 200, uri: "/big", body: ph + strings.Repeat("x", 100-len(ph))},
		{name: "chunked body over MaxBody",
			raw:    "POST /bigc HTTP/1.1\r\nHost: api.example.com\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n64\r\n" + ph + strings.Repeat("y", 100-len(ph)) + "\r\n0\r\n\r\n",
			status: 200, uri: "/bigc", body: ph + strings.Repeat("y", 100-len(ph)), enc: "chunked"},
		{name: "gzip body untouched",
			raw:    "POST /gz HTTP/1.1\r\nHost: api.example.com\r\nContent-Type: text/plain\r\nContent-Encoding: gzip\r\nContent-Length: " + fmt.Sprint(len(ph)) + "\r\nConnection: close\r\n\r\n" + ph,
			status: 200, uri: "/gz", body: ph},
		{name: "TRACE not substituted",
			raw:    "TRACE /t?k=" + ph + " HTTP/1.1\r\nHost: api.example.com\r\nConnection: close\r\n\r\n",
			status: 200, uri: "/t?k=" + ph},
		{name: "HTTP/1.0",
			raw:    "GET /old?k=" + ph + " HTTP/1.0\r\nHost: api.example.com\r\n\r\n",
			status: 200, uri: "/old?k=" + encode(value, encQuery)},
		{name: "no User-Agent added",
			raw:    "GET /noua HTTP/1.1\r\nHost: api.example.com\r\nConnection: close\r\n\r\n",
			status: 200, uri: "/noua"},
		{name: "CONNECT", raw: "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n", status: 405},
		{name: "bad header", raw: "GET / HTTP/1.1\r\nHost: api.example.com\r\nno colon here\r\n\r\n", status: 400},
		{name: "bad URI", raw: "GET mailto:x HTTP/1.1\r\nHost: api.example.com\r\n\r\n", status: 400},
		{name: "HTTP/2 version", raw: "GET / HTTP/2.0\r\nHost: api.example.com\r\n\r\n", status: 400},
		{name: "header too large", raw: "GET / HTTP/1.1\r\nHost: api.example.com\r\nX-Big: " + strings.Repeat("a", maxHeaderBytes+100000) + "\r\n\r\n", status: 431},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := len(s.up.requests())
			resp, _ := s.h.rawRequest(c.raw)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, c.status)
			}
			reqs := s.up.requests()[before:]
			if c.uri == "" {
				if len(reqs) != 0 {
					t.Fatalf("forwarded %+v", reqs)
				}
				return
			}
			got := reqs[0]
			if got.URI != c.uri || (c.host != "" && got.Host != c.host) || got.Body != c.body {
				t.Errorf("upstream got %q %q %q", got.URI, got.Host, got.Body)
			}
			if c.enc == "" && got.TransferEncoding != nil {
				t.Errorf("transfer encoding %v", got.TransferEncoding)
			}
			if c.name == "no User-Agent added" && got.Header["User-Agent"] != nil {
				t.Errorf("User-Agent %q added", got.Header["User-Agent"])
			}
		})
	}
	reqs := waitLog(t, s.h.p, 9)
	if r := reqs[len(reqs)-1]; r.Status != 431 || r.Error == "" {
		t.Errorf("logged %+v", r)
	}
}

func TestExpectContinue(t *testing.T) {
	forSchemes(t, func(t *testing.T, scheme string) {
		s := newSetup(t, scheme, Config{}, Dest{}, nil, nil, "")
		s.c.Transport.(*http.Transport).ExpectContinueTimeout = time.Minute // waits for the 100
		body := `{"k":"` + ph + `"}`
		req, _ := http.NewRequest("PUT", s.base+"/put", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Expect", "100-continue")
		resp, _ := mustDo(t, s.c, req, nil)
		if resp.StatusCode != 200 {
			t.Fatal(resp.Status)
		}
		got := s.up.requests()[0]
		if got.Body != `{"k":"`+value+`"}` || got.Header.Get("Expect") != "" {
			t.Errorf("upstream got %q, Expect %q", got.Body, got.Header.Get("Expect"))
		}
	})
}

func TestUpgrade(t *testing.T) {
	forSchemes(t, func(t *testing.T, scheme string) {
		frames := make(chan string, 1)
		s := newSetup(t, scheme, Config{}, Dest{}, func(w http.ResponseWriter, r *http.Request) {
			conn, brw, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: test\r\nConnection: Upgrade\r\n\r\n")
			line, _ := brw.ReadString('\n')
			frames <- line
			io.WriteString(conn, "echo "+line)
		}, nil, "")
		c := s.h.mustDial()
		if scheme == "https" {
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(s.ca.CertPEM())
			c = tls.Client(c, &tls.Config{ServerName: "api.example.com", RootCAs: pool})
		}
		fmt.Fprintf(c, "GET /ws HTTP/1.1\r\nHost: api.example.com\r\nConnection: Upgrade\r\nUpgrade: test\r\nAuthorization: Bearer %s\r\n\r\n", ph)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 101 {
			t.Fatal(resp, err)
		}
		io.WriteString(c, "frame "+ph+"\n")
		if got := <-frames; got != "frame "+ph+"\n" {
			t.Errorf("upstream got frame %q", got)
		}
		if line, _ := br.ReadString('\n'); line != "echo frame "+ph+"\n" {
			t.Errorf("program got %q", line)
		}
		if a := s.up.requests()[0].Header.Get("Authorization"); a != "Bearer "+value {
			t.Errorf("upgrade request Authorization %q", a)
		}
		reqs := waitLog(t, s.h.p, 1)
		if len(reqs) != 1 || reqs[0].Status != 101 || reqs[0].Path != "/ws" {
			t.Errorf("logged %+v", reqs)
		}
	})
}

// rawUpstream accepts one connection and runs f on it.
func rawUpstream(t *testing.T, f func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		f(c)
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return ln.Addr().String()
}

func TestRawCopy(t *testing.T) {
	payloads := map[string]string{
		"binary":  "\x00\x01\x02 hello " + ph + "\n",
		"h2":      "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + ph,
		"lower":   "get / HTTP/1.1\r\n" + ph,
		"not tls": "\x16\x01" + ph,
	}
	for name, payload := range payloads {
		t.Run(name, func(t *testing.T) {
			got := make(chan string, 1)
			addr := rawUpstream(t, func(c net.Conn) {
				b, _ := io.ReadAll(c) // to the program's half-close
				got <- string(b)
				io.WriteString(c, "reply "+string(b))
			})
			h := newHarness(t, Config{Secrets: testSecrets()}, addr, Dest{Names: []string{"api.example.com"}, Port: 80})
			c := h.mustDial()
			io.WriteString(c, payload)
			c.(*net.TCPConn).CloseWrite()
			reply, err := io.ReadAll(c)
			if err != nil {
				t.Fatal(err)
			}
			if g := <-got; g != payload {
				t.Errorf("upstream got %q", g)
			}
			if string(reply) != "reply "+payload {
				t.Errorf("program got %q", reply)
			}
			if reqs, _ := h.p.Requests(); len(reqs) != 0 {
				t.Errorf("logged %+v", reqs)
			}
		})
	}
}

func TestServerFirst(t *testing.T) {
	addr := rawUpstream(t, func(c net.Conn) {
		io.WriteString(c, "220 smtp ready\r\n")
		line, _ := bufio.NewReader(c).ReadString('\n')
		io.WriteString(c, "250 "+line)
	})
	h := newHarness(t, Config{Secrets: testSecrets()}, addr, Dest{Names: []string{"api.example.com"}, Port: 25})
	c := h.mustDial()
	br := bufio.NewReader(c)
	if line, _ := br.ReadString('\n'); line != "220 smtp ready\r\n" {
		t.Fatalf("banner %q", line)
	}
	io.WriteString(c, "GET "+ph+"\r\n")
	if line, _ := br.ReadString('\n'); line != "250 GET "+ph+"\r\n" {
		t.Fatalf("reply %q", line)
	}
}

func TestNoCAPipesTLS(t *testing.T) {
	up := newUpstream(t, nil, allNames...)
	h := newHarness(t, Config{Secrets: testSecrets()}, addrOf(up), Dest{Names: []string{"api.example.com"}, Port: 443})
	c := h.client(nil, "")
	c.Transport.(*http.Transport).TLSClientConfig.RootCAs = up.roots()
	mustGet(t, c, "https://api.example.com/?k="+ph, nil)
	if got := up.requests()[0].URI; got != "/?k="+ph {
		t.Errorf("URI %q", got)
	}
	if reqs, _ := h.p.Requests(); len(reqs) != 0 {
		t.Errorf("logged %+v", reqs)
	}
}

func TestTLSWithoutSNI(t *testing.T) {
	s := newSetup(t, "https", Config{}, Dest{}, nil, nil, "")
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.ca.CertPEM())
	// Without SNI the certificate is for the destination's first name.
	c := tls.Client(s.h.mustDial(), &tls.Config{RootCAs: pool, InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{DNSName: "api.example.com", Roots: pool})
			return err
		}})
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: api.example.com\r\nX-K: %s\r\nConnection: close\r\n\r\n", ph)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatal(resp, err)
	}
	if got := s.up.requests()[0].Header.Get("X-K"); got != value {
		t.Errorf("X-K %q", got)
	}
}

func TestTLSRawInside(t *testing.T) {
	// A non-HTTP protocol inside intercepted TLS is copied raw.
	upCA, err := NewCA(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert := serverCert(t, upCA, "api.example.com")
	got := make(chan string, 1)
	addr := rawUpstream(t, func(c net.Conn) {
		tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert}})
		b, _ := io.ReadAll(tc)
		got <- string(b)
		io.WriteString(tc, "bye")
		tc.Close()
	})
	ca, _ := NewCA(time.Hour)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(upCA.CertPEM())
	h := newHarness(t, Config{Secrets: testSecrets(), CA: ca, Roots: roots}, addr, Dest{Names: []string{"api.example.com"}, Port: 993})
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM())
	c := tls.Client(h.mustDial(), &tls.Config{ServerName: "api.example.com", RootCAs: pool})
	io.WriteString(c, "a001 LOGIN user "+ph+"\r\n")
	c.CloseWrite()
	reply, _ := io.ReadAll(c)
	if g := <-got; g != "a001 LOGIN user "+ph+"\r\n" || string(reply) != "bye" {
		t.Errorf("upstream got %q, program got %q", g, reply)
	}
}

func TestNoValueLogged(t *testing.T) {
	// An upstream answering garbage that echoes the value makes an error
	// string that would hold it; a program that learnt the value sends it.
	addr := rawUpstream(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.WriteString(c, "X"+req.Header.Get("Authorization")+"\r\n\r\n")
	})
	h := newHarness(t, Config{Secrets: testSecrets()}, addr, Dest{Names: []string{"api.example.com"}, Port: 80})
	resp, _ := h.rawRequest("GET /" + value + "?v=" + encode(value2, encQuery) + " HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer " + ph + "\r\n\r\n")
	if resp.StatusCode != 502 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	reqs := waitLog(t, h.p, 1)
	if len(reqs) != 1 || !strings.Contains(reqs[0].Error, "[secret GH]") || !strings.Contains(reqs[0].Path, "[secret OTHER]") {
		t.Fatalf("logged %+v", reqs)
	}
	// checkLogClean (in the harness's cleanup) scans every field.

	// A panic's message is redacted too.
	p := New(Config{Secrets: testSecrets()})
	up, far := net.Pipe()
	defer far.Close()
	p.Serve(context.Background(), panicConn{}, up, Dest{})
	reqs, _ = p.Requests()
	if len(reqs) != 1 || reqs[0].Error != "intercept: internal error: boom [secret GH]" {
		t.Fatalf("logged %+v", reqs)
	}
	checkLogClean(t, p)
}

// panicConn panics with a value in its message when read.
type panicConn struct{ net.Conn }

func (panicConn) Read([]byte) (int, error)        { panic("boom " + value) }
func (panicConn) Close() error                    { return nil }
func (panicConn) SetReadDeadline(time.Time) error { return nil }

func TestMaxLog(t *testing.T) {
	s := newSetup(t, "http", Config{MaxLog: 2}, Dest{}, nil, nil, "")
	for range 3 {
		mustGet(t, s.c, s.base+"/", nil)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		reqs, dropped := s.h.p.Requests()
		if len(reqs) == 2 && dropped == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kept %d, dropped %d", len(reqs), dropped)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestCancel(t *testing.T) {
	forSchemes(t, func(t *testing.T, scheme string) {
		s := newSetup(t, scheme, Config{}, Dest{}, nil, nil, "")
		mustGet(t, s.c, s.base+"/", nil) // leaves an idle keep-alive connection
		served := s.h.served[0]
		start := time.Now()
		s.h.cancel()
		select {
		case <-served:
		case <-time.After(2 * time.Second):
			t.Fatal("Serve did not return after cancel")
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("Serve took %v to return", d)
		}
		// The program's side is closed: the client's connection is too.
		_, err := s.c.Get(s.base + "/")
		if err == nil {
			t.Error("a request succeeded after cancel")
		}
	})
}

func TestFirstByteTimeout(t *testing.T) {
	old := firstByteTimeout
	t.Cleanup(func() { firstByteTimeout = old }) // after the harness's cleanup
	firstByteTimeout = 100 * time.Millisecond
	addr := rawUpstream(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	h := newHarness(t, Config{}, addr, Dest{})
	c := h.mustDial()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("read %d, %v: want EOF", n, err)
	}
}

func TestClassify(t *testing.T) {
	cases := []struct {
		in   string
		k    kind
		more bool
	}{
		{"", kindClose, true}, {"G", kindRaw, true}, {"GET", kindRaw, true}, {"GET ", kindHTTP, false},
		{"GETX", kindRaw, false}, {"PRI * HTTP/2.0", kindRaw, false}, {"\x16", kindRaw, true},
		{"\x16\x03\x01\x00\x10", kindRaw, true}, {"\x16\x03\x01\x00\x10\x01", kindTLS, false},
		{"\x16\x03\x01\x00\x10\x02", kindRaw, false}, {"\x16\x02", kindRaw, false}, {"OPTIONS *", kindHTTP, false},
	}
	for _, c := range cases {
		if k, more := classify([]byte(c.in)); k != c.k || more != c.more {
			t.Errorf("classify(%q) = %v, %v; want %v, %v", c.in, k, more, c.k, c.more)
		}
	}
}

func TestHostPatterns(t *testing.T) {
	cases := []struct {
		pattern, host string
		port          uint16
		want          bool
	}{
		{"api.example.com", "api.example.com", 443, true},
		{"API.Example.com.", "api.example.com", 443, true},
		{"api.example.com", "x.api.example.com", 443, false},
		{"*.example.com", "api.example.com", 443, true},
		{"*.example.com", "a.b.example.com", 443, true},
		{"*.example.com", "example.com", 443, false},
		{"*.example.com", "badexample.com", 443, false},
		{"api.example.com:8443", "api.example.com", 443, false},
		{"api.example.com:8443", "api.example.com", 8443, true},
		{"[::1]:80", "::1", 80, true},
		{"10.0.0.1", "10.0.0.1", 1, true},
		{"*", "api.example.com", 443, false},
		{"*.", "api.example.com", 443, false},
		{"api.*.com", "api.example.com", 443, false},
		{"api.example.com:0", "api.example.com", 443, false},
		{"", "", 443, false},
	}
	for _, c := range cases {
		hp, ok := parseHostPattern(c.pattern)
		if got := ok && hp.match(c.host, c.port); got != c.want {
			t.Errorf("%q matches %q:%d = %v", c.pattern, c.host, c.port, got)
		}
	}
	for in, want := range map[string]string{
		"API.example.com.:8080": "api.example.com", "api.example.com": "api.example.com", "[::1]:80": "::1", "[::1]": "::1",
		"10.0.0.1:443": "10.0.0.1", "\u212Aey.example.com": "", "api.example.com:80@evil": "", "api.example.com:8x": "",
		"a b": "", "::1": "", "[fe80::1%eth0]:80": "", "": "",
	} {
		if got := hostOf(in); got != want {
			t.Errorf("hostOf(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestUpstreamCloses(t *testing.T) {
	t.Run("while idle", func(t *testing.T) {
		addr := rawUpstream(t, func(c net.Conn) {
			br := bufio.NewReader(c)
			if _, err := http.ReadRequest(br); err == nil {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			}
			// and closes, as an idle timeout would
		})
		h := newHarness(t, Config{Secrets: testSecrets()}, addr, Dest{Names: []string{"api.example.com"}, Port: 80})
		c := h.mustDial()
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: api.example.com\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatal(resp, err)
		}
		io.ReadAll(resp.Body)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := br.Read(make([]byte, 1)); n != 0 || err != io.EOF {
			t.Fatalf("read %d, %v; want EOF", n, err)
		}
	})
	t.Run("without a response", func(t *testing.T) {
		addr := rawUpstream(t, func(c net.Conn) { http.ReadRequest(bufio.NewReader(c)) })
		h := newHarness(t, Config{Secrets: testSecrets()}, addr, Dest{Names: []string{"api.example.com"}, Port: 80})
		c := h.mustDial()
		io.WriteString(c, "GET /x HTTP/1.1\r\nHost: api.example.com\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if b, err := io.ReadAll(c); len(b) != 0 || err != nil {
			t.Fatalf("read %q, %v; want EOF", b, err)
		}
		reqs := waitLog(t, h.p, 1)
		if len(reqs) != 1 || reqs[0].Status != 0 || !strings.Contains(reqs[0].Error, "EOF") || reqs[0].BytesOut == 0 {
			t.Fatalf("logged %+v", reqs)
		}
	})
}

func TestCancelRaw(t *testing.T) {
	closed := make(chan struct{})
	addr := rawUpstream(t, func(c net.Conn) {
		io.Copy(io.Discard, c)
		close(closed)
	})
	h := newHarness(t, Config{}, addr, Dest{})
	c := h.mustDial()
	io.WriteString(c, "\x00raw")
	time.Sleep(50 * time.Millisecond)
	h.cancel()
	select {
	case <-closed:
	case <-time.After(2 * time.Second):
		t.Fatal("the upstream connection was not closed")
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("program side: %v, want EOF", err)
	}
	<-h.served[0]
}

func TestTLSToAddress(t *testing.T) {
	// No SNI and no name: the upstream is verified for, and the program
	// given a certificate for, the IP address.
	upCA, _ := NewCA(time.Hour)
	ipCert, err := upCA.Leaf("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ip") }))
	up.TLS = &tls.Config{Certificates: []tls.Certificate{*ipCert}}
	up.Config.ErrorLog = log.New(io.Discard, "", 0)
	up.StartTLS()
	defer up.Close()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(upCA.CertPEM())
	ca, _ := NewCA(time.Hour)
	h := newHarness(t, Config{CA: ca, Roots: roots}, up.Listener.Addr().String(), Dest{Port: 443})
	c := h.client(ca, "127.0.0.1")
	_, body := mustGet(t, c, "https://127.0.0.1/", nil)
	if body != "ip" {
		t.Fatalf("body %q", body)
	}
	if r := waitLog(t, h.p, 1); r[0].Host != "127.0.0.1" || r[0].Status != 200 {
		t.Fatalf("logged %+v", r)
	}
}

// TestSetSecrets: secrets replaced while the proxy serves go into the
// requests from then on, on connections already open too; a secret left
// out is no longer put in place; the log redacts the old value as well
// as the new.
func TestSetSecrets(t *testing.T) {
	forSchemes(t, func(t *testing.T, scheme string) {
		s := newSetup(t, scheme, Config{}, Dest{}, nil, nil, "")
		get := func(path string) seen {
			t.Helper()
			n := len(s.up.requests())
			mustGet(t, s.c, s.base+path+"?k="+ph, http.Header{"Authorization": {"Bearer " + ph}})
			return s.up.requests()[n]
		}
		get("/before")
		rotated := "ghp_Rotated-value-9"
		s.h.p.SetSecrets([]Secret{{Name: "GH", Placeholder: ph, Value: rotated, Hosts: []string{"api.example.com"}}})
		if got := get("/rotated"); got.Header.Get("Authorization") != "Bearer "+rotated || got.URI != "/rotated?k="+rotated {
			t.Errorf("after the rotation: %q %q", got.URI, got.Header.Get("Authorization"))
		}
		s.h.p.SetSecrets(nil)
		if got := get("/deleted"); got.Header.Get("Authorization") != "Bearer "+ph || got.URI != "/deleted?k="+ph {
			t.Errorf("after the deletion: %q %q", got.URI, got.Header.Get("Authorization"))
		}
		for _, r := range waitLog(t, s.h.p, 3) {
			if strings.Contains(r.Path, value) || strings.Contains(r.Path, rotated) {
				t.Errorf("a value in the log: %+v", r)
			}
		}
	})
}
