package main

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

func cmdWorker(args []string) int {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: sandbox-run worker --nats URL[,URL...] [--workers N] [flags]

Runs sandboxes for a cluster: takes jobs from NATS JetStream when it has a
free slot, runs them and sends back their output and results. GET /healthz
and GET /metrics on --addr (default `+clusternode.DefaultWorkerAddr+`).

Flags:
`)
		cli.PrintFlags(fs.Output(), fs)
	}
	flags := config.NewFlags(fs, "nats", "addr", "data-dir", "languages", "log-level", "workers", "pool-size", "prewarm", "compile-cache-bytes", "cgroup-parent")
	if ok, code := cli.Parse(fs, args); !ok {
		return code
	}
	cfg, err := flags.Load(os.Getenv)
	if err == nil {
		cfg, err = clusternode.WorkerConfig(cfg)
	}
	if err != nil {
		return fatalf(exitUsage, "config: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := clusternode.RunWorker(ctx, cfg, slog.New(slog.NewJSONHandler(os.Stderr, nil))); err != nil {
		return fatalf(exitSetup, "worker: %v", err)
	}
	return 0
}

func cmdCluster(args []string) int {
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: sandbox-run cluster status --nats URL[,URL...] [--output-format text|json]\n\nShows the cluster's workers, their free slots and the runs waiting.\n\nFlags:\n")
		cli.PrintFlags(fs.Output(), fs)
	}
	flags := config.NewFlags(fs, "nats")
	format := fs.String("output-format", "text", "text or json")
	words, ok, code := cli.ParseWords(fs, args)
	if !ok {
		return code
	}
	if len(words) != 1 || words[0] != "status" {
		return fatalf(exitUsage, "usage: sandbox-run cluster status --nats URL[,URL...]")
	}
	cfg, err := flags.Load(os.Getenv)
	if err != nil {
		return fatalf(exitUsage, "config: %v", err)
	}
	if err := clusternode.PrintStatus(context.Background(), cfg, *format == "json"); err != nil {
		return fatalf(exitSetup, "cluster status: %v", err)
	}
	return 0
}
