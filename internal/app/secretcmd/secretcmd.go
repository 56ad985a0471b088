// Package secretcmd is the command `sandbox-run secrets`: an API key's
// secrets on a sandbox-run server (pkg/client, /api/sandbox/secrets), from
// the command line. put stores one, its value read from standard input or
// a file (never from the command line, where ps shows it); ls lists them
// (never their values); rm deletes them. A run names them with execute
// --secret NAME: its program sees a placeholder, and the server's egress
// puts the value in its HTTP and HTTPS requests to the secret's hosts.
package secretcmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/sandbox-run/sandbox-run/internal/app/cli"
	"github.com/sandbox-run/sandbox-run/pkg/client"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// Exit codes.
const (
	exitFailed      = 1 // no such secret; a --from-file that cannot be read
	exitUsage       = cli.ExitUsage
	exitSetup       = cli.ExitSetup
	exitInterrupted = cli.ExitInterrupted
)

// defaultServer is the server without --server or SANDBOX_RUN_SERVER.
const defaultServer = cli.DefaultServer

const usage = `Usage: sandbox-run secrets COMMAND [flags] [ARGS...]

An API key's secrets on a sandbox-run server: values that sandboxed runs
use without seeing them. A run names them (execute --secret NAME, with
--allow-net listing their hosts): its program finds a placeholder in the
environment variable NAME, and the server's egress puts the value in its
place in the run's HTTP and HTTPS requests to the secret's hosts only.

Commands:
  put NAME --host H [--host H]... [--header NAME [--header-format F]]
           [--from-file PATH]
                 store secret NAME (or replace it), its value read from
                 standard input (one line; a trailing newline is dropped)
  ls             list this key's secrets: name, hosts, header, when updated
                 (never their values)
  rm NAME...     delete secrets

Run 'sandbox-run secrets COMMAND -h' for a command's flags. Every command
takes --server URL (default $SANDBOX_RUN_SERVER, else ` + defaultServer + `)
and --api-key KEY (default $SANDBOX_RUN_API_KEY); put and ls take
--output-format json.

Exit codes: 0 done, 1 no such secret (or a --from-file that cannot be
read), 2 usage error or a request the server refused (its message is
printed), 125 the server could not be reached, is busy or keeps no
secrets, 130 interrupted.
`

// topHint is what a wrong command line gets after its message.
const topHint = "Usage: sandbox-run secrets COMMAND [flags] [ARGS...]\n(sandbox-run secrets -h lists the commands)\n"

// common are the flags of every subcommand.
type common = cli.Remote

// cmd is one run of a subcommand.
type cmd struct {
	con    *cli.Console
	common common
	c      *client.Client
	ctx    context.Context
}

func (m *cmd) fatalf(code int, format string, a ...any) int {
	m.con.Printf("sandbox-run: "+format+"\n", a...)
	return code
}

// Run is `sandbox-run secrets ARGS`; con is the command's console. It
// returns the exit code.
func Run(args []string, con *cli.Console) int {
	m := &cmd{con: con, common: cli.NewRemote()}
	top := flag.NewFlagSet("secrets", flag.ContinueOnError)
	top.Usage = func() { fmt.Fprint(top.Output(), usage) }
	m.common.Add(top, true)
	if ok, code := cli.Parse(top, args); !ok {
		return code
	}
	if top.NArg() == 0 {
		con.Message("sandbox-run: secrets wants a command: put, ls or rm\n" + topHint)
		return exitUsage
	}
	name, rest := top.Arg(0), top.Args()[1:]
	if name == "help" {
		if len(rest) == 0 {
			fmt.Print(usage)
			return 0
		}
		name, rest = rest[0], []string{"-h"}
	}
	for _, s := range subcommands {
		if s.name == name || slices.Contains(s.aliases, name) {
			return s.run(m, rest)
		}
	}
	con.Message(fmt.Sprintf("sandbox-run: unknown secrets command %q: use put, ls or rm\n", name) + topHint)
	return exitUsage
}

// subcommand is one of secrets' commands.
type subcommand struct {
	name    string
	aliases []string
	run     func(m *cmd, args []string) int
}

var subcommands []subcommand

func init() {
	subcommands = []subcommand{
		{name: "put", aliases: []string{"set", "add"}, run: (*cmd).put},
		{name: "ls", aliases: []string{"list"}, run: (*cmd).list},
		{name: "rm", aliases: []string{"delete", "remove", "del"}, run: (*cmd).remove},
	}
}

