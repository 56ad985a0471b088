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
	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/local"
	"github.com/sandbox-run/sandbox-run/pkg/mcp"
)

func init() { mcp.Version = version }

// cmdMCP serves MCP on stdin and stdout until the client closes stdin.
func cmdMCP(args []string) int {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: sandbox-run mcp [--config FILE] [flags]

Serves the Model Context Protocol on standard input and output, for AI agents
(an MCP host starts it: {"mcpServers": {"sandbox-run": {"command":
"sandbox-run", "args": ["mcp"]}}}). Tools: execute_code, list_languages,
create_session, run_in_session, list_session_files, read_session_file,
close_session. Limits and paths come from the same configuration as serve
(YAML file, SANDBOX_RUN_* variables, these flags). Logs go to standard error;
sessions last until the client closes standard input.

Flags:
`)
		fs.PrintDefaults()
	}
	flags := config.NewFlags(fs, "data-dir", "languages", "log-level", "workers", "queue", "cgroup-parent")
	if ok, code := cli.Parse(fs, args); !ok {
		return code
	}
	cfg, err := flags.Load(os.Getenv)
	if err != nil {
		return fatalf(exitUsage, "config: %v", err)
	}
	if err := cfg.ValidateLocal(); err != nil {
		return fatalf(exitUsage, "config: %v", err)
	}
	level := slog.LevelInfo
	if cfg.LogLevel == "debug" {
		level = slog.LevelDebug
	}
	// Standard output carries the protocol: logs go to standard error.
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	x, err := local.NewExecutor(cfg)
	if err != nil {
		log.Error("cannot sandbox on this host", "error", err)
		return exitSetup
	}
	defer x.Engine().Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	s := mcp.New(cfg, local.New(x), log)
	defer s.Close()
	if err := s.Run(ctx, mcp.Stdio(os.Stdin, os.Stdout)); err != nil && ctx.Err() == nil {
		log.Error("mcp", "error", err)
		return 1
	}
	return 0
}
