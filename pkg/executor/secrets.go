package executor

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/intercept/carry"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
	"github.com/sandbox-run/sandbox-run/pkg/secrets"
)

// Secret is a secret a run uses without seeing it (Request.Secrets): its
// program gets a placeholder in its environment under Name, and the run's
// egress puts Value in its place in HTTP and HTTPS requests to Hosts
// ("api.example.com", "*.example.com", optionally ":PORT"); with a
// HeaderName it also sets that header on them, HeaderFormat with "{value}"
// replaced.
type Secret struct {
	Name, Value              string
	Hosts                    []string
	HeaderName, HeaderFormat string
}

// The paths a run with secrets finds its egress's CA at, all in caDir:
// the system's bundle (with the CA added), the CA alone, and Java's
// KeyStore (Debian's JDKs' lib/security/cacerts links to it); and the
// variables that name them for the clients that read one.
const (
	caDir         = "/etc/ssl/certs"
	caBundlePath  = caDir + "/ca-certificates.crt"
	caOnlyPath    = caDir + "/sandbox-run-egress-ca.pem"
	javaStorePath = caDir + "/java/cacerts"
)

// caEnv points the usual clients at the bundle (OpenSSL, Python's
// requests, curl) and Node at the CA, which it adds to its own.
var caEnv = []string{"SSL_CERT_FILE=" + caBundlePath, "REQUESTS_CA_BUNDLE=" + caBundlePath, "CURL_CA_BUNDLE=" + caBundlePath,
	"NODE_EXTRA_CA_CERTS=" + caOnlyPath}

// hostBundle is the host's CA bundle, which a run's bundle starts with.
const hostBundle = "/etc/ssl/certs/ca-certificates.crt"

// placeholder is what the program sees for secret name: its name and 24
// random hex digits, unique to the run.
func placeholder(name string) string {
	b := make([]byte, 12)
	rand.Read(b)
	return "SANDBOX_RUN_SECRET_" + name + "_" + hex.EncodeToString(b)
}

// SecretSession is what a sandbox that uses secrets keeps for its life:
// each secret's placeholder (what its programs see) and the CA its egress
// carries TLS with, its key included (carry.CA.Marshal): a live
// sandbox's record keeps it, so that the next server serves it alike.
type SecretSession struct {
	Placeholders map[string]string `json:"placeholders"`
	CA           []byte            `json:"ca"`
}

// NewSecretSession makes the session of a sandbox that uses the secrets
// names and lives at most life.
func NewSecretSession(names []string, life time.Duration) (*SecretSession, error) {
	ca, err := carry.NewCA(life + time.Hour)
	if err != nil {
		return nil, err
	}
	pem, err := ca.Marshal()
	if err != nil {
		return nil, err
	}
	ss := &SecretSession{Placeholders: map[string]string{}, CA: pem}
	for _, n := range names {
		ss.Placeholders[n] = placeholder(n)
	}
	return ss, nil
}

// Env is what the sandbox's programs get in their environment: each
// placeholder by its secret's name, and the variables that point the
// usual clients at the CA's files (CAMounts).
func (ss *SecretSession) Env() []string {
	env := slices.Clone(caEnv)
	for _, n := range slices.Sorted(maps.Keys(ss.Placeholders)) {
		env = append(env, n+"="+ss.Placeholders[n])
	}
	return env
}

// CAMounts writes the CA's files into dir/certs, dir a host directory
// that lives as long as the sandbox (the host's bundle with the CA added,
// the CA alone, and Java's KeyStore of both), and returns the mount that
// puts them where the sandbox's clients look: the directory at
// /etc/ssl/certs (every TLS connection of the sandbox is carried with the
// CA: it needs no other).
func (ss *SecretSession) CAMounts(dir string) ([]sandbox.Mount, error) {
	ca, err := carry.ParseCA(ss.CA)
	if err != nil {
		return nil, err
	}
	certs := filepath.Join(dir, "certs")
	if err := os.MkdirAll(filepath.Join(certs, "java"), 0o755); err != nil {
		return nil, err
	}
	host, _ := os.ReadFile(hostBundle) // none on the host: the CA alone
	files := map[string][]byte{
		caBundlePath:  append(append(slices.Clip(host), '\n'), ca.CertPEM()...),
		caOnlyPath:    ca.CertPEM(),
		javaStorePath: javaStore(ca.CertPEM(), host),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(certs, strings.TrimPrefix(name, caDir)), data, 0o644); err != nil {
			return nil, err
		}
	}
	return []sandbox.Mount{{Source: certs, Target: caDir}}, nil
}

