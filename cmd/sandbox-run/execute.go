package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/app/cli"
	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/local"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// commonFlags are shared by commands that build an executor: the
// configuration (--config, then SANDBOX_RUN_*, then --data-dir,
// --languages and --cgroup-parent), as serve and mcp read it, and the
// output format.
type commonFlags struct {
	flags  *config.Flags
	cfg    config.Config // loaded by parse
	format string
}

func (c *commonFlags) register(fs *flag.FlagSet) {
	c.flags = config.NewFlags(fs, "data-dir", "languages", "cgroup-parent")
	fs.StringVar(&c.format, "output-format", "text", "output format: text or json")
	fs.StringVar(&c.format, "o", "text", "shorthand for --output-format")
}

// oneShotEngine builds an engine for a command that runs a few sandboxes
// and exits: no pool (no sandbox waits idle, no cgroup is prepared for a
// run that will never come). Close it before exiting: that waits until
// every sandbox, cgroup and mount it made is gone.
func (c *commonFlags) oneShotEngine() (*sandbox.Engine, error) { return sandbox.New(c.oneShot()) }

// oneShot is the configuration of a one-shot engine.
func (c *commonFlags) oneShot() sandbox.Config {
	sc, _ := local.EngineConfigs(c.cfg)
	sc.PoolSize = sandbox.NoPool
	return sc
}

// parse parses args, checks the common flags and loads the configuration;
// when it returns false the command ends with code (0 for -h).
func (c *commonFlags) parse(fs *flag.FlagSet, args []string) (ok bool, code int) {
	if ok, code := cli.Parse(fs, args); !ok {
		return false, code
	}
	if c.format != "text" && c.format != "json" {
		return false, fatalf(exitUsage, "--output-format must be text or json, not %q", c.format)
	}
	cfg, err := c.flags.Load(os.Getenv)
	if err == nil {
		err = cfg.ValidateLocal()
	}
	if err != nil {
		return false, fatalf(exitUsage, "config: %v", err)
	}
	c.cfg = cfg
	return true, 0
}

// parseCommonOnly parses the args of a command that has only the common
// flags; when it returns false the command ends with code.
func parseCommonOnly(name string, args []string) (c commonFlags, ok bool, code int) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: sandbox-run %s [--output-format text|json] [flags]\n\nFlags:\n", name)
		cli.PrintFlags(fs.Output(), fs)
	}
	c.register(fs)
	ok, code = c.parse(fs, args)
	return c, ok, code
}

// executeFlags are the flags of execute, shared by local and remote runs.
type executeFlags struct {
	common                        commonFlags
	lang, code, input             string
	langVersion, sessionID, image string
	isolation                     string
	timeout, cpuTime              float64
	memoryMB                      int64
	processes                     int
	maxOutput, maxFileSize        int64
	maxResponse                   int64
	verbose, interactive          bool
	files, outFiles, envs         cli.List
	allowNet, secrets             cli.List
	outputDir                     string
	server, apiKey                string
	args                          []string // after --
}

