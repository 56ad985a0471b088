package redteam

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/gvisor"
	"github.com/sandbox-run/sandbox-run/pkg/local"
)

// listener records every byte its connections bring, and answers each
// as answer says (nil: nothing).
type listener struct {
	mu   sync.Mutex
	got  []byte
	port int
}

func (l *listener) seen() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.got)
}

func listen(t *testing.T, cfg *tls.Config, answer func(c net.Conn, first string)) *listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	l := &listener{port: ln.Addr().(*net.TCPAddr).Port}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if cfg != nil {
					c = tls.Server(c, cfg)
				}
				c.SetDeadline(time.Now().Add(20 * time.Second))
				rd := bufio.NewReader(io.TeeReader(c, writerFunc(func(b []byte) {
					l.mu.Lock()
					l.got = append(l.got, b...)
					l.mu.Unlock()
				})))
				first, _ := rd.ReadString('\n')
				for { // the headers, recorded as they come
					line, err := rd.ReadString('\n')
					if err != nil || line == "\r\n" {
						break
					}
				}
				if answer != nil {
					answer(c, first)
				}
				io.Copy(io.Discard, rd) // what comes after (a body, frames)
			}()
		}
	}()
	return l
}

type writerFunc func([]byte)

func (f writerFunc) Write(b []byte) (int, error) { f(b); return len(b), nil }

// serverTLS is a CA (its PEM in a file, the egress's extra CA) and a
// server configuration with its certificate for host.sandbox.internal.
func serverTLS(t *testing.T) (string, *tls.Config) {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "red team upstream CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ = x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), DNSNames: []string{"host.sandbox.internal"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644)
	return file, &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}

// TestRedTeamSecrets: a program that holds only a secret's placeholder
// tries every way to get the secret out: its environment, every process's,
// every file it can read (and the egress CA's private key); the
// placeholder sent to an attacker's listener with the secret's host in the
// Host header, as an absolute URI, over TLS naming the secret's host, as
// HTTP/2 prior knowledge, in a form body; a redirect from the secret's host
// to the attacker's; CONNECT; a WebSocket upgrade with the placeholder in
// its frames; every process's memory; the placeholder in DNS names. The
// attacker's listeners get the placeholder at most, never
// the secret; the secret's host gets it only in the legitimate request.
func TestRedTeamSecrets(t *testing.T) {
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skipf("no TUN devices: %v", err)
	}
	caFile, cfg := serverTLS(t)
	att := listen(t, nil, func(c net.Conn, first string) { io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") })
	atts := listen(t, cfg, func(c net.Conn, first string) { io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") })
	var sech *listener
	sech = listen(t, nil, func(c net.Conn, first string) {
		switch {
		case strings.Contains(first, "/redirect"):
			fmt.Fprintf(c, "HTTP/1.1 302 Found\r\nLocation: http://host.sandbox.internal:%d/stolen\r\nContent-Length: 0\r\n\r\n", att.port)
		case strings.Contains(first, "/ws"):
			io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		default:
			io.WriteString(c, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
		}
	})
	sec := listen(t, cfg, func(c net.Conn, first string) { io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nlegit") })

	// An executor whose egress trusts the upstreams' CA; under gVisor a
	// runner of its own that boots nothing ahead (the suite's would boot
	// a networked sandbox after the run, counted as a leftover mount).
	before := snapshot()
	xcfg := executor.Config{DataDir: filepath.Join(dataDir, "secrets"), CacheDir: filepath.Join(dataDir, "secrets-cache"),
		Engine: testEngine, Network: executor.NetworkConfig{ExtraCAFile: caFile}, Intercept: local.Intercept}
	if testGVisor != nil {
		g, err := gvisor.New(gvisor.Config{Dir: filepath.Join(dataDir, "secrets-gvisor")})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		xcfg.GVisor = g
	}
	x, err := executor.New(xcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	b := make([]byte, 16)
	rand.Read(b)
	secret := "redsecret" + hex.EncodeToString(b)
	host := func(l *listener) string { return fmt.Sprintf("host.sandbox.internal:%d", l.port) }
	code, err := os.ReadFile(filepath.Join("programs", "secrets", "exfiltrate.py"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := x.Execute(ctx, &executor.Request{Language: "python", Code: code, Isolation: isolation,
		Args:    []string{fmt.Sprint(sech.port), fmt.Sprint(sec.port), fmt.Sprint(att.port), fmt.Sprint(atts.port)},
		Network: []string{host(sech), host(sec), host(att), host(atts)}, Limits: executor.Limits{WallTime: 2 * time.Minute},
		Secrets: []executor.Secret{{Name: "TOKEN", Value: secret, Hosts: []string{host(sec), host(sech)}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stdout:\n%s\nstderr: %s", res.Stdout, res.Stderr)
	for _, want := range []string{"placeholder True", "private keys readable 0", "the secret's shape in reach False",
		"host spoof sent", "absolute uri sent", "sni spoof sent", "h2 preface sent", "body sent", "upgrade sent", "legit 200 legit",
		"memory read True", "the secret's shape in memory False", "dns answered answered"} {
		if !strings.Contains(res.Stdout, want+"\n") {
			t.Errorf("stdout lacks %q", want)
		}
	}
	if strings.Contains(res.Stdout+res.Stderr, secret) {
		t.Error("the program printed the secret")
	}
	for name, l := range map[string]*listener{"the attacker's plain listener": att, "the attacker's TLS listener": atts} {
		got := l.seen()
		if strings.Contains(got, secret) {
			t.Errorf("%s got the secret", name)
		}
		if !strings.Contains(got, "SANDBOX_RUN_SECRET_TOKEN_") {
			t.Errorf("%s got no placeholder: the attack did not reach it (%.200q)", name, got)
		}
	}
	for _, path := range []string{"/spoof", "/absolute", "/body", "/stolen"} {
		if !strings.Contains(att.seen(), path) {
			t.Errorf("the attacker's listener never got %s", path)
		}
	}
	if got := sech.seen(); strings.Contains(got, secret) && !strings.Contains(got, "/redirect?k="+secret) {
		t.Errorf("the secret's plain host got it outside the requests made to it: %.300q", got)
	}
	if got := sec.seen(); !strings.Contains(got, "/legit?k="+secret) {
		t.Errorf("the legitimate request did not carry the secret (the attacks prove nothing): %.300q", got)
	}
	if got := sech.seen(); strings.Contains(got, "frame "+secret) {
		t.Error("the secret went into a WebSocket frame")
	}
	for _, r := range res.Network.Requests {
		if strings.Contains(r.Path+r.Host+r.Error, secret) {
			t.Errorf("the request log holds the secret: %+v", r)
		}
	}
	// The DNS queries reached the egress, which refused them, with the
	// placeholder (lowered) at most.
	queried := false
	for _, d := range res.Network.Destinations {
		if strings.Contains(strings.ToLower(d.Host+d.Reason), strings.ToLower(secret)) {
			t.Errorf("a destination holds the secret: %+v", d)
		}
		if d.Protocol == "dns" && strings.HasPrefix(d.Host, "sandbox-run-secret-token-") && !d.Allowed {
			queried = true
		}
	}
	if !queried {
		t.Errorf("no refused lookup of the placeholder's name: the DNS attack did not reach the egress: %+v", res.Network.Destinations)
	}
	t.Cleanup(func() { // after the executor and its runner have closed
		if left := leftovers(before); len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
	})
}
