// Package clustercmd is the cluster's commands: `sandbox-run worker`, and
// `sandbox-run cluster status|init` (init writes a NATS cluster's
// configuration with per-role users, encryption at rest and the nodes'
// credentials: natsconf.go). cmd/sandbox-run only dispatches to it.
package clustercmd

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/sandbox-run/sandbox-run/internal/app/cli"
	"github.com/sandbox-run/sandbox-run/internal/app/clusternode"
	"github.com/sandbox-run/sandbox-run/pkg/config"
)

// Fail prints a command's error and returns its exit code.
type Fail func(code int, format string, a ...any) int

// Exit codes, as every command has them.
const (
	exitUsage = 2
	exitSetup = 125
)

// natsFlags are the flags of every command that connects to NATS.
var natsFlags = []string{"nats", "nats-creds", "nats-ca", "nats-cert", "nats-key", "nats-insecure"}

// Worker is `sandbox-run worker`.
func Worker(args []string, fail Fail) int {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: sandbox-run worker --nats URL[,URL...] --nats-creds FILE [--workers N] [flags]

Runs sandboxes for a cluster: takes jobs from NATS JetStream when it has a
free slot, runs them and sends back their output and results. GET /healthz,
GET /readyz and GET /metrics on --addr. Until NATS answers it waits. FILE is
worker.creds from `+"`sandbox-run cluster init`"+` (docs/CLUSTER.md).

Flags:
`)
		cli.PrintFlags(fs.Output(), fs)
	}
	flags := config.NewFlags(fs, append(natsFlags, "addr", "data-dir", "languages", "log-level", "workers", "pool-size", "prewarm", "compile-cache-bytes", "cgroup-parent")...)
	fs.Lookup("addr").Usage = "health and metrics listen address (default " + clusternode.DefaultWorkerAddr + ")"
	if ok, code := cli.Parse(fs, args); !ok {
		return code
	}
	cfg, err := flags.Load(os.Getenv)
	if err == nil {
		cfg, err = clusternode.WorkerConfig(cfg)
	}
	if err != nil {
		return fail(exitUsage, "config: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := clusternode.RunWorker(ctx, cfg, slog.New(slog.NewJSONHandler(os.Stderr, nil))); err != nil {
		return fail(exitSetup, "worker: %v", err)
	}
	return 0
}

// Cluster is `sandbox-run cluster status|init`.
func Cluster(args []string, fail Fail) int {
	if len(args) > 0 && args[0] == "init" {
		return initCmd(args[1:], fail)
	}
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: sandbox-run cluster status --nats URL[,URL...] [--nats-creds FILE] [--output-format text|json]
       sandbox-run cluster init --dir DIR [--nodes N] [--host H] [--client-port-base P] [--cluster-port-base Q]

status shows the cluster: NATS and its streams' health, the API nodes and the
workers (versions, free slots), the runs waiting. init writes a NATS cluster's
configuration and the nodes' credentials (sandbox-run cluster init --help).

Flags:
`)
		cli.PrintFlags(fs.Output(), fs)
	}
	flags := config.NewFlags(fs, natsFlags...)
	format := fs.String("output-format", "text", "text or json")
	words, ok, code := cli.ParseWords(fs, args)
	if !ok {
		return code
	}
	if len(words) != 1 || words[0] != "status" {
		return fail(exitUsage, "usage: sandbox-run cluster status --nats URL[,URL...] | sandbox-run cluster init --dir DIR")
	}
	cfg, err := flags.Load(os.Getenv)
	if err != nil {
		return fail(exitUsage, "config: %v", err)
	}
	if err := clusternode.PrintStatus(context.Background(), cfg, *format == "json"); err != nil {
		return fail(exitSetup, "cluster status: %v", err)
	}
	return 0
}

func initCmd(args []string, fail Fail) int {
	fs := flag.NewFlagSet("cluster init", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: sandbox-run cluster init --dir DIR [--nodes N] [--host H] [--client-port-base P] [--cluster-port-base Q]
                            [--tls-cert FILE --tls-key FILE --tls-ca FILE]

Writes a ready configuration for a NATS JetStream cluster of N servers
(DIR/nats-1.conf..nats-N.conf and DIR/auth.conf): a user per role (API nodes,
workers) that may use only the subjects its role needs, JetStream encrypted
at rest with a generated key, the routes authenticated; and the credentials
of each role (DIR/api.creds, DIR/worker.creds: give them to the nodes with
--nats-creds), which also hold the keys the nodes sign their jobs and results
with. Prints the commands that start it.

Flags:
`)
		cli.PrintFlags(fs.Output(), fs)
	}
	var o InitOptions
	fs.StringVar(&o.Dir, "dir", "", "directory to write into (made 0700)")
	fs.IntVar(&o.Nodes, "nodes", 3, "NATS servers")
	fs.StringVar(&o.Host, "host", "127.0.0.1", "the servers' address (all on one host; edit listen and routes for several)")
	fs.IntVar(&o.ClientPortBase, "client-port-base", 4222, "client port of server 1 (server N: base+N-1)")
	fs.IntVar(&o.RoutePortBase, "cluster-port-base", 6222, "cluster (route) port of server 1")
	fs.StringVar(&o.TLSCert, "tls-cert", "", "the servers' TLS certificate (clients and routes)")
	fs.StringVar(&o.TLSKey, "tls-key", "", "its key")
	fs.StringVar(&o.TLSCA, "tls-ca", "", "the CA that verifies the servers (and the routes' peers)")
	fs.BoolVar(&o.Force, "force", false, "write over what DIR holds already")
	if ok, code := cli.Parse(fs, args); !ok {
		return code
	}
	out, err := Init(o)
	if err != nil {
		return fail(exitUsage, "cluster init: %v", err)
	}
	fmt.Print(out)
	return 0
}
