package executor

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/intercept"
	"github.com/sandbox-run/sandbox-run/pkg/intercept/carry"
)

// upstreamTLS is a throwaway CA (its PEM written to a file, as an
// operator's network.extra_ca_file) and a server certificate it signed for
// host.sandbox.internal.
func upstreamTLS(t *testing.T) (caFile string, cert tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test upstream CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "host.sandbox.internal"},
		DNSNames: []string{"host.sandbox.internal"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile = filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644)
	return caFile, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// seenRequest is what an upstream got.
type seenRequest struct {
	scheme, path, auth, apiKey, body string
}

// recorder is an upstream that records what it gets and answers "ok".
type recorder struct {
	mu   sync.Mutex
	seen []seenRequest
}

func (rc *recorder) handler(scheme string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.seen = append(rc.seen, seenRequest{scheme, r.URL.RequestURI(), r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"), string(body)})
		rc.mu.Unlock()
		io.WriteString(w, "ok")
	})
}

func (rc *recorder) find(path string) (seenRequest, bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, s := range rc.seen {
		if strings.HasPrefix(s.path, path) {
			return s, true
		}
	}
	return seenRequest{}, false
}

// TestSecrets: a run with secrets sees placeholders, never their values;
// its egress puts each value in place in the HTTP and HTTPS requests to the
// secret's hosts (URL, header, JSON body; a header presentation set), the
// upstream verified against the operator's extra CA; a secret for another
// host arrives as its placeholder; no readable file holds a value nor the
// egress CA's key; the result lists every request with the secrets used.
// Under the engine and under gVisor.
func TestSecrets(t *testing.T) {
	caFile, cert := upstreamTLS(t)
	rc := &recorder{}
	plain := httptest.NewServer(rc.handler("http"))
	defer plain.Close()
	secure := httptest.NewUnstartedServer(rc.handler("https"))
	secure.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	secure.StartTLS()
	defer secure.Close()
	portOf := func(s *httptest.Server) string { return s.URL[strings.LastIndex(s.URL, ":")+1:] }
	t.Run("native", func(t *testing.T) {
		x, err := New(Config{DataDir: t.TempDir(), CacheDir: testCache, Engine: testExec.engine, CompileCacheBytes: -1,
			Network: NetworkConfig{ExtraCAFile: caFile}, Intercept: testIntercept})
		if err != nil {
			t.Fatal(err)
		}
		testSecrets(t, x, "", rc, portOf(plain), portOf(secure))
	})
	t.Run("gvisor", func(t *testing.T) {
		x := gvisorExecutor(t, Config{CacheDir: testCache, Network: NetworkConfig{ExtraCAFile: caFile}, Intercept: testIntercept})
		testSecrets(t, x, IsolationGVisor, rc, portOf(plain), portOf(secure))
	})
}

