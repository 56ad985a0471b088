package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/sandbox-run/sandbox-run/internal/app/cli"
	"github.com/sandbox-run/sandbox-run/internal/app/clusternode"
	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/local"
)

func cmdServe(args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: sandbox-run serve [--config FILE] [--addr HOST:PORT] [flags]

Serves the HTTP API (POST /api/sandbox/execute, GET /api/sandbox/languages,
/healthz, /readyz, /metrics, /api/openapi.json). Configuration comes from the
YAML file, then SANDBOX_RUN_* variables, then these flags. Without API keys
(SANDBOX_RUN_API_KEYS="id=key,...") it serves only a loopback address.
With --nats URL[,URL...] it is an API node of a cluster on NATS JetStream
(and a worker of it too, unless --role api): see docs/CLUSTER.md.

Flags:
`)
		cli.PrintFlags(fs.Output(), fs)
	}
	flags := config.NewFlags(fs, "addr", "data-dir", "languages", "log-level", "workers", "queue", "pool-size", "prewarm", "compile-cache-bytes", "cgroup-parent", "nats", "role", "nats-creds", "nats-ca", "nats-cert", "nats-key", "nats-insecure")
	printConfig := fs.Bool("print-config", false, "print the effective configuration as JSON and exit")
	if ok, code := cli.Parse(fs, args); !ok {
		return code
	}
	cfg, err := flags.Load(os.Getenv)
	if err != nil {
		return fatalf(exitUsage, "config: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		return fatalf(exitUsage, "config: %v", err)
	}
	if *printConfig {
		cli.PrintJSON(cfg)
		return 0
	}
	// The heap is small and every run allocates a little: collect less
	// often than Go's default unless GOGC says otherwise.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	level := slog.LevelInfo
	if cfg.LogLevel == "debug" {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	x, err := local.NewExecutor(cfg)
	if err != nil {
		log.Error("cannot sandbox on this host", "error", err)
		return exitSetup
	}
	defer x.Close() // gVisor's sandboxes booted ahead
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		log.Error("listen", "error", err)
		return exitSetup
	}
	if len(cfg.Keys) == 0 {
		log.Warn("no API keys configured: authentication is off, serving loopback only", "addr", ln.Addr().String())
	}
	log.Info("serving", "addr", ln.Addr().String(), "workers", cfg.Workers, "queue", cfg.Queue, "keys", len(cfg.Keys), "version", version)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	stopCaches := local.PrepareCaches(x, cfg.Prewarm > 0 && x.Engine() != nil, log)
	stopFollowing := local.FollowHost(x, log)
	err = clusternode.Serve(ctx, cfg, x, ln, log)
	stopFollowing()
	stopCaches()
	// The sandboxes waiting idle in the pool go with the server.
	if e := x.Engine(); e != nil {
		e.Close()
	}
	if err != nil {
		log.Error("serve", "error", err)
		if clusternode.IsSetup(err) {
			return exitSetup
		}
		return 1
	}
	return 0
}
