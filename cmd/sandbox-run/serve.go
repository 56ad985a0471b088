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

	"github.com/sandbox-run/sandbox-run/internal/cli"
	"github.com/sandbox-run/sandbox-run/pkg/api"
	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
)

func cmdServe(args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: sandbox-run serve [--config FILE] [--addr HOST:PORT] [flags]

Serves the HTTP API (POST /api/sandbox/execute, GET /api/sandbox/languages,
/healthz, /readyz, /metrics, /api/openapi.json). Configuration comes from the
YAML file, then SANDBOX_RUN_* variables, then these flags. Without API keys
(SANDBOX_RUN_API_KEYS="id=key,...") it serves only a loopback address.

Flags:
`)
		cli.PrintFlags(fs.Output(), fs)
	}
	flags := config.NewFlags(fs, "addr", "data-dir", "languages", "log-level", "workers", "queue", "pool-size", "prewarm", "compile-cache-bytes", "cgroup-parent")
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
	x, err := runner.NewExecutor(cfg)
	if err != nil {
		log.Error("cannot sandbox on this host", "error", err)
		return exitSetup
	}
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
	stopCaches := prepareCaches(x, cfg.Prewarm > 0, log)
	err = api.New(cfg, x, log).Serve(ctx, ln)
	stopCaches()
	// The sandboxes waiting idle in the pool go with the server.
	x.Engine().Close()
	if err != nil {
		log.Error("serve", "error", err)
		return 1
	}
	return 0
}

// prepareCaches has the server fill the toolchain caches (Go's build
// cache: ~20 s the first time on a data dir) in the background as it
// starts, logging when one is filled, so that no request waits for it.
// The returned function stops it and waits until it has stopped.
func prepareCaches(x *executor.Executor, enabled bool, log *slog.Logger) (stop func()) {
	x.OnCacheProgress(func(ev executor.CacheEvent) {
		switch {
		case !ev.Done:
			log.Info("preparing toolchain cache", "language", ev.Language, "dir", ev.Dir)
		case ev.Err != nil:
			log.Warn("toolchain cache failed", "language", ev.Language, "error", ev.Err, "seconds", ev.Elapsed.Seconds())
		default:
			log.Info("toolchain cache ready", "language", ev.Language, "seconds", ev.Elapsed.Seconds())
		}
	})
	if !enabled {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		x.PrepareCaches(ctx) // failures are logged as they happen
	}()
	return func() {
		cancel()
		<-done
	}
}