// javaStore is the Java KeyStore of a sandbox with secrets: the egress's
// CA (caPEM) first, then the roots of the host's bundle, which its TLS
// never meets but a program that lists them finds as on the host.
func javaStore(caPEM, host []byte) []byte {
	block, _ := pem.Decode(caPEM)
	certs := []jksCert{{alias: "sandbox-run-egress-ca", der: block.Bytes}}
	for rest := host; ; {
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type == "CERTIFICATE" {
			certs = append(certs, jksCert{alias: fmt.Sprintf("host-%d", len(certs)), der: block.Bytes})
		}
	}
	return encodeJKS(certs, jksPassword, time.Now())
}

// carried are secrets as the proxy of a sandbox of session ss takes them:
// with their placeholders (a secret the sandbox has none for is left out).
func (ss *SecretSession) carried(secrets []Secret) []carry.Secret {
	var out []carry.Secret
	for _, sec := range secrets {
		ph, ok := ss.Placeholders[sec.Name]
		if !ok {
			continue // not the sandbox's: it has no placeholder for it
		}
		is := carry.Secret{Name: sec.Name, Placeholder: ph, Value: sec.Value, Hosts: sec.Hosts}
		if sec.HeaderName != "" {
			is.Header = &carry.Header{Name: sec.HeaderName, Format: sec.HeaderFormat}
		}
		out = append(out, is)
	}
	return out
}

// SecretProxy is what carries the connections of a sandbox of session ss
// that uses secrets (their values): the egress's intercepting proxy.
func (x *Executor) SecretProxy(ss *SecretSession, secrets []Secret) (carry.Carrier, error) {
	ca, err := carry.ParseCA(ss.CA)
	if err != nil {
		return nil, err
	}
	roots, err := x.upstreamRoots()
	if err != nil {
		return nil, err
	}
	cfg := carry.Config{CA: ca, Roots: roots, Secrets: ss.carried(secrets)}
	if x.intercept == nil {
		return nil, invalid("secrets: this executor cannot carry a run's connections (it was made without Config.Intercept)")
	}
	return x.intercept(cfg), nil
}

// useSecrets readies spec, a run's that lives at most life, for secrets:
// a session of its own, ss (placeholders in its environment, the CA's
// files mounted), and the proxy its egress serves its connections
// through. done removes the CA's files once the run is over.
func (x *Executor) useSecrets(spec *sandbox.Spec, secrets []Secret, life time.Duration) (_ carry.Carrier, ss *SecretSession, done func(), err error) {
	names := make([]string, len(secrets))
	for i, sec := range secrets {
		names[i] = sec.Name
	}
	ss, err = NewSecretSession(names, life)
	if err != nil {
		return nil, nil, nil, err
	}
	base := filepath.Join(x.dataDir, "network")
	if err := os.MkdirAll(base, 0o755); err != nil {
		return nil, nil, nil, err
	}
	dir, err := os.MkdirTemp(base, "ca-")
	if err != nil {
		return nil, nil, nil, err
	}
	remove := func() { os.RemoveAll(dir) }
	defer func() {
		if err != nil {
			remove()
		}
	}()
	// The sandbox's user reads them through their mounts.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, nil, nil, err
	}
	mounts, err := ss.CAMounts(dir)
	if err != nil {
		return nil, nil, nil, err
	}
	proxy, err := x.SecretProxy(ss, secrets)
	if err != nil {
		return nil, nil, nil, err
	}
	spec.Mounts = append(spec.Mounts, mounts...)
	spec.Env = append(spec.Env, ss.Env()...)
	return proxy, ss, remove, nil
}

// upstreamRoots are the certificates the egress verifies HTTPS servers
// against: the system's, and the operator's extra ones
// (NetworkConfig.ExtraCAFile).
func (x *Executor) upstreamRoots() (*x509.CertPool, error) {
	x.rootsOnce.Do(func() {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if f := x.net.ExtraCAFile; f != "" {
			b, err := os.ReadFile(f)
			if err != nil {
				x.rootsErr = fmt.Errorf("network.extra_ca_file: %w", err)
				return
			}
			if !pool.AppendCertsFromPEM(b) {
				x.rootsErr = fmt.Errorf("network.extra_ca_file %s: no PEM certificate in it", f)
				return
			}
		}
		x.roots = pool
	})
	return x.roots, x.rootsErr
}

// checkSecrets refuses secrets a run cannot use: without a network, by a
// name that is no environment variable's, or one its env sets too.
func checkSecrets(req *Request) error {
	if len(req.Secrets) == 0 {
		return nil
	}
	if len(req.Network) == 0 {
		return invalid("secrets: a run uses its secrets through its network: give network.allow with their hosts")
	}
	seen := map[string]bool{}
	for _, s := range req.Secrets {
		if !secrets.ValidName(s.Name) || seen[s.Name] {
			return invalid("secrets: %q is no secret's name, or is named twice", s.Name)
		}
		if _, ok := req.Env[s.Name]; ok {
			return invalid("secrets: env %s is a secret's name: its placeholder goes there", s.Name)
		}
		seen[s.Name] = true
	}
	return nil
}
