package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/sandbox-run/sandbox-run/pkg/api"
	"github.com/sandbox-run/sandbox-run/pkg/client"
	"github.com/sandbox-run/sandbox-run/pkg/executor"
)

// exitInterrupted ends a remote run cut short by SIGINT or SIGTERM.
const exitInterrupted = 130

// localOnly are the execute flags a server cannot honour, and why.
var localOnly = map[string]string{
	"data-dir":  "the server uses its own data directory",
	"languages": "the server uses its own language table",
}

// extensionLanguages tells the built-in languages from a file extension
// without asking the server; other extensions are looked up in the
// server's GET /api/sandbox/languages.
var extensionLanguages = map[string]string{
	"py": "python", "js": "javascript", "mjs": "javascript", "cjs": "javascript",
	"go": "go", "rs": "rust", "java": "java", "sh": "bash", "bash": "bash",
	"c": "c", "cpp": "cpp", "cc": "cpp", "cxx": "cpp", "c++": "cpp",
}

// executeRemote runs the request on a sandbox-run server: the same request
// as a local run, sent to POST /api/sandbox/execute, streamed live in text
// mode.
func executeRemote(fs *flag.FlagSet, f *executeFlags) int {
	var conflict []string
	fs.Visit(func(fl *flag.Flag) {
		if why, ok := localOnly[fl.Name]; ok {
			conflict = append(conflict, fmt.Sprintf("--%s cannot be used with --server: %s", fl.Name, why))
		}
	})
	if len(conflict) > 0 {
		sort.Strings(conflict)
		return fatalf(exitUsage, "%s", strings.Join(conflict, "\nsandbox-run: "))
	}
	if u, err := url.Parse(f.server); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fatalf(exitUsage, "--server wants an http:// or https:// URL, got %q", f.server)
	}
	key := f.apiKey
	if key == "" {
		key = os.Getenv("SANDBOX_RUN_API_KEY")
	}
	c := client.New(f.server, client.WithAPIKey(key))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// Extensions the built-in table knows make a missing file an error;
	// the server's own are not asked for here.
	source, lang, err := f.source(func(ext string) bool { _, ok := extensionLanguages[ext]; return ok })
	if err != nil {
		return fatalf(exitUsage, "%v", err)
	}
	if !utf8.Valid(source) {
		return fatalf(exitUsage, "--code: the program is not UTF-8 text, which the HTTP API needs")
	}
	if lang == "" {
		if lang, err = remoteLanguage(ctx, c, f.code); err != nil {
			return remoteFailure(ctx, f.server, err)
		}
	}
	req, err := f.request(lang, source)
	if err != nil {
		return fatalf(exitUsage, "%v", err)
	}
	switch f.input {
	case "":
	case "-":
		data, err := io.ReadAll(os.Stdin)
		if err != nil {
			return fatalf(exitUsage, "--input -: %v", err)
		}
		if !utf8.Valid(data) {
			return fatalf(exitUsage, "--input -: standard input is not UTF-8 text, which the HTTP API needs (send binary data with --file)")
		}
		req.InputData = string(data)
	default:
		req.InputData = f.input
	}
	if f.interactive {
		stop()
		return executeInteractive(c, f, req)
	}

	var res *executor.Result
	if f.common.format == "text" {
		// Text mode streams live, as a local run does.
		res, err = c.ExecuteStream(ctx, req, printEvent)
	} else {
		res, err = c.Execute(ctx, req)
	}
	if res == nil {
		return remoteFailure(ctx, f.server, err)
	}
	// A result comes with an error only for a sandbox set-up failure
	// (500, status error_setup): that is reported like a local one.
	return finish(f, res, nil)
}

// printEvent prints a streamed chunk where a local run would: the
// program's stdout on stdout, its stderr and the compiler's output on
// stderr.
func printEvent(ev api.Event) {
	out := con.Stderr()
	if ev.Type == "stdout" {
		out = con.Stdout()
	}
	out.Write(ev.Bytes())
}

// remoteLanguage tells the language of file from its extension, asking
// the server when the built-in table does not know it.
func remoteLanguage(ctx context.Context, c *client.Client, file string) (string, error) {
	ext := strings.ToLower(strings.TrimPrefix(filepath.Ext(file), "."))
	if l, ok := extensionLanguages[ext]; ok {
		return l, nil
	}
	langs, err := c.Languages(ctx)
	if err != nil {
		return "", err
	}
	var names []string
	for _, l := range langs {
		names = append(names, l.Name)
		for _, e := range l.Extensions {
			if ext != "" && strings.ToLower(strings.TrimPrefix(e, ".")) == ext {
				return l.Name, nil
			}
		}
	}
	sort.Strings(names)
	return "", usageError(fmt.Sprintf("cannot tell the language of %s from its extension; pass --language (known: %s)", file, strings.Join(names, ", ")))
}

type usageError string

func (e usageError) Error() string { return string(e) }

// remoteFailure reports a run that gave no result, with the exit code:
// 2 for requests the server refused (400, 401, 403, ...), 125 when the
// server is busy, failing or cannot be reached.
func remoteFailure(ctx context.Context, server string, err error) int {
	var ue usageError
	var ae *client.Error
	switch {
	case errors.As(err, &ue):
		return fatalf(exitUsage, "%v", err)
	case errors.As(err, &ae):
		switch {
		case ae.StatusCode == http.StatusTooManyRequests || ae.StatusCode == http.StatusServiceUnavailable:
			msg := fmt.Sprintf("server busy (%d): %s", ae.StatusCode, ae.Message)
			if ae.RetryAfter > 0 {
				msg += fmt.Sprintf("; retry after %s", ae.RetryAfter)
			}
			return fatalf(exitSetup, "%s", msg)
		case ae.StatusCode == http.StatusUnauthorized:
			return fatalf(exitUsage, "%s (give the key with --api-key or SANDBOX_RUN_API_KEY)", ae.Message)
		case ae.StatusCode/100 == 4:
			return fatalf(exitUsage, "%s", ae.Message)
		default:
			return fatalf(exitSetup, "server error (%d): %s", ae.StatusCode, ae.Message)
		}
	case ctx.Err() != nil:
		return fatalf(exitInterrupted, "interrupted: the server stops the run")
	default:
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fatalf(exitSetup, "cannot reach server %s: %v", server, err)
	}
}
