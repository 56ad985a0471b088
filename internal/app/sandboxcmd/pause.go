package sandboxcmd

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/app/cli"
	"github.com/sandbox-run/sandbox-run/pkg/client"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

const pauseUsage = `Usage: sandbox-run sandbox pause [--evict] ID...

Pauses live sandboxes: their processes are frozen where they are (memory,
files and connections kept, no CPU used) and their timeouts stop, until
'sandbox resume' or any command on them (exec, shell, cp) resumes them. A
sandbox paused already is left so. With --evict they are also written to
disk and their memory given back: under gVisor their processes come back
where they were, otherwise only their files do (their processes end).

Flags:
`

func (m *cmd) pause(args []string) int {
	fs := m.flags("pause", pauseUsage, false)
	evict := fs.Bool("evict", false, "also write them to disk, their memory given back")
	ids, ok, code := cli.ParseWords(fs, args)
	if !ok {
		return code
	}
	return m.eachID("pause", "pause", ids, func(id string) error {
		if *evict {
			_, err := m.c.EvictSandbox(m.ctx, id)
			return err
		}
		_, err := m.c.PauseSandbox(m.ctx, id)
		var ae *client.Error
		if errors.As(err, &ae) && ae.StatusCode == http.StatusConflict {
			fmt.Fprintf(os.Stderr, "sandbox-run: sandbox %s is paused already\n", id)
			return nil
		}
		return err
	})
}

const resumeUsage = `Usage: sandbox-run sandbox resume [--timeout S] ID...

Resumes paused live sandboxes: their processes go on where they were. Each
one's timeout starts again: --timeout seconds from now, or what was left of
it when it was paused. A sandbox that runs is left running (with --timeout,
its timeout is set so).

Flags:
`

func (m *cmd) resume(args []string) int {
	fs := m.flags("resume", resumeUsage, false)
	secs := fs.Float64("timeout", 0, "their life in `seconds` from now (default: what was left of it)")
	ids, ok, code := cli.ParseWords(fs, args)
	if !ok {
		return code
	}
	if *secs < 0 {
		return m.fatalf(exitUsage, "--timeout must be positive")
	}
	return m.eachID("resume", "resume", ids, func(id string) error {
		_, err := m.c.ResumeSandbox(m.ctx, id, time.Duration(*secs*float64(time.Second)))
		return err
	})
}

const networkUsage = `Usage: sandbox-run sandbox network ID [--allow HOST[:PORT]]... [--budget ENTRY=BYTES]... [--output-format text|json]

Changes what live sandbox ID's network may reach, at once and while it
runs: what --allow lists (within the server's network.allow), or nothing at
all without --allow. Its open connections the new list leaves out are
reset. --budget bounds the bytes it may move with what an --allow entry
allows (as 'sandbox create --budget'); an entry that keeps a budget keeps
what it has moved, and one without --budget has no bound. Only a sandbox
created with a network ('sandbox create --allow') can be changed. Prints
what it reaches now, with each budget (with --output-format json, the
sandbox).

Flags:
`

func (m *cmd) network(args []string) int {
	fs := m.flags("network", networkUsage, true)
	var allow cli.List
	fs.Var(&allow, "allow", "let it reach `HOST[:PORT]` (a name, *.domain, an IP or CIDR), within the server's network.allow\n(repeatable; none: nothing)")
	budgets := budgetFlag{}
	fs.Var(budgets, "budget", budgetHelp)
	words, ok, code := cli.ParseWords(fs, args)
	if !ok {
		return code
	}
	if len(words) != 1 {
		return m.fatalf(exitUsage, "sandbox network wants one sandbox's ID")
	}
	if err := budgets.check(allow); err != nil {
		return m.fatalf(exitUsage, "%v", err)
	}
	stop, code := m.connect()
	if stop == nil {
		return code
	}
	defer stop()
	sb, err := m.c.UpdateSandboxNetwork(m.ctx, words[0], wire.NetworkRequest{Allow: allow, Budgets: budgets.request()})
	if err != nil {
		return m.failure(words[0], err)
	}
	if m.common.Format == "json" {
		cli.PrintJSON(sb)
	} else {
		fmt.Printf("%s reaches %s\n", sb.ID, reaches(sb))
	}
	return 0
}

