// Package carry is what it takes to have a sandbox's connections carried
// for its secrets, without speaking HTTP: the sandbox's certificate
// authority, the secrets as the carrier takes them, where a connection
// goes, the requests it logs, and the Carrier interface. The carrier
// itself, an HTTP and HTTPS proxy, is pkg/intercept; the executor, which
// must link no HTTP, takes one through this package's types.
package carry

import (
	"context"
	"crypto/x509"
	"net"

	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// Defaults for the zero values of Config.
const (
	DefaultMaxLog  = 1000
	DefaultMaxBody = 1 << 20
)

// Secret is one secret of the run. The program sees Placeholder (in its
// environment); requests to Hosts get Value in its place.
type Secret struct {
	Name        string
	Placeholder string
	Value       string
	// Hosts are the hosts the value may be sent to: "api.example.com", or
	// "*.example.com" for its subdomains at any depth (not the apex), with
	// an optional ":port" restricting the entry to that destination port.
	Hosts []string
	// Header, when set, is set on every request to Hosts.
	Header *Header
}

// Header is a request header a secret sets: Name is set to Format with
// "{value}" replaced by the secret's value, or to the value when Format is
// empty. It replaces any header of that name the program sent.
type Header struct {
	Name   string
	Format string
}

// Config configures a Carrier.
type Config struct {
	// Secrets are the run's secrets.
	Secrets []Secret
	// CA issues the certificates presented to the program. Without it TLS
	// connections are copied raw, untouched.
	CA *CA
	// Roots verify upstream certificates; nil means the system roots.
	Roots *x509.CertPool
	// MaxLog is the number of requests kept in the log (default
	// DefaultMaxLog); later ones are only counted.
	MaxLog int
	// MaxBody is the largest request body searched for placeholders
	// (default DefaultMaxBody); larger bodies are sent unchanged. A
	// negative MaxBody disables substitution in bodies.
	MaxBody int64
}

// Dest is the destination of a connection as the egress knows it: the
// names the run's DNS answered with the connection's address (or
// "host.sandbox.internal"), and the port.
type Dest struct {
	Names []string
	Port  uint16
}

// Request is one HTTP request the run made, as logged: the API's own type
// (a run's result carries it as it is). No field ever holds a secret's
// value.
type Request = wire.HTTPRequest

// Carrier carries all the connections of one sandbox, putting its secrets
// in place (pkg/intercept's Proxy). It is safe for concurrent use.
type Carrier interface {
	// Serve serves one connection until both sides are done, then
	// closes both; ctx ending closes them.
	Serve(ctx context.Context, sandbox, upstream net.Conn, dest Dest)
	// Requests are the requests logged so far, and how many were left
	// out past the log's cap.
	Requests() (reqs []Request, dropped int)
	// SetSecrets replaces the secrets it puts in place, for the requests
	// from then on (a live sandbox's secrets changed while it runs).
	SetSecrets(secrets []Secret)
}
