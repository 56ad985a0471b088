package carry

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"sync"
	"time"
)

// maxLeaves bounds the leaf certificate cache; past it the cache starts over.
const maxLeaves = 1024

// CA is a run's certificate authority. It is made per run and its private
// key leaves this process only for its holder to keep (Marshal: a live
// sandbox's, which outlives the process): CertPEM is what the sandbox
// trusts. It issues, on demand, the leaf certificates the proxy presents
// to the program and caches them by server name. It is safe for concurrent
// use.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// NewCA makes a CA with an ECDSA P-256 key, the common name
// "sandbox-run egress CA " followed by a random suffix, valid from an hour
// ago until validity from now, and a path length of 0 (it signs leaves
// only). Leaves it issues are valid over the same period.
func NewCA(validity time.Duration) (*CA, error) {
	if validity <= 0 {
		return nil, errors.New("intercept: CA validity must be positive")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	suffix := make([]byte, 8)
	if _, err := rand.Read(suffix); err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "sandbox-run egress CA " + hex.EncodeToString(suffix)},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{
		cert:   cert,
		key:    key,
		pem:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		leaves: make(map[string]*tls.Certificate),
	}, nil
}

// CertPEM returns the CA's certificate in PEM form: what the sandbox
// trusts. The key is not included.
func (c *CA) CertPEM() []byte {
	return append([]byte(nil), c.pem...)
}

// Leaf returns the certificate for name (a DNS name or an IP address),
// issuing and caching it on first use.
func (c *CA) Leaf(name string) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l := c.leaves[name]; l != nil {
		return l, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		NotBefore:    c.cert.NotBefore,
		NotAfter:     c.cert.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip, err := netip.ParseAddr(name); err == nil {
		tmpl.IPAddresses = []net.IP{ip.AsSlice()}
	} else {
		tmpl.DNSNames = []string{name}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		return nil, err
	}
	parsed, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	l := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: parsed}
	if len(c.leaves) >= maxLeaves {
		clear(c.leaves)
	}
	c.leaves[name] = l
	return l, nil
}

func randomSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

// Marshal is the CA with its private key, in PEM, for ParseCA to make it
// again (a live sandbox's, kept while it lives: whoever holds it can
// present certificates its sandbox trusts).
func (c *CA) Marshal() ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(c.key)
	if err != nil {
		return nil, err
	}
	return append(append([]byte{}, c.pem...), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})...), nil
}

// ParseCA makes again the CA Marshal wrote.
func ParseCA(data []byte) (*CA, error) {
	var cert *x509.Certificate
	var key *ecdsa.PrivateKey
	var certPEM []byte
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		var err error
		switch b.Type {
		case "CERTIFICATE":
			if cert, err = x509.ParseCertificate(b.Bytes); err == nil {
				certPEM = pem.EncodeToMemory(b)
			}
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(b.Bytes)
		}
		if err != nil {
			return nil, fmt.Errorf("intercept: the CA: %w", err)
		}
	}
	if cert == nil || key == nil || !cert.IsCA || !key.PublicKey.Equal(cert.PublicKey) {
		return nil, errors.New("intercept: not a CA with its key")
	}
	return &CA{cert: cert, key: key, pem: certPEM, leaves: map[string]*tls.Certificate{}}, nil
}
