package repl

import (
	"context"
	"flag"
	"fmt"
	"math"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/sandbox-run/sandbox-run/internal/app/cli"
	"github.com/sandbox-run/sandbox-run/pkg/client"
	"github.com/sandbox-run/sandbox-run/pkg/config"
)

const usage = `Usage: sandbox-run repl -l python|javascript [--server URL] [flags]

A read-eval-print loop on an interpreter session: each cell runs in one
long-lived interpreter in a sandbox, so variables, imports and functions
persist. After a cell's output come what it displayed and the value of its
last expression (their text, as Python's REPL prints it; an image without
text as "[image/png, N bytes]", or with --save-images DIR written to
DIR/cell-N-K.png and its path printed), then its exception.

A cell ends with a line that continues nothing: brackets are balanced, the
line does not end with ':' or '\', and an indented Python block ends with an
empty line. On a terminal the prompt is '>>> ' ('... ' inside a cell);
standard input may be piped too: printf 'x = 41\nx + 1\n' | sandbox-run repl
-l python prints 42. exit(), quit() or EOF (Ctrl-D) ends the loop and the
session. Ctrl-C interrupts the running cell (the session keeps its state) or,
at the prompt, clears the cell; when standard input is no terminal, SIGINT
ends the loop (exit 130).

Without --server the sandbox runs on this host, configured as serve and mcp
are (--config, SANDBOX_RUN_*, the flags below); with --server URL (or
SANDBOX_RUN_SERVER) the session is the server's, deleted at exit.

Exit codes: 0 at EOF, 2 usage error (a language without interpreter
sessions too), 125 the sandbox or the server could not be set up or reached,
130 interrupted.

Flags:
`

// replFlags are repl's own flags; the configuration's are config.Flags.
type flags struct {
	lang, image, saveImages string
	server, apiKey          string
	timeout                 float64
}

// replConfigFlags are the configuration flags of a local repl, mcp's.
var configFlags = []string{"data-dir", "languages", "log-level", "workers", "queue", "cgroup-parent"}

// Command is `sandbox-run repl ARGS`: it parses them, opens the session
// and runs the loop on standard input; con is the command's console, and
// failure says why a call to server failed and returns the exit code (the
// command's, as for execute --server).
func Command(args []string, con *cli.Console, failure func(ctx context.Context, server string, err error) int) int {
	fatalf := sayer(con)
	fs := flag.NewFlagSet("repl", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		cli.PrintFlags(fs.Output(), fs)
	}
	var f flags
	cfgFlags := config.NewFlags(fs, configFlags...)
	fs.StringVar(&f.lang, "language", "", "the interpreter: python or javascript (required)")
	fs.StringVar(&f.lang, "l", "", "shorthand for --language")
	fs.Float64Var(&f.timeout, "timeout", 0, "wall-clock limit of each cell in seconds (default: the configuration's or the server's default, usually 30)")
	fs.StringVar(&f.image, "image", "", "run the interpreter in this OCI image's root filesystem (as execute --image)")
	fs.StringVar(&f.saveImages, "save-images", "", "write the images cells display into this directory, as cell-N-K.png")
	fs.StringVar(&f.server, "server", os.Getenv("SANDBOX_RUN_SERVER"), "run on this sandbox-run server (URL) instead of locally")
	fs.StringVar(&f.apiKey, "api-key", "", "API key for --server (default $SANDBOX_RUN_API_KEY)")
	if ok, code := cli.Parse(fs, args); !ok {
		return code
	}
	switch {
	case fs.NArg() > 0:
		return fatalf(exitUsage, "repl takes no arguments, got %q (the code is read from standard input)", fs.Args())
	case strings.TrimSpace(f.lang) == "":
		return fatalf(exitUsage, "--language is required: python or javascript")
	case f.timeout < 0 || math.IsNaN(f.timeout) || math.IsInf(f.timeout, 0):
		return fatalf(exitUsage, "--timeout must be positive (or 0 for the default), got %v", f.timeout)
	}
	if f.saveImages != "" {
		if err := os.MkdirAll(f.saveImages, 0o755); err != nil {
			return fatalf(exitUsage, "--save-images: %v", err)
		}
	}

	// Signals are ours from now on: one during the set-up ends it.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	setupDone := make(chan struct{})
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-setupDone:
		}
	}()
	o := Options{Language: f.lang, Image: f.image, Timeout: f.timeout, SaveImages: f.saveImages, Console: con}
	var cells Cells
	code := exitUsage
	switch {
	case f.server != "":
		cells, code = remote(ctx, fs, &f, o, failure)
	default:
		cfg, err := cfgFlags.Load(os.Getenv)
		if err != nil {
			fatalf(exitUsage, "config: %v", err)
			break
		}
		fs.Visit(func(fl *flag.Flag) { o.LogLevelSet = o.LogLevelSet || fl.Name == "log-level" })
		cells, code = Local(cfg, o)
	}
	close(setupDone)
	if cells == nil {
		return code
	}
	defer cells.Close()
	if ctx.Err() != nil {
		return fatalf(exitInterrupted, "interrupted")
	}
	cancel()
	return Loop(cells, os.Stdin, sigs, o)
}

// remote opens the session on --server, refusing the local
// configuration's flags.
func remote(ctx context.Context, fs *flag.FlagSet, f *flags, o Options, failure func(context.Context, string, error) int) (Cells, int) {
	fatalf := sayer(o.Console)
	var conflict []string
	fs.Visit(func(fl *flag.Flag) {
		if slices.Contains(configFlags, fl.Name) {
			conflict = append(conflict, fmt.Sprintf("--%s cannot be used with --server: it configures the local sandbox", fl.Name))
		}
	})
	if len(conflict) > 0 {
		sort.Strings(conflict)
		return nil, fatalf(exitUsage, "%s", strings.Join(conflict, "\nsandbox-run: "))
	}
	if u, err := url.Parse(f.server); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fatalf(exitUsage, "--server wants an http:// or https:// URL, got %q", f.server)
	}
	key := f.apiKey
	if key == "" {
		key = os.Getenv("SANDBOX_RUN_API_KEY")
	}
	fail := func(ctx context.Context, err error) int { return failure(ctx, f.server, err) }
	return Remote(ctx, client.New(f.server, client.WithAPIKey(key)), f.server, o, fail)
}