func testSecrets(t *testing.T, x *Executor, isolation string, rc *recorder, httpPort, httpsPort string) {
	tag := "-" + newID()
	token, other, keyed := "tok"+newID()+newID(), "oth"+newID()+newID(), "key"+newID()+newID()
	secrets := []Secret{
		{Name: "TOKEN", Value: token, Hosts: []string{"host.sandbox.internal"}},
		{Name: "OTHER", Value: other, Hosts: []string{"other.test"}},
		{Name: "KEYED", Value: keyed, Hosts: []string{"host.sandbox.internal:" + httpPort}, HeaderName: "X-Api-Key", HeaderFormat: "k={value}"},
	}
	code := fmt.Sprintf(`
import json, os, re, urllib.request
tok, oth = os.environ["TOKEN"], os.environ["OTHER"]
print("placeholders", tok.startswith("SANDBOX_RUN_SECRET_TOKEN_"), oth.startswith("SANDBOX_RUN_SECRET_OTHER_"), "KEYED" in os.environ)
def get(url, auth, body=None):
    req = urllib.request.Request(url, headers={"Authorization": "Bearer " + auth}, data=body)
    if body is not None:
        req.add_header("Content-Type", "application/json")
    return urllib.request.urlopen(req, timeout=30).read().decode()
base = "://host.sandbox.internal:"
print(get("http" + base + "%s/http%s?k=" + tok, tok))
print(get("https" + base + "%s/https%s?k=" + tok, tok))
print(get("http" + base + "%s/other%s?k=" + oth, oth))
print(get("http" + base + "%s/json%s", tok, json.dumps({"token": tok}).encode()))
ca = open("/etc/ssl/certs/sandbox-run-egress-ca.pem").read()
print("ca", "BEGIN CERTIFICATE" in ca, "PRIVATE" in ca, "PRIVATE" in open("/etc/ssl/certs/ca-certificates.crt").read())
found = []
for root, dirs, files in (w for top in ("/etc", "/work", "/tmp", "/home", "/root", "/run", "/var", "/dev/shm") for w in os.walk(top)):
    for f in files:
        try:
            data = open(os.path.join(root, f), "rb").read(1 << 20)
        except Exception:
            continue
        if re.search(rb"(tok|oth|key)[0-9a-f]{32}", data):
            found.append(os.path.join(root, f))
print("found", found)
`, httpPort, tag, httpsPort, tag, httpPort, tag, httpPort, tag)
	res := executeWith(t, x, &Request{Language: "python", Code: []byte(code), Secrets: secrets, Isolation: isolation,
		Network: []string{"host.sandbox.internal:" + httpPort, "host.sandbox.internal:" + httpsPort}, Limits: Limits{WallTime: 60 * time.Second}})
	expectCompleted(t, res, "placeholders True True True\nok\nok\nok\nok\nca True False False\nfound []\n")
	for _, v := range []string{token, other, keyed} {
		if strings.Contains(res.Stdout+res.Stderr, v) {
			t.Errorf("a secret's value in the run's output")
		}
	}
	for _, scheme := range []string{"http", "https"} {
		s, ok := rc.find("/" + scheme + tag)
		if !ok || s.scheme != scheme || s.auth != "Bearer "+token || !strings.HasSuffix(s.path, "?k="+token) {
			t.Errorf("%s upstream got %+v", scheme, s)
		}
		if want := "k=" + keyed; (scheme == "http") != (s.apiKey == want) {
			t.Errorf("%s upstream: X-Api-Key %q (the keyed secret is for the plain port only)", scheme, s.apiKey)
		}
	}
	if s, ok := rc.find("/other" + tag); !ok || strings.Contains(s.auth+s.path, other) || !strings.Contains(s.auth, "SANDBOX_RUN_SECRET_OTHER_") {
		t.Errorf("a secret for another host reached this one: %+v", s)
	}
	if s, ok := rc.find("/json" + tag); !ok || s.body != fmt.Sprintf(`{"token": "%s"}`, token) {
		t.Errorf("the JSON body arrived as %q", s.body)
	}
	var reqs []string
	for _, r := range res.Network.Requests {
		reqs = append(reqs, fmt.Sprintf("%s %s %s %d %v", r.Scheme, r.Method, strings.Split(r.Path, "?")[0], r.Status, r.Secrets))
		if strings.Contains(r.Path+r.Error, token) {
			t.Errorf("the request log holds a value: %+v", r)
		}
	}
	want := []string{"http GET /http" + tag + " 200 [TOKEN KEYED]", "https GET /https" + tag + " 200 [TOKEN]",
		"http GET /other" + tag + " 200 [KEYED]", "http POST /json" + tag + " 200 [TOKEN KEYED]"}
	if strings.Join(reqs, "\n") != strings.Join(want, "\n") {
		t.Errorf("network.requests:\n%s\nwant\n%s", strings.Join(reqs, "\n"), strings.Join(want, "\n"))
	}
	if left, _ := filepath.Glob(filepath.Join(x.dataDir, "network", "ca-*")); len(left) > 0 {
		t.Errorf("the run's CA files are left: %v", left)
	}
	// Secrets need a network, and their names are the placeholders'.
	if _, err := x.Execute(t.Context(), &Request{Language: "python", Code: []byte("1"), Secrets: secrets[:1], Isolation: isolation}); err == nil {
		t.Error("a run with secrets and no network ran")
	}
	if _, err := x.Execute(t.Context(), &Request{Language: "python", Code: []byte("1"), Secrets: secrets[:1], Isolation: isolation,
		Network: []string{"host.sandbox.internal:" + httpPort}, Env: map[string]string{"TOKEN": "mine"}}); err == nil {
		t.Error("a run whose env sets a secret's name ran")
	}
}

// testIntercept is pkg/intercept's proxy, as the server gives it
// (local.Intercept).
func testIntercept(cfg carry.Config) carry.Carrier { return intercept.New(cfg) }

