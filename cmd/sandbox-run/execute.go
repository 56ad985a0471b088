package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// listFlag collects a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// commonFlags are shared by commands that build an executor.
type commonFlags struct {
	languages string
	dataDir   string
	format    string
}

func (c *commonFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.languages, "languages", os.Getenv("SANDBOX_RUN_LANGUAGES"), "a languages.yaml that adds or replaces entries")
	fs.StringVar(&c.dataDir, "data-dir", envOr("SANDBOX_RUN_DATA_DIR", executor.DefaultDataDir), "directory for sessions and toolchain caches")
	fs.StringVar(&c.format, "output-format", "text", "output format: text or json")
	fs.StringVar(&c.format, "o", "text", "shorthand for --output-format")
}

// parse parses args and checks the common flags; when it returns false the
// command ends with code (0 for -h).
func (c *commonFlags) parse(fs *flag.FlagSet, args []string) (ok bool, code int) {
	if ok, code := parseOnly(fs, args); !ok {
		return false, code
	}
	if c.format != "text" && c.format != "json" {
		return false, fatalf(exitUsage, "--output-format must be text or json, not %q", c.format)
	}
	return true, 0
}

// parseOnly parses args; when it returns false the command ends with code.
func parseOnly(fs *flag.FlagSet, args []string) (ok bool, code int) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return false, 0
		}
		return false, exitUsage
	}
	return true, 0
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func cmdExecute(args []string) int {
	fs := flag.NewFlagSet("execute", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: sandbox-run execute --language LANG --code FILE|CODE [flags] [-- args...]

Runs code in a fresh sandbox. Text mode streams the program's output live and
exits with its exit code; --output-format json prints the whole result.

Flags:
`)
		fs.PrintDefaults()
	}
	var (
		common                 commonFlags
		lang, code, input      string
		langVersion, sessionID string
		timeout, cpuTime       float64
		memoryMB               int64
		processes              int
		maxOutput, maxFileSize int64
		verbose                bool
		files, outFiles, envs  listFlag
		outputDir              string
	)
	common.register(fs)
	fs.StringVar(&lang, "language", "", "language name or alias (default: from the --code file's extension)")
	fs.StringVar(&lang, "l", "", "shorthand for --language")
	fs.StringVar(&code, "code", "", "the program: a file path, or the code itself")
	fs.StringVar(&code, "c", "", "shorthand for --code")
	fs.StringVar(&input, "input", "", "standard input for the program ('-' reads this command's stdin)")
	fs.StringVar(&input, "i", "", "shorthand for --input")
	fs.Float64Var(&timeout, "timeout", 30, "wall-clock limit in seconds")
	fs.Float64Var(&timeout, "t", 30, "shorthand for --timeout")
	fs.Float64Var(&cpuTime, "cpu-time", 0, "CPU-time limit in seconds (default: the timeout)")
	fs.Int64Var(&memoryMB, "memory", 0, "memory limit in MiB (default 256, or the language's)")
	fs.IntVar(&processes, "max-processes", 0, "limit on processes and threads (default 64, or the language's)")
	fs.Int64Var(&maxOutput, "max-output", 0, "bytes kept per output stream; more ends the run (default 1 MiB)")
	fs.Int64Var(&maxFileSize, "max-file-size", 0, "largest file the program may write, bytes (default 64 MiB)")
	fs.StringVar(&langVersion, "version", "", "toolchain version to require, e.g. 3.11")
	fs.StringVar(&sessionID, "session-id", "", "keep /work between runs with this id")
	fs.Var(&files, "file", "input file NAME=PATH placed in /work (repeatable)")
	fs.Var(&envs, "env", "environment variable KEY=VALUE for the program (repeatable)")
	fs.Var(&outFiles, "output-file", "return only files matching this pattern (repeatable)")
	fs.StringVar(&outputDir, "output-dir", "", "also write the returned files into this host directory")
	fs.BoolVar(&verbose, "verbose", false, "print metrics and the sandbox's decisions to stderr")
	fs.BoolVar(&verbose, "v", false, "shorthand for --verbose")
	if ok, code := common.parse(fs, args); !ok {
		return code
	}
	if code == "" {
		return fatalf(exitUsage, "--code is required (a file path or the code itself)")
	}
	if timeout <= 0 || cpuTime < 0 || memoryMB < 0 || processes < 0 || maxOutput < 0 || maxFileSize < 0 {
		return fatalf(exitUsage, "limits must be positive")
	}

	source := []byte(code)
	if data, err := os.ReadFile(code); err == nil {
		source = data
		if lang == "" {
			lang = "@" + code // resolved by extension below
		}
	} else if lang == "" {
		return fatalf(exitUsage, "--language is required when --code is not a file (%v)", err)
	}

	x, err := executor.New(executor.Config{Languages: common.languages, DataDir: common.dataDir})
	if err != nil {
		return fatalf(exitSetup, "%v", err)
	}
	if file, ok := strings.CutPrefix(lang, "@"); ok {
		l, found := x.Registry().ByExtension(file)
		if !found {
			return fatalf(exitUsage, "cannot tell the language of %s from its extension; pass --language (known: %s)", file, strings.Join(x.Registry().Names(), ", "))
		}
		lang = l.Name
	}

	req := &executor.Request{
		Language:    lang,
		Version:     langVersion,
		Code:        source,
		Args:        fs.Args(),
		OutputFiles: outFiles,
		SessionID:   sessionID,
		Limits: executor.Limits{
			WallTime:    seconds(timeout),
			CPUTime:     seconds(cpuTime),
			MemoryBytes: memoryMB << 20,
			Processes:   processes,
			OutputBytes: maxOutput,
			FileSize:    maxFileSize,
		},
	}
	switch input {
	case "":
	case "-":
		req.Stdin = os.Stdin
	default:
		req.Stdin = strings.NewReader(input)
	}
	for _, f := range files {
		name, path, ok := strings.Cut(f, "=")
		if !ok {
			return fatalf(exitUsage, "--file wants NAME=PATH, got %q", f)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return fatalf(exitUsage, "--file %s: %v", name, err)
		}
		req.Files = append(req.Files, sandbox.File{Path: name, Data: data})
	}
	if len(envs) > 0 {
		req.Env = map[string]string{}
		for _, e := range envs {
			k, v, ok := strings.Cut(e, "=")
			if !ok {
				return fatalf(exitUsage, "--env wants KEY=VALUE, got %q", e)
			}
			req.Env[k] = v
		}
	}
	text := common.format == "text"
	if text {
		req.Stdout, req.Stderr, req.CompileOutput = os.Stdout, os.Stderr, os.Stderr
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := x.Execute(ctx, req)
	if err != nil {
		var unsupported *executor.UnsupportedLanguageError
		var invalid *executor.InvalidRequestError
		if errors.As(err, &unsupported) || errors.As(err, &invalid) {
			return fatalf(exitUsage, "%v", err)
		}
		return fatalf(exitSetup, "%v", err)
	}
	if outputDir != "" {
		if err := writeOutputs(outputDir, res.OutputFiles); err != nil {
			fmt.Fprintf(os.Stderr, "sandbox-run: --output-dir: %v\n", err)
		}
	}
	if text {
		report(os.Stderr, res, verbose)
	} else {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		enc.Encode(res)
	}
	return exitCode(res)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// report tells a text-mode user what the sandbox decided when it matters.
func report(w io.Writer, res *executor.Result, verbose bool) {
	switch res.Status {
	case executor.StatusCompleted, executor.StatusRuntimeError:
		if res.LimitReason != "" {
			fmt.Fprintf(w, "sandbox-run: %s limit exceeded\n", strings.ReplaceAll(res.LimitReason, "_", " "))
		}
	case executor.StatusTimeout:
		fmt.Fprintf(w, "sandbox-run: timeout (%s limit)\n", strings.ReplaceAll(res.LimitReason, "_", " "))
	case executor.StatusCompileError:
		fmt.Fprintln(w, "sandbox-run: compile error")
	case executor.StatusSetupError:
		fmt.Fprintf(w, "sandbox-run: sandbox setup failed: %s\n", res.Error)
	}
	if res.StdoutTruncated || res.StderrTruncated {
		fmt.Fprintln(w, "sandbox-run: output truncated")
	}
	if !verbose {
		return
	}
	if c := res.Compile; c != nil {
		fmt.Fprintf(w, "compile: status=%s exit=%d wall=%.1fms cpu=%.1fms memory=%.1fMiB\n", c.Status, c.ExitCode, c.DurationMs, c.CPUTimeMs, c.MemoryUsedMB)
	}
	fmt.Fprintf(w, "run: id=%s language=%s %s status=%s exit=%d", res.ExecutionID, res.Language, res.Version, res.Status, res.ExitCode)
	if res.Signal != "" {
		fmt.Fprintf(w, " signal=%s", res.Signal)
	}
	if res.LimitReason != "" {
		fmt.Fprintf(w, " limit=%s", res.LimitReason)
	}
	fmt.Fprintf(w, " wall=%.1fms cpu=%.1fms memory=%.1fMiB files=%d\n", res.DurationMs, res.CPUTimeMs, res.MemoryUsedMB, len(res.OutputFiles))
	for _, s := range res.SkippedFiles {
		fmt.Fprintf(w, "skipped output %s: %s\n", s.Path, s.Reason)
	}
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

// writeOutputs stores returned files under dir without ever leaving it.
func writeOutputs(dir string, files executor.OutputFiles) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	for name, data := range files {
		if d := filepath.Dir(name); d != "." {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		if err := root.WriteFile(name, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
