// Package sandboxcmd is the command `sandbox-run sandbox`: live sandboxes
// on a sandbox-run server (pkg/client, /api/sandbox/sandboxes), from the
// command line. create makes one and prints its id; ls lists them; exec
// runs a command in one with its output streamed and its exit code
// passed on; shell opens an interactive shell on a terminal in it; cp
// copies a file in or out; kill ends it; pause freezes it and resume
// lets it go on; network changes what it may reach while it runs.
package sandboxcmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/app/cli"
	"github.com/sandbox-run/sandbox-run/pkg/client"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// Exit codes besides a process's own.
const (
	exitFailed      = 1 // no such sandbox or file; a local file that cannot be read or written
	exitUsage       = cli.ExitUsage
	exitTimeout     = 124 // exec --timeout passed
	exitSetup       = cli.ExitSetup
	exitInterrupted = cli.ExitInterrupted
)

// defaultServer is the server without --server or SANDBOX_RUN_SERVER.
const defaultServer = cli.DefaultServer

const usage = `Usage: sandbox-run sandbox COMMAND [flags] [ARGS...]

Live sandboxes on a sandbox-run server: sandboxes that stay up between
commands, with their files and processes, until they are killed or their
timeout passes (the server's live.default_timeout_seconds unless --timeout
says otherwise: 300 by default). Paths in a sandbox are relative to its home,
/work, unless absolute.

Commands:
  create [--language L]... [--timeout S] [--memory-mb N] [--env K=V]...
         [--snapshot SNAP] [--template T] [--isolation native|gvisor]
         [--allow HOST[:PORT]]... [--budget ENTRY=BYTES]... [--secret NAME]...
                 create a sandbox (with a snapshot's files) and print its id
  ls             list this key's sandboxes: id, languages, when each ends
  exec ID [--cwd D] [--env K=V]... [--timeout S] [-i] -- CMD [ARGS...]
                 run CMD in sandbox ID, its output streamed as it comes;
                 exit with CMD's exit code
  shell ID       an interactive shell (bash) in sandbox ID on a terminal
  cp SRC DST     copy a file into or out of a sandbox: one side is ID:PATH,
                 the other a local file, or - for stdin or stdout
  kill ID...     end sandboxes and everything in them
  pause ID...    freeze sandboxes where they are, their timeouts stopped
  resume [--timeout S] ID...
                 let paused sandboxes go on (any command on one does too)
  snapshot [--name N] ID
                 keep sandbox ID's files; print the snapshot's id (--list,
                 --delete SNAP... for the key's snapshots)
  fork [-n N] [--timeout S] ID
                 make N sandboxes with ID's files (under gvisor, with its
                 running processes too); print their ids
  network ID [--allow HOST[:PORT]]... [--budget ENTRY=BYTES]...
                 change what sandbox ID (created with --allow) may reach,
                 and how many bytes, while it runs; no --allow: nothing

Run 'sandbox-run sandbox COMMAND -h' for a command's flags. Every command
takes --server URL (default $SANDBOX_RUN_SERVER, else ` + defaultServer + `)
and --api-key KEY (default $SANDBOX_RUN_API_KEY); create, ls, exec, cp and
network take --output-format json.

Exit codes: 0 done (exec and shell: the process's own code, 128+N when signal
N ended it), 1 no such sandbox or file (or another failure), 2 usage error or
a request the server refused, 124 exec's --timeout passed, 125 the server
could not be reached or is busy, 130 interrupted.
`

// topHint is what a wrong command line gets after its message.
const topHint = "Usage: sandbox-run sandbox COMMAND [flags] [ARGS...]\n(sandbox-run sandbox -h lists the commands)\n"

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