// flags is a subcommand's flag set: its usage text, then its flags and
// the common ones.
func (m *cmd) flags(name, text string, json bool) *flag.FlagSet {
	fs := flag.NewFlagSet("secrets "+name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), text)
		cli.PrintFlags(fs.Output(), fs)
	}
	m.common.Add(fs, json)
	return fs
}

// connect checks the common flags and makes the client; it returns a
// non-zero exit code when it cannot. The context ends at SIGINT or
// SIGTERM (stop undoes that).
func (m *cmd) connect() (stop func(), code int) {
	c, ctx, stop, err := m.common.Connect()
	if err != nil {
		return nil, m.fatalf(exitUsage, "%v", err)
	}
	m.c, m.ctx = c, ctx
	return stop, 0
}

// failure reports a call about secret name (or none) that failed and
// returns the exit code: 1 for a secret that does not exist, 2 for a
// request the server refused (with its message), 125 when the server is
// busy, failing, keeps no secrets or cannot be reached, 130 when
// interrupted.
func (m *cmd) failure(name string, err error) int {
	var ae *client.Error
	switch {
	case errors.As(err, &ae):
		switch {
		case ae.StatusCode == http.StatusNotFound && name != "":
			return m.fatalf(exitFailed, "no such secret %s", name)
		case ae.StatusCode == http.StatusNotFound:
			return m.fatalf(exitFailed, "%s (does the server at %s serve secrets?)", ae.Message, m.common.Server)
		case ae.StatusCode == http.StatusTooManyRequests || ae.StatusCode == http.StatusServiceUnavailable:
			msg := fmt.Sprintf("server unavailable (%d): %s", ae.StatusCode, ae.Message)
			if ae.RetryAfter > 0 {
				msg += fmt.Sprintf("; retry after %s", ae.RetryAfter)
			}
			return m.fatalf(exitSetup, "%s", msg)
		case ae.StatusCode == http.StatusUnauthorized:
			return m.fatalf(exitUsage, "%s (give the key with --api-key or SANDBOX_RUN_API_KEY)", ae.Message)
		case ae.StatusCode/100 == 4:
			return m.fatalf(exitUsage, "%s", ae.Message)
		default:
			return m.fatalf(exitSetup, "server error (%d): %s", ae.StatusCode, ae.Message)
		}
	case m.ctx != nil && m.ctx.Err() != nil:
		return m.fatalf(exitInterrupted, "interrupted")
	default:
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return m.fatalf(exitSetup, "cannot reach server %s: %v", m.common.Server, err)
	}
}

const putUsage = `Usage: sandbox-run secrets put NAME --host H [--host H]... [--header NAME [--header-format F]] [--from-file PATH]

Stores secret NAME of this key, or replaces it: its value, the hosts it may
be sent to, and optionally a request header it is also sent in. The value
is read from standard input (or --from-file): one value, a trailing newline
dropped; it is never taken from the command line, where ps shows it. On a
terminal it is asked for and not echoed.

  printf %s "$TOKEN" | sandbox-run secrets put TOKEN --host api.example.com
  sandbox-run secrets put GH --host api.github.com --header Authorization \
      --header-format 'Bearer {value}' < gh-token.txt

NAME is an environment variable's name (a letter or _, then letters, digits
or _): a run naming the secret finds its placeholder there. A host is a
name (api.example.com), *.name (any name below it) or an IP address, each
optionally with :PORT; host.sandbox.internal is the server's host. With
--header the egress sets that header on every request to the hosts:
--header-format with {value} in it (default: the value alone). Nothing is
printed (with --output-format json, the secret as listed, without its
value).

Flags:
`

