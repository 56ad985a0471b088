package cli

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"github.com/sandbox-run/sandbox-run/pkg/client"
)

// DefaultServer is the server a command talks to without --server or
// $SANDBOX_RUN_SERVER.
const DefaultServer = "http://127.0.0.1:8080"

// Remote is what a command that talks to a sandbox-run server takes:
// --server, --api-key and, for some, --output-format.
type Remote struct {
	Server, APIKey, Format string
}

// NewRemote is a Remote with the defaults: $SANDBOX_RUN_SERVER, text.
func NewRemote() Remote {
	return Remote{Server: os.Getenv("SANDBOX_RUN_SERVER"), Format: "text"}
}

// Add defines the flags on fs with r's values as defaults (what came
// before a subcommand's name); json adds --output-format (-o).
func (r *Remote) Add(fs *flag.FlagSet, json bool) {
	fs.StringVar(&r.Server, "server", r.Server, "the sandbox-run server (URL) (default $SANDBOX_RUN_SERVER, else "+DefaultServer+")")
	fs.StringVar(&r.APIKey, "api-key", r.APIKey, "API key for the server (default $SANDBOX_RUN_API_KEY)")
	if json {
		fs.StringVar(&r.Format, "output-format", r.Format, "output format: text or json")
		fs.StringVar(&r.Format, "o", r.Format, "shorthand for --output-format")
	}
}

// Connect checks the flags and makes the client (its server in r.Server
// from then on), with a context that ends at SIGINT or SIGTERM (stop
// undoes that). An error is the command line's to fix.
func (r *Remote) Connect() (c *client.Client, ctx context.Context, stop func(), err error) {
	if r.Format != "text" && r.Format != "json" {
		return nil, nil, nil, fmt.Errorf("--output-format must be text or json, not %q", r.Format)
	}
	if r.Server == "" {
		r.Server = DefaultServer
	}
	if u, err := url.Parse(r.Server); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, nil, nil, fmt.Errorf("--server wants an http:// or https:// URL, got %q", r.Server)
	}
	key := r.APIKey
	if key == "" {
		key = os.Getenv("SANDBOX_RUN_API_KEY")
	}
	ctx, stop = signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	return client.New(r.Server, client.WithAPIKey(key)), ctx, stop, nil
}