// Run is `sandbox-run sandbox ARGS`; con is the command's console. It
// returns the exit code.
func Run(args []string, con *cli.Console) int {
	m := &cmd{con: con, common: cli.NewRemote()}
	// The flags before the subcommand's name: the common ones.
	top := flag.NewFlagSet("sandbox", flag.ContinueOnError)
	top.Usage = func() {
		fmt.Fprint(top.Output(), usage)
	}
	m.common.Add(top, true)
	if ok, code := cli.Parse(top, args); !ok {
		return code
	}
	if top.NArg() == 0 {
		con.Message("sandbox-run: sandbox wants a command: create, ls, exec, shell, cp or kill\n" + topHint)
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
	sub, ok := subcommands[name]
	if !ok {
		for _, s := range subcommands {
			if slices.Contains(s.aliases, name) {
				sub, ok = s, true
			}
		}
	}
	if !ok {
		con.Message(fmt.Sprintf("sandbox-run: unknown sandbox command %q: use create, ls, exec, shell, cp or kill\n", name) + topHint)
		return exitUsage
	}
	return sub.run(m, rest)
}

// subcommand is one of sandbox's commands.
type subcommand struct {
	aliases []string
	run     func(m *cmd, args []string) int
}

var subcommands map[string]subcommand

func init() {
	subcommands = map[string]subcommand{
		"create":   {aliases: []string{"new"}, run: (*cmd).create},
		"ls":       {aliases: []string{"list"}, run: (*cmd).list},
		"exec":     {aliases: []string{"run"}, run: (*cmd).exec},
		"shell":    {aliases: []string{"sh", "pty"}, run: (*cmd).shell},
		"cp":       {aliases: []string{"copy"}, run: (*cmd).copy},
		"kill":     {aliases: []string{"rm"}, run: (*cmd).kill},
		"pause":    {run: (*cmd).pause},
		"resume":   {run: (*cmd).resume},
		"snapshot": {run: (*cmd).snapshot},
		"fork":     {run: (*cmd).fork},
		"network":  {aliases: []string{"net"}, run: (*cmd).network},
	}
}

// flags is a subcommand's flag set: its usage text, then its flags and
// the common ones.
func (m *cmd) flags(name, text string, json bool) *flag.FlagSet {
	fs := flag.NewFlagSet("sandbox "+name, flag.ContinueOnError)
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

// failure reports a call that failed and returns the exit code: 1 for a
// sandbox that does not exist (id), 2 for a request the server refused,
// 125 when the server is busy, failing or cannot be reached, 130 when
// interrupted.
func (m *cmd) failure(id string, err error) int {
	var ae *client.Error
	switch {
	case errors.As(err, &ae):
		switch {
		case ae.StatusCode == http.StatusNotFound && id != "":
			return m.fatalf(exitFailed, "no such sandbox %s", id)
		case ae.StatusCode == http.StatusTooManyRequests || ae.StatusCode == http.StatusServiceUnavailable:
			msg := fmt.Sprintf("server busy (%d): %s", ae.StatusCode, ae.Message)
			if ae.RetryAfter > 0 {
				msg += fmt.Sprintf("; retry after %s", ae.RetryAfter)
			}
			return m.fatalf(exitSetup, "%s", msg)
		case ae.StatusCode == http.StatusUnauthorized:
			return m.fatalf(exitUsage, "%s (give the key with --api-key or SANDBOX_RUN_API_KEY)", ae.Message)
		case ae.StatusCode == http.StatusNotFound:
			return m.fatalf(exitFailed, "%s", ae.Message)
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

// budgetHelp is the help of --budget.
const budgetHelp = "with `ENTRY=BYTES`, what the --allow entry ENTRY (as written there) allows may move BYTES (a whole\nnumber), both ways over all its connections; past them they are reset, new ones refused (repeatable)"

// budgetFlag collects --budget ENTRY=BYTES flags: the bytes a sandbox's
// network may move with what one entry of --allow allows.
type budgetFlag map[string]int64

func (b budgetFlag) String() string { return "" }
func (b budgetFlag) Set(v string) error {
	i := strings.LastIndex(v, "=")
	if i <= 0 {
		return errors.New("want ENTRY=BYTES: an --allow entry and a number of bytes")
	}
	n, err := strconv.ParseInt(v[i+1:], 10, 64)
	if err != nil || n <= 0 {
		return errors.New("want ENTRY=BYTES with BYTES a whole number of bytes above 0 (no unit)")
	}
	b[v[:i]] = n
	return nil
}

// check says what is wrong with the budgets for the entries of allow: a
// budget needs --allow, and bounds one of its entries.
func (b budgetFlag) check(allow []string) error {
	for _, entry := range slices.Sorted(maps.Keys(b)) {
		switch {
		case len(allow) == 0:
			return fmt.Errorf("--budget needs --allow: it bounds what an --allow entry allows")
		case !slices.Contains(allow, entry):
			return fmt.Errorf("--budget %s: not an --allow entry (%s)", entry, strings.Join(allow, " "))
		}
	}
	return nil
}

// request is the budgets as wire.NetworkRequest.Budgets (nil: none).
func (b budgetFlag) request() map[string]int64 {
	if len(b) == 0 {
		return nil
	}
	return maps.Clone(b)
}

// reaches is what a sandbox's network reaches, as the network command
// prints it: its entries, each with its budget when it has one.
func reaches(sb *wire.Sandbox) string {
	if len(sb.Network) == 0 {
		return "nothing"
	}
	parts := make([]string, len(sb.Network))
	for i, entry := range sb.Network {
		parts[i] = entry
		if n, ok := sb.NetworkBudgets[entry]; ok {
			parts[i] += fmt.Sprintf(" (budget %d bytes)", n)
		}
	}
	return strings.Join(parts, " ")
}

// envFlag collects --env K=V flags.
type envFlag map[string]string

func (e envFlag) String() string { return "" }
func (e envFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("want K=V, got %q", v)
	}
	e[k] = val
	return nil
}

const createUsage = `Usage: sandbox-run sandbox create [--language L]... [--timeout S] [--memory-mb N] [--env K=V]...
       [--snapshot SNAP] [--template T] [--isolation native|gvisor]
       [--allow HOST[:PORT]]... [--budget ENTRY=BYTES]... [--secret NAME]...

Creates a live sandbox and prints its id (with --output-format json, the
sandbox: id, languages, end_at, isolation, access_token, ...). It has the
toolchains of its languages (default: python, javascript and bash) and lives
--timeout seconds (default: the server's, usually 300) unless killed first.
Under gvisor (the default of the code-interpreter-v1 template where the
server has runsc) its forks carry its running processes.

It has no network unless --allow lists what it may reach (within the
server's network.allow; 'sandbox network' changes that while it runs).
--budget ENTRY=BYTES bounds the bytes (both ways, over all its connections)
it may move with what the --allow entry ENTRY, as written there, allows;
past it, those connections are reset and new ones refused.
--secret names a secret of the key's (sandbox-run secrets) that its
processes use without seeing it: each finds a placeholder in $NAME, which
the server replaces with the value in HTTP(S) requests to the secret's
hosts (--allow must reach them).

Flags:
`

func (m *cmd) create(args []string) int {
	fs := m.flags("create", createUsage, true)
	var langs cli.List
	env := envFlag{}
	var req wire.SandboxRequest
	fs.Var(&langs, "language", "a `language` whose toolchain it has (repeatable, or comma-separated; default python,\njavascript and bash)")
	fs.Var(&langs, "l", "shorthand for --language")
	fs.Float64Var(&req.TimeoutSeconds, "timeout", 0, "its life in `seconds` from now (default: the server's live.default_timeout_seconds)")
	fs.Int64Var(&req.MemoryMB, "memory-mb", 0, "the memory of all its processes together, in `MiB` (default: the server's)")
	fs.Var(env, "env", "an environment variable `K=V` of every process in it (repeatable)")
	fs.StringVar(&req.Snapshot, "snapshot", "", "a `snapshot` whose files it starts with (sandbox snapshot), made as its sandbox was")
	fs.StringVar(&req.Template, "template", "", "what to make it from when no --language is given: base, code-interpreter-v1, a language's\n`name`, or names joined with +")
	fs.StringVar(&req.Isolation, "isolation", "", "its wall: native, or gvisor (its forks carry its running processes); default: gvisor\nfor code-interpreter-v1 where the server has it, else native")
	var allow, secrets cli.List
	fs.Var(&allow, "allow", "let it reach `HOST[:PORT]` (a name, *.domain, an IP or CIDR; host.sandbox.internal:PORT is the\nserver's loopback), within the server's network.allow (repeatable; default: no network)")
	fs.Var(&secrets, "secret", "a secret `NAME` its processes use unseen: $NAME holds a placeholder the server replaces with\nits value in requests to its hosts (repeatable; needs --allow; see sandbox-run secrets -h)")
	budgets := budgetFlag{}
	fs.Var(budgets, "budget", budgetHelp)
	words, ok, code := cli.ParseWords(fs, args)
	if !ok {
		return code
	}
	if len(words) > 0 {
		return m.fatalf(exitUsage, "sandbox create takes no arguments, got %q", words)
	}
	if req.TimeoutSeconds < 0 || req.MemoryMB < 0 {
		return m.fatalf(exitUsage, "--timeout and --memory-mb must be positive")
	}
	for _, l := range langs {
		for _, name := range strings.Split(l, ",") {
			if name = strings.TrimSpace(name); name != "" {
				req.Languages = append(req.Languages, name)
			}
		}
	}
	if len(env) > 0 {
		req.Env = env
	}
	if err := budgets.check(allow); err != nil {
		return m.fatalf(exitUsage, "%v", err)
	}
	if len(allow) > 0 {
		req.Network = &wire.NetworkRequest{Allow: allow, Budgets: budgets.request()}
	}
	if len(secrets) > 0 {
		req.Secrets = secrets
	}
	stop, code := m.connect()
	if stop == nil {
		return code
	}
	defer stop()
	sb, err := m.c.CreateSandbox(m.ctx, req)
	if err != nil {
		return m.failure("", err)
	}
	if m.common.Format == "json" {
		cli.PrintJSON(sb)
	} else {
		fmt.Println(sb.ID)
	}
	return 0
}

const listUsage = `Usage: sandbox-run sandbox ls [--output-format text|json]

Lists this key's live sandboxes: their ids, languages and when each ends
(with --output-format json, the sandboxes as the API gives them).

Flags:
`

func (m *cmd) list(args []string) int {
	fs := m.flags("ls", listUsage, true)
	words, ok, code := cli.ParseWords(fs, args)
	if !ok {
		return code
	}
	if len(words) > 0 {
		return m.fatalf(exitUsage, "sandbox ls takes no arguments, got %q", words)
	}
	stop, code := m.connect()
	if stop == nil {
		return code
	}
	defer stop()
	all, err := m.c.ListSandboxes(m.ctx)
	if err != nil {
		return m.failure("", err)
	}
	if m.common.Format == "json" {
		cli.PrintJSON(append([]wire.Sandbox{}, all...))
		return 0
	}
	if len(all) == 0 {
		fmt.Println("no sandboxes")
		return 0
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tLANGUAGES\tSTATE\tENDS")
	now := time.Now()
	for _, sb := range all {
		langs := strings.Join(sb.Languages, ",")
		if langs == "" {
			langs = "(default)" // the server's default languages
		}
		state := sb.State
		if sb.Evicted {
			state = "evicted" // paused, on disk
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s (in %s)\n", sb.ID, langs, state, sb.EndAt.Local().Format("2006-01-02 15:04:05"), sb.EndAt.Sub(now).Round(time.Second))
	}
	tw.Flush()
	return 0
}

const killUsage = `Usage: sandbox-run sandbox kill ID...

Ends live sandboxes and everything running in them; their files are gone.

Flags:
`

func (m *cmd) kill(args []string) int {
	fs := m.flags("kill", killUsage, false)
	ids, ok, code := cli.ParseWords(fs, args)
	if !ok {
		return code
	}
	return m.eachID("kill", "end", ids, func(id string) error { return m.c.KillSandbox(m.ctx, id) })
}

// eachID connects and calls do for each id (a subcommand's arguments),
// going on past failures: the exit code is the worst of them.
func (m *cmd) eachID(name, verb string, ids []string, do func(id string) error) int {
	if len(ids) == 0 {
		return m.fatalf(exitUsage, "sandbox %s wants the ids of the sandboxes to %s", name, verb)
	}
	stop, code := m.connect()
	if stop == nil {
		return code
	}
	defer stop()
	code = 0
	for _, id := range ids {
		if err := do(id); err != nil {
			code = max(code, m.failure(id, err))
		}
	}
	return code
}