func (m *cmd) put(args []string) int {
	fs := m.flags("put", putUsage, true)
	var hosts cli.List
	var header, format, fromFile string
	fs.Var(&hosts, "host", "a `host` the value may be sent to: NAME, *.NAME or an IP address, optionally with :PORT\n(repeatable, or comma-separated; at least one)")
	fs.StringVar(&header, "header", "", "also send the value in this request header (`NAME`, e.g. Authorization)")
	fs.StringVar(&format, "header-format", "", "the --header's value, with {value} where the secret goes (`FORMAT`, e.g. 'Bearer {value}';\ndefault: the value alone)")
	fs.StringVar(&fromFile, "from-file", "", "read the value from this `file` instead of standard input (- is standard input)")
	words, ok, code := cli.ParseWords(fs, args)
	if !ok {
		return code
	}
	switch {
	case len(words) == 0:
		return m.fatalf(exitUsage, "secrets put wants the secret's NAME (its value comes on standard input)\n%s", strings.TrimSuffix(cli.UsageHint(fs), "\n"))
	case len(words) > 1:
		// The words are not printed: one of them may be the value.
		return m.fatalf(exitUsage, "secrets put takes one NAME, got %d words: the value is read from standard input (or --from-file), never from the command line, where ps shows it", len(words))
	}
	name := words[0]
	var put wire.SecretPut
	for _, h := range hosts {
		for _, h := range strings.Split(h, ",") {
			if h = strings.TrimSpace(h); h != "" {
				put.Hosts = append(put.Hosts, h)
			}
		}
	}
	switch {
	case len(put.Hosts) == 0:
		return m.fatalf(exitUsage, "secrets put %s wants --host: where the value may be sent (e.g. --host api.example.com)", name)
	case format != "" && header == "":
		return m.fatalf(exitUsage, "--header-format needs --header: the header the value is sent in")
	}
	if header != "" {
		put.Header = &wire.SecretHeader{Name: header, Format: format}
	}
	if m.common.Format != "text" && m.common.Format != "json" {
		return m.fatalf(exitUsage, "--output-format must be text or json, not %q", m.common.Format)
	}
	value, code := m.readValue(name, fromFile)
	if code != 0 {
		return code
	}
	put.Value = value
	stop, code := m.connect()
	if stop == nil {
		return code
	}
	defer stop()
	sec, err := m.c.PutSecret(m.ctx, name, put)
	if err != nil {
		// A 404 here is no missing secret: the route is missing.
		return m.failure("", err)
	}
	if m.common.Format == "json" {
		cli.PrintJSON(sec)
	}
	return 0
}

const listUsage = `Usage: sandbox-run secrets ls [--output-format text|json]

Lists this key's secrets: their names, hosts, headers and when each was
last put (with --output-format json, a JSON array of them, each as the
API gives it). Values are never listed.

Flags:
`

func (m *cmd) list(args []string) int {
	fs := m.flags("ls", listUsage, true)
	words, ok, code := cli.ParseWords(fs, args)
	if !ok {
		return code
	}
	if len(words) > 0 {
		return m.fatalf(exitUsage, "secrets ls takes no arguments, got %q", words)
	}
	stop, code := m.connect()
	if stop == nil {
		return code
	}
	defer stop()
	all, err := m.c.ListSecrets(m.ctx)
	if err != nil {
		return m.failure("", err)
	}
	if m.common.Format == "json" {
		cli.PrintJSON(append([]wire.Secret{}, all...))
		return 0
	}
	if len(all) == 0 {
		fmt.Println("no secrets")
		return 0
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tHOSTS\tHEADER\tUPDATED")
	for _, s := range all {
		header := "-"
		if h := s.Header; h != nil {
			header = h.Name + ": " + h.Format
			if h.Format == "" {
				header = h.Name + ": {value}"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Name, strings.Join(s.Hosts, ","), header, s.Updated.Local().Format("2006-01-02 15:04:05"))
	}
	tw.Flush()
	return 0
}

const removeUsage = `Usage: sandbox-run secrets rm NAME...

Deletes secrets of this key. A run that has started keeps the values it
has; runs that name them afterwards are refused.

Flags:
`

func (m *cmd) remove(args []string) int {
	fs := m.flags("rm", removeUsage, false)
	names, ok, code := cli.ParseWords(fs, args)
	if !ok {
		return code
	}
	if len(names) == 0 {
		return m.fatalf(exitUsage, "secrets rm wants the names of the secrets to delete")
	}
	stop, code := m.connect()
	if stop == nil {
		return code
	}
	defer stop()
	code = 0
	for _, name := range names {
		if err := m.c.DeleteSecret(m.ctx, name); err != nil {
			code = max(code, m.failure(name, err))
			if code == exitSetup || code == exitInterrupted {
				break // the others would fare no better
			}
		}
	}
	return code
}
