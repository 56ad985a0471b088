package executor

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/intercept"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
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

// The paths a run with secrets finds its egress's CA at: the system's
// bundle (with the CA added) and the CA alone; and the variables that
// name them for the clients that read one.
const (
	caBundlePath = "/etc/ssl/certs/ca-certificates.crt"
	caOnlyPath   = "/etc/ssl/certs/sandbox-run-egress-ca.pem"
)

// caEnv points the usual clients at the bundle (OpenSSL, Python's
// requests, curl) and Node at the CA, which it adds to its own.
var caEnv = []string{"SSL_CERT_FILE=" + caBundlePath, "REQUESTS_CA_BUNDLE=" + caBundlePath, "CURL_CA_BUNDLE=" + caBundlePath,
	"NODE_EXTRA_CA_CERTS=" + caOnlyPath}

// hostBundle is the host's CA bundle, which a run's bundle starts with.
const hostBundle = "/etc/ssl/certs/ca-certificates.crt"

var secretName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// placeholder is what the program sees for secret name: its name and 24
// random hex digits, unique to the run.
func placeholder(name string) string {
	b := make([]byte, 12)
	rand.Read(b)
	return "SANDBOX_RUN_SECRET_" + name + "_" + hex.EncodeToString(b)
}

// useSecrets readies spec, a run's that lives at most life, for secrets:
// each one's placeholder in its environment, the CA its egress
// intercepts TLS with trusted by its clients (files mounted, variables
// set), and the proxy its egress serves its connections through. done
// removes the CA's files once the run is over.
func (x *Executor) useSecrets(spec *sandbox.Spec, secrets []Secret, life time.Duration) (_ *intercept.Proxy, done func(), err error) {
	ca, err := intercept.NewCA(life + time.Hour)
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp(filepath.Join(x.dataDir, "network"), "ca-")
	if err != nil {
		if err = os.MkdirAll(filepath.Join(x.dataDir, "network"), 0o755); err == nil {
			dir, err = os.MkdirTemp(filepath.Join(x.dataDir, "network"), "ca-")
		}
		if err != nil {
			return nil, nil, err
		}
	}
	done = func() { os.RemoveAll(dir) }
	defer func() {
		if err != nil {
			done()
		}
	}()
	// The sandbox's user reads them through their mounts.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, nil, err
	}
	bundle, _ := os.ReadFile(hostBundle) // none on the host: the CA alone
	bundle = append(append(bundle, '\n'), ca.CertPEM()...)
	for name, data := range map[string][]byte{"bundle.pem": bundle, "ca.pem": ca.CertPEM()} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return nil, nil, err
		}
	}
	spec.Mounts = append(spec.Mounts, sandbox.Mount{Source: filepath.Join(dir, "bundle.pem"), Target: caBundlePath},
		sandbox.Mount{Source: filepath.Join(dir, "ca.pem"), Target: caOnlyPath})
	roots, err := x.upstreamRoots()
	if err != nil {
		return nil, nil, err
	}
	cfg := intercept.Config{CA: ca, Roots: roots}
	for _, sec := range secrets {
		ph := placeholder(sec.Name)
		is := intercept.Secret{Name: sec.Name, Placeholder: ph, Value: sec.Value, Hosts: sec.Hosts}
		if sec.HeaderName != "" {
			is.Header = &intercept.Header{Name: sec.HeaderName, Format: sec.HeaderFormat}
		}
		cfg.Secrets = append(cfg.Secrets, is)
		spec.Env = append(spec.Env, sec.Name+"="+ph)
	}
	spec.Env = append(spec.Env, caEnv...)
	return intercept.New(cfg), done, nil
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

// checkSecrets refuses secrets a run cannot use: without a network, with
// test cases, or by a name that is no environment variable's.
func checkSecrets(req *Request) error {
	if len(req.Secrets) == 0 {
		return nil
	}
	if len(req.Network) == 0 {
		return invalid("secrets: a run uses its secrets through its network: give network.allow with their hosts")
	}
	seen := map[string]bool{}
	for _, s := range req.Secrets {
		if !secretName.MatchString(s.Name) || seen[s.Name] {
			return invalid("secrets: %q is no secret's name, or is named twice", s.Name)
		}
		seen[s.Name] = true
	}
	return nil
}
