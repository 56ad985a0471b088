// Package cli holds what sandbox-run's commands share on the command line:
// flag parsing that names a wrong flag and suggests the one meant, help
// that lists each flag once with its shorthand, repeatable flags, and a
// console on which the program's output and the command's own messages
// share a terminal.
package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// Parse parses args; when it returns false the command ends with code.
// -h prints the command's help on stdout. A wrong flag gets one line that
// names it (with the closest flag when one is near: "unknown flag
// --session_id; did you mean --session-id?") and the command's usage line,
// not the whole list.
func Parse(fs *flag.FlagSet, args []string) (ok bool, code int) {
	fs.SetOutput(io.Discard) // the flag package's own message and list
	err := fs.Parse(args)
	if err == nil {
		fs.SetOutput(os.Stderr)
		return true, 0
	}
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(os.Stdout)
		fs.Usage()
		return false, 0
	}
	fs.SetOutput(os.Stderr)
	fmt.Fprintf(os.Stderr, "%s: %s\n%s", Prog, flagError(fs, err), UsageHint(fs))
	return false, ExitUsage
}

var (
	undefinedFlag = regexp.MustCompile(`^flag provided but not defined: -+(.*)$`)
	needsValue    = regexp.MustCompile(`^flag needs an argument: -+(.*)$`)
	flagInMessage = regexp.MustCompile(`for (?:flag )?-+([A-Za-z0-9_.-]+)`)
)

// flagError rewrites one of the flag package's errors for a person: flags
// with their double dash, and a suggestion for an unknown one.
func flagError(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if m := undefinedFlag.FindStringSubmatch(msg); m != nil {
		name, _, _ := strings.Cut(m[1], "=")
		s := "unknown flag " + dashed(name)
		if near := closestFlag(fs, name); near != "" {
			s += "; did you mean " + dashed(near) + "?"
		}
		return s
	}
	if m := needsValue.FindStringSubmatch(msg); m != nil {
		return dashed(m[1]) + " needs a value"
	}
	return flagInMessage.ReplaceAllStringFunc(msg, func(s string) string {
		return "for " + dashed(flagInMessage.FindStringSubmatch(s)[1])
	})
}

// UsageHint is the command's usage line (the first line of its help) and
// where to find the rest.
func UsageHint(fs *flag.FlagSet) string {
	var buf bytes.Buffer
	if fs.Usage != nil {
		out := fs.Output()
		fs.SetOutput(&buf)
		fs.Usage()
		fs.SetOutput(out)
	}
	line, _, _ := strings.Cut(buf.String(), "\n")
	if !strings.HasPrefix(line, "Usage: ") {
		line = "Usage: " + Prog + " " + fs.Name() + " [flags]"
	}
	return fmt.Sprintf("%s\n(%s %s -h lists every flag)\n", line, Prog, fs.Name())
}

func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// closestFlag is the defined flag nearest to name, or "" when none is near
// enough to be what was meant: the same but for case and '_' for '-', one
// containing the other ("format" → "output-format"), or a few edits away.
func closestFlag(fs *flag.FlagSet, name string) string {
	norm := func(s string) string { return strings.ReplaceAll(strings.ToLower(s), "_", "-") }
	n := norm(name)
	best, bestScore := "", 1<<30
	fs.VisitAll(func(f *flag.Flag) {
		if len(f.Name) == 1 {
			return // the long form is the one to suggest
		}
		c := norm(f.Name)
		score := editDistance(n, c)
		if score > max(2, len(n)/3) {
			score = 1 << 30
		}
		if len(n) >= 3 && (strings.Contains(c, n) || strings.Contains(n, c)) {
			score = min(score, 2+abs(len(c)-len(n)))
		}
		if score < bestScore {
			best, bestScore = f.Name, score
		}
	})
	if bestScore == 1<<30 {
		return ""
	}
	return best
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// editDistance is Levenshtein's distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// PrintFlags lists fs's flags as --name (with its shorthand: "-l,
// --language"), each default once: a flag whose text gives its default
// ("(default 64)") does not get the flag package's as well.
func PrintFlags(w io.Writer, fs *flag.FlagSet) {
	short := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) {
		if long, ok := strings.CutPrefix(f.Usage, "shorthand for --"); ok {
			short[long] = f.Name
		}
	})
	fs.VisitAll(func(f *flag.Flag) {
		if strings.HasPrefix(f.Usage, "shorthand for --") {
			return
		}
		names := dashed(f.Name)
		if s, ok := short[f.Name]; ok {
			names = "-" + s + ", " + names
		}
		typ, usage := flag.UnquoteUsage(f)
		if typ != "" {
			names += " " + typ
		}
		if !strings.Contains(usage, "(default") && !zeroDefault(f.DefValue) {
			if typ == "string" {
				usage += fmt.Sprintf(" (default %q)", f.DefValue)
			} else {
				usage += fmt.Sprintf(" (default %s)", f.DefValue)
			}
		}
		fmt.Fprintf(w, "  %s\n    \t%s\n", names, strings.ReplaceAll(usage, "\n", "\n    \t"))
	})
}

func zeroDefault(v string) bool {
	switch v {
	case "", "0", "0s", "false", "[]":
		return true
	}
	return false
}

// Prog is the command's name in messages.
var Prog = "sandbox-run"

// Exit codes the commands share: a wrong command line; a sandbox or
// server that could not be set up or reached; a command interrupted
// (SIGINT, as a shell reports it).
const (
	ExitUsage       = 2
	ExitSetup       = 125
	ExitInterrupted = 130
)

// List collects a repeatable flag.
type List []string

func (l *List) String() string     { return strings.Join(*l, ",") }
func (l *List) Set(v string) error { *l = append(*l, v); return nil }

// ParseWords parses a command whose flags may come before, between or
// after its words (`sessions rm ID --all`), and returns the words; when
// ok is false the command ends with code (as Parse).
func ParseWords(fs *flag.FlagSet, args []string) (words []string, ok bool, code int) {
	for {
		if ok, code := Parse(fs, args); !ok {
			return nil, false, code
		}
		if fs.NArg() == 0 {
			return words, true, 0
		}
		words = append(words, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