func (f *executeFlags) register(fs *flag.FlagSet) {
	f.common.register(fs)
	fs.StringVar(&f.lang, "language", "", "language name or alias (default: from the --code file's extension)")
	fs.StringVar(&f.lang, "l", "", "shorthand for --language")
	fs.StringVar(&f.code, "code", "", "the program: a file path, or the code itself")
	fs.StringVar(&f.code, "c", "", "shorthand for --code")
	fs.StringVar(&f.input, "input", "", "standard input for the program ('-' reads this command's stdin)")
	fs.StringVar(&f.input, "i", "", "shorthand for --input")
	fs.Float64Var(&f.timeout, "timeout", 30, "wall-clock limit in seconds")
	fs.Float64Var(&f.timeout, "t", 30, "shorthand for --timeout")
	fs.Float64Var(&f.cpuTime, "cpu-time", 0, "CPU-time limit in seconds (default: the timeout)")
	fs.Int64Var(&f.memoryMB, "memory", 0, "memory limit in MiB (default 256, or the language's)")
	fs.IntVar(&f.processes, "max-processes", 0, "limit on processes and threads (default 64, or the language's)")
	fs.Int64Var(&f.maxOutput, "max-output", 0, "bytes kept per output stream; more ends the run (default 1 MiB)")
	fs.Int64Var(&f.maxResponse, "max-response", 0, "bytes of output (streams, test cases and files, as JSON encodes them) the result may hold in all; past it output is cut and flagged (default 64 MiB)")
	fs.Int64Var(&f.maxFileSize, "max-file-size", 0, "largest file the program may write, bytes (default 64 MiB)")
	fs.StringVar(&f.langVersion, "version", "", "language version to run, by prefix, e.g. 3.12 or nightly (default: the language's default version; see sandbox-run languages)")
	fs.StringVar(&f.isolation, "isolation", "", "the wall the program runs behind: native (namespaces, cgroups, seccomp) or gvisor (gVisor's kernel as well; needs runsc) (default: the configuration's isolation.default)")
	fs.StringVar(&f.image, "image", "", "run in this OCI image's root filesystem: NAME[:TAG|@DIGEST] from a registry, oci:/DIR[:TAG] or docker-archive:/FILE.tar (pulled once into the data dir; see sandbox-run images)")
	fs.StringVar(&f.sessionID, "session-id", "", "keep /work between runs with this id (with --server: a session the server created)")
	fs.Var(&f.files, "file", "input file NAME=PATH placed in /work (repeatable)")
	fs.Var(&f.envs, "env", "environment variable KEY=VALUE for the program (repeatable)")
	fs.Var(&f.outFiles, "output-file", "return only files matching this pattern (repeatable)")
	fs.Var(&f.allowNet, "allow-net", "let the program reach HOST[:PORT] (a name, *.domain, an IP or CIDR; host.sandbox.internal:PORT is this host's loopback) and nothing else (repeatable; default: no network)")
	fs.Var(&f.secrets, "secret", "a secret `NAME` the program uses unseen: $NAME holds a placeholder the egress replaces with its value in requests to its hosts (repeatable; needs --allow-net; see sandbox-run secrets -h; a local run's are its --data-dir's, as a server without API keys on it keeps them)")
	fs.StringVar(&f.outputDir, "output-dir", "", "also write the returned files into this host directory")
	fs.BoolVar(&f.verbose, "verbose", false, "print metrics and the sandbox's decisions to stderr")
	fs.BoolVar(&f.verbose, "v", false, "shorthand for --verbose")
	fs.BoolVar(&f.interactive, "interactive", false, "connect this command's stdin to the program as it runs, for programs that ask and wait (with --server: over the server's WebSocket, output live)")
	fs.StringVar(&f.server, "server", os.Getenv("SANDBOX_RUN_SERVER"), "run on this sandbox-run server (URL) instead of locally")
	fs.StringVar(&f.apiKey, "api-key", "", "API key for --server (default $SANDBOX_RUN_API_KEY)")
}

