package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/app/cli"
	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/executor"
)

const sessionsUsage = `Usage: sandbox-run sessions ls | rm ID... | rm --all [--data-dir DIR] [--output-format text|json]

Lists or removes the sessions kept under the data dir: those of
'sandbox-run execute --session-id ID' (and of a server using the same data
dir). ls shows each session's id, files, size and when it was last used;
rm removes the named sessions' files (--all: every session).

Flags:
`

// sessionInfo is one session of `sandbox-run sessions ls`.
type sessionInfo struct {
	ID       string    `json:"id"`
	Files    int       `json:"files"`
	Bytes    int64     `json:"bytes"`
	LastUsed time.Time `json:"last_used"`
}

func cmdSessions(args []string) int {
	fs := flag.NewFlagSet("sessions", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), sessionsUsage)
		cli.PrintFlags(fs.Output(), fs)
	}
	flags := config.NewFlags(fs, "data-dir")
	var format string
	fs.StringVar(&format, "output-format", "text", "output format: text or json")
	fs.StringVar(&format, "o", "text", "shorthand for --output-format")
	all := fs.Bool("all", false, "rm: remove every session")
	words, ok, code := cli.ParseWords(fs, args)
	if !ok {
		return code
	}
	if format != "text" && format != "json" {
		return fatalf(exitUsage, "--output-format must be text or json, not %q", format)
	}
	if len(words) == 0 {
		con.Message("sandbox-run: sessions wants ls or rm\n" + cli.UsageHint(fs))
		return exitUsage
	}
	cfg, err := flags.Load(os.Getenv)
	if err != nil {
		return fatalf(exitUsage, "config: %v", err)
	}
	dataDir := &cfg.DataDir
	x := executor.SessionManager(*dataDir)
	switch words[0] {
	case "ls", "list":
		if len(words) > 1 || *all {
			return fatalf(exitUsage, "sessions ls takes no arguments")
		}
		return sessionsList(x, format == "json")
	case "rm", "remove", "delete":
		ids := words[1:]
		switch {
		case *all && len(ids) > 0:
			return fatalf(exitUsage, "sessions rm: give session ids or --all, not both")
		case *all:
			var err error
			if ids, err = x.SessionIDs(); err != nil {
				return fatalf(1, "%v", err)
			}
		case len(ids) == 0:
			return fatalf(exitUsage, "sessions rm wants the ids of the sessions to remove (or --all; sandbox-run sessions ls lists them)")
		}
		return sessionsRemove(x, *dataDir, ids, format == "json")
	}
	con.Message(fmt.Sprintf("sandbox-run: unknown sessions command %q: use ls or rm\n", words[0]) + cli.UsageHint(fs))
	return exitUsage
}

func sessionsList(x *executor.Executor, asJSON bool) int {
	ids, err := x.SessionIDs()
	if err != nil {
		return fatalf(1, "%v", err)
	}
	infos := []sessionInfo{}
	for _, id := range ids {
		files, total, err := x.SessionFiles(id)
		if err != nil {
			return fatalf(1, "session %s: %v", id, err)
		}
		used, err := x.SessionLastUsed(id)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed meanwhile
		}
		infos = append(infos, sessionInfo{ID: id, Files: len(files), Bytes: total, LastUsed: used})
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].LastUsed.After(infos[j].LastUsed) })
	if asJSON {
		cli.PrintJSON(infos)
		return 0
	}
	if len(infos) == 0 {
		fmt.Println("no sessions")
		return 0
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tFILES\tSIZE\tLAST USED")
	for _, s := range infos {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s (%s ago)\n", s.ID, s.Files, cli.Size(s.Bytes), s.LastUsed.Format("2006-01-02 15:04:05"), time.Since(s.LastUsed).Round(time.Second))
	}
	tw.Flush()
	return 0
}

// sessionRemoval is what `sessions rm --output-format json` prints.
type sessionRemoval struct {
	Removed []string          `json:"removed"`
	Errors  map[string]string `json:"errors,omitempty"`
}

func sessionsRemove(x *executor.Executor, dataDir string, ids []string, asJSON bool) int {
	out := sessionRemoval{Removed: []string{}}
	code := 0
	for _, id := range ids {
		err := x.DeleteSession(id)
		var invalid *executor.InvalidRequestError
		switch {
		case err == nil:
			out.Removed = append(out.Removed, id)
			continue
		case errors.Is(err, executor.ErrNoSession):
			err = fmt.Errorf("no session %s under %s", id, dataDir)
			code = max(code, 1)
		case errors.As(err, &invalid):
			code = exitUsage
		default:
			code = max(code, 1)
		}
		if out.Errors == nil {
			out.Errors = map[string]string{}
		}
		out.Errors[id] = err.Error()
		if !asJSON {
			con.Printf("sandbox-run: %v\n", err)
		}
	}
	if asJSON {
		cli.PrintJSON(out)
	} else {
		for _, id := range out.Removed {
			fmt.Println("removed", id)
		}
	}
	return code
}