const snapshotUsage = `Usage: sandbox-run sandbox snapshot [--name N] [--output-format text|json] ID

Keeps sandbox ID's files (its home and /tmp) as a snapshot and prints its
id: 'sandbox create --snapshot SNAP' starts a sandbox with them. The
sandbox is frozen while they are copied, then goes on. 'sandbox snapshot
--list' lists this key's snapshots; 'sandbox snapshot --delete SNAP...'
deletes them.

Flags:
`

func (m *cmd) snapshot(args []string) int {
	fs := m.flags("snapshot", snapshotUsage, true)
	name := fs.String("name", "", "a `name` for it, besides its id")
	list := fs.Bool("list", false, "list this key's snapshots (of ID only, when given)")
	del := fs.Bool("delete", false, "delete the snapshots named")
	words, ok, code := cli.ParseWords(fs, args)
	if !ok {
		return code
	}
	switch {
	case *list && len(words) > 1, !*list && !*del && len(words) != 1, *del && len(words) == 0:
		return m.fatalf(exitUsage, "sandbox snapshot wants a sandbox's ID (--list: at most one; --delete: the snapshots' ids)")
	}
	stop, code := m.connect()
	if stop == nil {
		return code
	}
	defer stop()
	switch {
	case *list:
		id := ""
		if len(words) == 1 {
			id = words[0]
		}
		all, err := m.c.ListSnapshots(m.ctx, id)
		if err != nil {
			return m.failure("", err)
		}
		if m.common.Format == "json" {
			cli.PrintJSON(all)
			return 0
		}
		for _, sn := range all {
			fmt.Printf("%s\t%s\t%d bytes\t%s\n", sn.ID, sn.SandboxID, sn.SizeBytes, strings.Join(sn.Names[1:], ","))
		}
		return 0
	case *del:
		code = 0
		for _, id := range words {
			if err := m.c.DeleteSnapshot(m.ctx, id); err != nil {
				code = max(code, m.failure("", err))
			}
		}
		return code
	}
	sn, err := m.c.SnapshotSandbox(m.ctx, words[0], *name)
	if err != nil {
		return m.failure(words[0], err)
	}
	if m.common.Format == "json" {
		cli.PrintJSON(sn)
	} else {
		fmt.Println(sn.ID)
	}
	return 0
}

const forkUsage = `Usage: sandbox-run sandbox fork [-n N] [--timeout S] [--output-format text|json] ID

Makes N sandboxes (1 to 100, default 1) with sandbox ID's files, each a
sandbox of its own made as ID was, and prints their ids, one a line. The
files are copied once, while ID is frozen; processes are not carried.

Flags:
`

func (m *cmd) fork(args []string) int {
	fs := m.flags("fork", forkUsage, true)
	n := fs.Int("n", 1, "how many `children`")
	secs := fs.Float64("timeout", 0, "each child's life in `seconds` (default: the server's)")
	words, ok, code := cli.ParseWords(fs, args)
	if !ok {
		return code
	}
	if len(words) != 1 {
		return m.fatalf(exitUsage, "sandbox fork wants one sandbox's ID")
	}
	if *n < 1 || *n > 100 || *secs < 0 {
		return m.fatalf(exitUsage, "-n is 1 to 100 and --timeout positive")
	}
	stop, code := m.connect()
	if stop == nil {
		return code
	}
	defer stop()
	res, err := m.c.ForkSandbox(m.ctx, words[0], *n, time.Duration(*secs*float64(time.Second)))
	if err != nil {
		return m.failure(words[0], err)
	}
	if m.common.Format == "json" {
		cli.PrintJSON(res)
		return 0
	}
	code = 0
	for _, ch := range res.Children {
		if ch.Sandbox == nil {
			fmt.Fprintf(os.Stderr, "sandbox-run: a child: %s\n", ch.Error)
			code = exitFailed
			continue
		}
		fmt.Println(ch.Sandbox.ID)
	}
	return code
}
