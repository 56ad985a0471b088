package carry

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
	"time"
)

func TestCA(t *testing.T) {
	if _, err := NewCA(0); err == nil {
		t.Error("NewCA(0) succeeded")
	}
	ca, err := NewCA(24 * time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(ca.CertPEM())
	if block == nil || block.Type != "CERTIFICATE" || strings.Contains(string(ca.CertPEM()), "PRIVATE") {
		t.Fatalf("CertPEM %q", ca.CertPEM())
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pub, ok := cert.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() || !cert.IsCA || cert.MaxPathLen != 0 || !cert.MaxPathLenZero ||
		!strings.HasPrefix(cert.Subject.CommonName, "sandbox-run egress CA ") || len(cert.Subject.CommonName) <= len("sandbox-run egress CA ") {
		t.Errorf("CA certificate %+v", cert.Subject)
	}
	if d := time.Until(cert.NotBefore); d > -59*time.Minute || d < -61*time.Minute {
		t.Errorf("NotBefore %v", cert.NotBefore)
	}
	if d := time.Until(cert.NotAfter); d > 24*time.Hour || d < 23*time.Hour {
		t.Errorf("NotAfter %v", cert.NotAfter)
	}
	other, _ := NewCA(time.Hour)
	if other.cert.Subject.CommonName == cert.Subject.CommonName {
		t.Error("two CAs with one name")
	}

	pool := x509.NewCertPool()
	pool.AddCert(cert)
	for _, name := range []string{"api.example.com", "10.1.2.3", "::1"} {
		l, err := ca.Leaf(name)
		if err != nil {
			t.Fatal(err)
		}
		if again, _ := ca.Leaf(name); again != l {
			t.Errorf("%s: leaf not cached", name)
		}
		if _, ok := l.PrivateKey.(*ecdsa.PrivateKey); !ok {
			t.Errorf("%s: key %T", name, l.PrivateKey)
		}
		if _, err := l.Leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: pool}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if !l.Leaf.NotAfter.Equal(cert.NotAfter) {
			t.Errorf("%s: NotAfter %v", name, l.Leaf.NotAfter)
		}
	}
	if _, err := mustLeaf(t, ca, "api.example.com").Leaf.Verify(x509.VerifyOptions{DNSName: "other.example.com", Roots: pool}); err == nil {
		t.Error("a leaf verified for another name")
	}
}

func mustLeaf(t *testing.T, ca *CA, name string) *tls.Certificate {
	t.Helper()
	l, err := ca.Leaf(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestCAMarshal: a CA made again from Marshal is the same CA: its
// certificate, and leaves that verify against it; ParseCA refuses what is
// not a CA with its key.
func TestCAMarshal(t *testing.T) {
	ca, err := NewCA(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	data, err := ca.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	again, err := ParseCA(data)
	if err != nil {
		t.Fatal(err)
	}
	if string(again.CertPEM()) != string(ca.CertPEM()) {
		t.Error("another certificate")
	}
	leaf, err := again.Leaf("api.example.com")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM())
	if leaf.Leaf == nil {
		t.Fatal("a leaf without its parsed certificate")
	}
	if _, err := leaf.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "api.example.com"}); err != nil {
		t.Errorf("a leaf of the CA made again does not verify against the CA: %v", err)
	}
	other, _ := NewCA(time.Hour)
	otherData, _ := other.Marshal()
	keyOnly := otherData[len(other.CertPEM()):]
	for name, bad := range map[string][]byte{"certificate only": ca.CertPEM(), "another key": append(ca.CertPEM(), keyOnly...), "nothing": nil} {
		if _, err := ParseCA(bad); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}