func cmdExecute(args []string) int {
	fs := flag.NewFlagSet("execute", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: sandbox-run execute --language LANG --code FILE|CODE [flags] [-- args...]

Runs code in a fresh sandbox. Text mode streams the program's output live and
exits with its exit code; --output-format json prints the whole result.
With --server URL (or SANDBOX_RUN_SERVER) the run happens on a sandbox-run
server instead, with the same flags, output and exit codes; its output is
printed when the run ends.
--interactive connects this command's stdin to the program as it runs (a
program that asks for input and waits gets it; EOF, e.g. Ctrl-D, closes
its stdin, Ctrl-C kills it); with --server the run goes over the server's
WebSocket and its output is printed live.

--output-file PATTERN (repeatable) picks the files of /work to return; without
one, every file the program created or changed comes back. Patterns are
relative to /work: '*' matches any characters but '/', '?' one, [a-z] a class;
an element "**" matches any number of directories ("**/*.txt": every .txt file,
at any depth; "out/**": everything under out/). A pattern without wildcards
names one file (listed as skipped, "not found", when absent). The program's
own source (and a compiled language's binary) comes back only when a pattern
names it exactly (--output-file main.py).

Flags:
`)
		cli.PrintFlags(fs.Output(), fs)
	}
	var f executeFlags
	f.register(fs)
	if ok, code := f.common.parse(fs, args); !ok {
		return code
	}
	f.args = fs.Args()
	if f.code == "" {
		return fatalf(exitUsage, "--code is required (a file path or the code itself)")
	}
	if msg := f.checkLimits(); msg != "" {
		return fatalf(exitUsage, "%s", msg)
	}
	if f.interactive {
		switch {
		case f.input == "-":
			return fatalf(exitUsage, "--interactive reads the program's stdin from this command's already: drop --input -")
		case f.common.format != "text":
			return fatalf(exitUsage, "--interactive prints the output live: it needs --output-format text")
		}
	}
	if f.server != "" {
		return executeRemote(fs, &f)
	}
	return executeLocal(&f)
}

// checkLimits names the first limit flag whose value cannot be a limit
// ("--timeout must be positive, got -1"), or returns "".
func (f *executeFlags) checkLimits() string {
	if f.timeout <= 0 {
		return fmt.Sprintf("--timeout must be positive, got %v", f.timeout)
	}
	for _, l := range []struct {
		name  string
		value float64
	}{
		{"--cpu-time", f.cpuTime}, {"--memory", float64(f.memoryMB)}, {"--max-processes", float64(f.processes)},
		{"--max-output", float64(f.maxOutput)}, {"--max-file-size", float64(f.maxFileSize)}, {"--max-response", float64(f.maxResponse)},
	} {
		if l.value < 0 {
			return fmt.Sprintf("%s must be positive (or 0 for the default), got %v", l.name, l.value)
		}
	}
	return ""
}

// executeLocal runs the request in a sandbox on this host.
func executeLocal(f *executeFlags) int {
	source, lang, err := f.source(f.localExtension)
	if err != nil {
		return fatalf(exitUsage, "%v", err)
	}
	engine, err := f.common.oneShotEngine()
	if err != nil {
		return fatalf(exitSetup, "%v", err)
	}
	// Everything the run made is removed before the command exits.
	defer engine.Close()
	one := f.common.cfg
	one.Isolation.GVisorPool = -1 // one run: nothing booted ahead
	_, cfg := local.EngineConfigs(one)
	cfg.Engine = engine
	cfg.MaxWallTime = 0 // the server's maximum; a local run may take what it asks
	if cli.IsTerminal(os.Stderr) {
		// A toolchain cache prepared for this run (Go's: once per host): say so.
		cfg.CacheProgress = cacheProgress
	}
	x, err := executor.New(cfg)
	if err != nil {
		return fatalf(exitSetup, "%v", err)
	}
	defer x.Close() // gVisor's state, if a run used it
	if lang == "" {
		l, found := x.Registry().ByExtension(f.code)
		if !found {
			return fatalf(exitUsage, "cannot tell the language of %s from its extension; pass --language (known: %s)", f.code, strings.Join(x.Registry().Names(), ", "))
		}
		lang = l.Name
	}

	wreq, err := f.request(lang, source)
	if err != nil {
		return fatalf(exitUsage, "%v", err)
	}
	// The same request a server gets, mapped as a server maps it.
	trace := new(executor.Trace)
	req := runner.Run{Request: wreq, Via: "cli", Local: local.Trace(trace)}
	if cli.IsTerminal(os.Stderr) {
		req.Progress = cli.PrefixWriter{W: con.Stderr(), Prefix: "sandbox-run: "}
	}
	switch {
	case f.interactive:
		// Live stdin: --input, if any, comes first.
		req.Stdin = io.MultiReader(strings.NewReader(f.input), os.Stdin)
	case f.input == "":
	case f.input == "-":
		req.Stdin = os.Stdin
	default:
		req.Stdin = strings.NewReader(f.input)
	}
	text := f.common.format == "text"
	if text {
		req.Stdout, req.Stderr, req.CompileOutput = con.Stdout(), con.Stderr(), con.Stderr()
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The run service as serve's, with one worker: the CLI reports on its
	// own, so it logs nothing.
	rc := runner.Config{Workers: 1, MaxResponseBytes: f.common.cfg.MaxResponseBytes}
	if len(f.secrets) > 0 { // the data dir's store, its keyless owner's (docs/CLI.md): only then is its key made
		rc.Secrets, rc.SecretsErr = runner.OpenSecrets(f.common.cfg)
	}
	svc := runner.New(rc, local.New(x), slog.New(slog.DiscardHandler), nil)
	res, err := svc.Run(ctx, req)
	if err != nil {
		if runner.KindOf(err) == runner.Invalid {
			return fatalf(exitUsage, "%v", err)
		}
		return fatalf(exitSetup, "%v", err)
	}
	return finish(f, res, trace)
}

// request is the run the flags describe, as the HTTP API takes it: local
// runs map it as a server does, remote ones send it. Standard input is
// each mode's own.
func (f *executeFlags) request(lang string, source []byte) (*wire.ExecuteRequest, error) {
	req := &wire.ExecuteRequest{
		Language:         lang,
		Code:             string(source),
		Version:          f.langVersion,
		Image:            f.image,
		Isolation:        f.isolation,
		Args:             f.args,
		OutputFiles:      f.outFiles,
		MaxResponseBytes: f.maxResponse,
		SessionID:        f.sessionID,
		Secrets:          f.secrets,
		Limits: wire.Limits{TimeoutSeconds: f.timeout, CPUTimeSeconds: f.cpuTime, MaxMemoryMB: f.memoryMB,
			MaxProcesses: f.processes, MaxOutputBytes: f.maxOutput, MaxFileSizeBytes: f.maxFileSize},
	}
	if len(f.allowNet) > 0 {
		req.Network = &wire.NetworkRequest{Allow: f.allowNet}
	}
	files, err := f.inputFiles()
	if err != nil {
		return nil, err
	}
	if len(files) > 0 {
		req.Files = make(map[string]wire.FileData, len(files))
		for _, file := range files {
			req.Files[file.name] = file.data
		}
	}
	if req.Env, err = f.environment(); err != nil {
		return nil, err
	}
	return req, nil
}

// finish writes the returned files, reports the result and gives the
// exit code: the common end of local and remote runs (tr is what the
// local executor decided; nil for a server's run). In text mode the
// program's output has been printed already.
func finish(f *executeFlags, res *executor.Result, tr *executor.Trace) int {
	if f.outputDir != "" {
		if err := res.OutputFiles.WriteDir(f.outputDir); err != nil {
			fmt.Fprintf(os.Stderr, "sandbox-run: --output-dir: %v\n", err)
		}
	}
	if f.common.format == "text" {
		con.Message(report(res))
	} else {
		// Streamed: a large result is never built in one buffer.
		out := bufio.NewWriterSize(os.Stdout, 64<<10)
		res.WriteJSON(out, true)
		out.Flush()
	}
	if f.verbose {
		con.Message(decisions(res, tr, f))
	}
	return exitCode(res)
}

// source returns the program and the language: --language, or "" when it
// is to be told from the --code file's extension. A --code that is no file
// but looks like a path (one word with a '/', or ending in an extension
// knownExt knows) is an error naming it, never run as code.
func (f *executeFlags) source(knownExt func(string) bool) ([]byte, string, error) {
	data, err := os.ReadFile(f.code)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && looksLikePath(f.code, knownExt) {
			return nil, "", fmt.Errorf("--code %s: no such file (to run the text itself, it must not look like a file name)", f.code)
		}
		if f.lang == "" {
			return nil, "", fmt.Errorf("--language is required when --code is not a file (%v)", err)
		}
		return []byte(f.code), f.lang, nil
	}
	return data, f.lang, nil
}

// looksLikePath says whether a --code value is meant as a file name: one
// word of file-name characters with a '/' in it or ending in a known
// language extension ("missing.py", "src/main.go"), where code has
// spaces, parentheses, quotes, operators.
func looksLikePath(s string, knownExt func(string) bool) bool {
	if s == "" || strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '_' || r == '-' || r == '+' || r == '~' ||
			'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9')
	}) >= 0 {
		return false
	}
	if strings.Contains(s, "/") {
		return true
	}
	ext := strings.TrimPrefix(filepath.Ext(s), ".")
	return ext != "" && knownExt(strings.ToLower(ext))
}

// localExtension says whether ext ("py") is a file extension of a
// language of this host's table (the --languages file's too).
func (f *executeFlags) localExtension(ext string) bool {
	if _, ok := extensionLanguages[ext]; ok {
		return true
	}
	reg, err := executor.NewRegistry(f.common.cfg.Languages)
	if err != nil {
		return false
	}
	_, ok := reg.ByExtension("x." + ext)
	return ok
}

type inputFile struct {
	name string
	data []byte
}

// inputFiles reads the --file NAME=PATH flags.
func (f *executeFlags) inputFiles() ([]inputFile, error) {
	var files []inputFile
	for _, v := range f.files {
		name, path, ok := strings.Cut(v, "=")
		if !ok {
			return nil, fmt.Errorf("--file wants NAME=PATH, got %q", v)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("--file %s: %v", name, err)
		}
		files = append(files, inputFile{name, data})
	}
	return files, nil
}

// environment reads the --env KEY=VALUE flags (nil without any).
func (f *executeFlags) environment() (map[string]string, error) {
	if len(f.envs) == 0 {
		return nil, nil
	}
	env := map[string]string{}
	for _, e := range f.envs {
		k, v, ok := strings.Cut(e, "=")
		if !ok {
			return nil, fmt.Errorf("--env wants KEY=VALUE, got %q", e)
		}
		env[k] = v
	}
	return env, nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// report is what a text-mode user is told when the run did not simply
// end: a limit, a compile error, cut output.
func report(res *executor.Result) string {
	var b strings.Builder
	switch res.Status {
	case executor.StatusCompleted, executor.StatusRuntimeError:
		if res.LimitReason != "" {
			fmt.Fprintf(&b, "sandbox-run: %s limit exceeded\n", strings.ReplaceAll(res.LimitReason, "_", " "))
		}
	case executor.StatusTimeout:
		fmt.Fprintf(&b, "sandbox-run: timeout (%s limit)\n", strings.ReplaceAll(res.LimitReason, "_", " "))
	case executor.StatusCompileError:
		fmt.Fprintln(&b, "sandbox-run: compile error")
	case executor.StatusSetupError:
		fmt.Fprintf(&b, "sandbox-run: sandbox setup failed: %s\n", res.Error)
	}
	if res.StdoutTruncated || res.StderrTruncated {
		fmt.Fprintln(&b, "sandbox-run: output truncated")
	}
	if res.ResponseTruncated {
		fmt.Fprintln(&b, "sandbox-run: the result is larger than its budget (--max-response): output cut or files skipped")
	}
	return b.String()
}

// exitCode maps a result to the CLI's exit code (see the package doc).
func exitCode(res *executor.Result) int {
	switch res.Status {
	case executor.StatusCompleted:
		return 0
	case executor.StatusTimeout:
		return exitTimeout
	case executor.StatusCompileError:
		return exitCompile
	case executor.StatusSetupError:
		return exitSetup
	}
	switch {
	case res.LimitReason != "" && res.LimitReason != string(sandbox.LimitCanceled):
		return exitLimit
	case res.Signal != "":
		if sig := sandbox.SignalNumber(res.Signal); sig > 0 {
			return 128 + sig
		}
		return 128
	}
	return res.ExitCode & 0xff
}