// TestSecretsJava: a Java program's HTTPS request carries the secret's
// value in place of its placeholder: the JDK trusts the egress's CA
// through /etc/ssl/certs/java/cacerts (CAMounts), and nothing is printed
// on its stderr (no JAVA_TOOL_OPTIONS).
func TestSecretsJava(t *testing.T) {
	caFile, cert := upstreamTLS(t)
	rc := &recorder{}
	secure := httptest.NewUnstartedServer(rc.handler("https"))
	secure.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	secure.StartTLS()
	defer secure.Close()
	port := secure.URL[strings.LastIndex(secure.URL, ":")+1:]
	x, err := New(Config{DataDir: t.TempDir(), CacheDir: testCache, Engine: testExec.engine, CompileCacheBytes: -1,
		Network: NetworkConfig{ExtraCAFile: caFile}, Intercept: testIntercept})
	if err != nil {
		t.Fatal(err)
	}
	tag := "/java-" + newID()
	token := "tok" + newID() + newID()
	code := fmt.Sprintf(`
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;

public class Main {
    public static void main(String[] args) throws Exception {
        String tok = System.getenv("TOKEN");
        System.out.println(tok.startsWith("SANDBOX_RUN_SECRET_TOKEN_"));
        HttpRequest req = HttpRequest.newBuilder(URI.create("https://host.sandbox.internal:%s%s"))
            .header("Authorization", "Bearer " + tok).build();
        HttpResponse<String> res = HttpClient.newHttpClient().send(req, HttpResponse.BodyHandlers.ofString());
        System.out.println(res.statusCode() + " " + res.body());
    }
}
`, port, tag)
	res := executeWith(t, x, &Request{Language: "java", Code: []byte(code),
		Secrets: []Secret{{Name: "TOKEN", Value: token, Hosts: []string{"host.sandbox.internal"}}},
		Network: []string{"host.sandbox.internal:" + port}, Limits: Limits{WallTime: 60 * time.Second}})
	expectCompleted(t, res, "true\n200 ok\n")
	if res.Stderr != "" {
		t.Errorf("stderr %q", res.Stderr)
	}
	if s, ok := rc.find(tag); !ok || s.auth != "Bearer "+token {
		t.Errorf("the upstream got %+v", s)
	}
}

// TestInterpreterSecrets: an interpreter session's kernel starts with the
// secrets' placeholders in its environment, and each cell's requests carry
// the values that cell brings (a value changed in the store reaches the
// next cell, the placeholder the same); the CA's files go with the kernel.
func TestInterpreterSecrets(t *testing.T) {
	rc := &recorder{}
	up := httptest.NewServer(rc.handler("http"))
	defer up.Close()
	port := up.URL[strings.LastIndex(up.URL, ":")+1:]
	x, err := New(Config{DataDir: t.TempDir(), CacheDir: testCache, Engine: testExec.engine, CompileCacheBytes: -1, Intercept: testIntercept})
	if err != nil {
		t.Fatal(err)
	}
	session, tag := "interp-"+newID(), newID()
	defer x.EndInterpreter(session)
	cell := func(code, value string) *Result {
		t.Helper()
		res := executeWith(t, x, &Request{Language: "python", Code: []byte(code), SessionID: session, Interpreter: true,
			Network: []string{"host.sandbox.internal:" + port}, Limits: Limits{WallTime: 60 * time.Second},
			Secrets: []Secret{{Name: "TOKEN", Value: value, Hosts: []string{"host.sandbox.internal"}}}})
		if res.Status != StatusCompleted {
			t.Fatalf("%q: %+v %+v", code, res, res.Exception)
		}
		return res
	}
	get := fmt.Sprintf(`urllib.request.urlopen(urllib.request.Request("http://host.sandbox.internal:%s/%%s%s", headers={"Authorization": "Bearer " + tok}), timeout=30).read().decode()`, port, tag)
	first, second := "v1"+newID(), "v2"+newID()
	r := cell("import os, urllib.request\ntok = os.environ['TOKEN']\nprint(tok.startswith('SANDBOX_RUN_SECRET_TOKEN_'))\n"+fmt.Sprintf(get, "one"), first)
	if r.Stdout != "True\n" || r.Value["text/plain"] != "'ok'" {
		t.Errorf("the first cell: %q %v", r.Stdout, r.Value)
	}
	r = cell("print(os.environ['TOKEN'] == tok)\n"+fmt.Sprintf(get, "two"), second)
	if r.Stdout != "True\n" || r.Value["text/plain"] != "'ok'" {
		t.Errorf("the second cell: %q %v", r.Stdout, r.Value)
	}
	for path, want := range map[string]string{"/one" + tag: first, "/two" + tag: second} {
		if s, ok := rc.find(path); !ok || s.auth != "Bearer "+want {
			t.Errorf("%s: the upstream got %+v, want the value of its cell", path, s)
		}
	}
	if n := len(r.Network.Requests); n != 2 || !slices.Equal(r.Network.Requests[1].Secrets, []string{"TOKEN"}) {
		t.Errorf("network.requests: %+v", r.Network.Requests)
	}
	if left, _ := filepath.Glob(filepath.Join(x.dataDir, "network", "ca-*")); len(left) != 1 {
		t.Errorf("the kernel's CA files while it runs: %v", left)
	}
	x.EndInterpreter(session)
	if left, _ := filepath.Glob(filepath.Join(x.dataDir, "network", "ca-*")); len(left) > 0 {
		t.Errorf("the kernel's CA files are left after it ended: %v", left)
	}
}
