// Command sandbox-run-bench holds the project's measuring tools, kept out
// of the product binary: `sandbox-run-bench bench` measures sandbox
// overhead against plain fork/exec (the library, the HTTP API, the suite
// of comparisons in docs/BENCHMARKS.md), `sandbox-run-bench soak` runs a
// server under mixed benign and hostile load and checks results and leaks.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

const usage = `sandbox-run-bench measures sandbox-run.

Usage:
  sandbox-run-bench bench [--api] [--suite]          measure sandbox overhead against plain fork/exec
  sandbox-run-bench soak [-duration 3m] [-url URL]   run a server under mixed load, check results and leaks

Run 'sandbox-run-bench COMMAND -h' for a command's flags.
`

func main() {
	sandbox.Init() // a sandbox's PID 1 is this binary; it never returns there
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	args := os.Args[2:]
	var code int
	switch os.Args[1] {
	case "bench":
		code = cmdBench(args)
	case "soak":
		code = cmdSoak(args)
	case "help", "-h", "--help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "sandbox-run-bench: unknown command %q\n\n%s", os.Args[1], usage)
		code = 2
	}
	// The process-wide engine (the library bench) leaves no idle sandbox,
	// cgroup or mount behind.
	sandbox.CloseDefault()
	os.Exit(code)
}

// exitUsage is the exit code of a bad command line.
const exitUsage = 2

func fatalf(code int, format string, a ...any) int {
	fmt.Fprintf(os.Stderr, "sandbox-run-bench: "+format+"\n", a...)
	return code
}

// exitSetup is the exit code when what is measured could not be set up.
const exitSetup = 125

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// printJSON writes v to stdout as indented JSON.
func printJSON(v any) {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// productBinary is the sandbox-run binary to start as a server:
// $SANDBOX_RUN_BIN, else sandbox-run beside this binary, else on $PATH.
func productBinary() (string, error) {
	if p := os.Getenv("SANDBOX_RUN_BIN"); p != "" {
		return p, nil
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "sandbox-run")
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	p, err := exec.LookPath("sandbox-run")
	if err != nil {
		return "", fmt.Errorf("no sandbox-run binary beside this one or on $PATH (build it with go build -o bin/sandbox-run ./cmd/sandbox-run, or set SANDBOX_RUN_BIN)")
	}
	return p, nil
}
