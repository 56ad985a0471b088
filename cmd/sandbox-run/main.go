// Command sandbox-run runs untrusted code in eight and more languages inside
// a sandbox built from Linux namespaces, cgroups, seccomp and rlimits.
//
//	sandbox-run execute --language python --code script.py --input "hi"
//	sandbox-run languages
//	sandbox-run doctor
//
// Exit codes of execute: the program's own exit code when it ran to its end
// (128+N when a signal N killed it), and otherwise:
//
//	2    usage error: bad flags, unknown language, invalid request
//	121  a limit other than time ended the run (memory, processes, output,
//	     file size, disk) or a forbidden system call killed it
//	122  compile error
//	124  timeout (wall-clock or CPU time)
//	125  the sandbox could not be set up (the program never ran)
package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sandbox-run/sandbox-run/internal/app/cli"
	"github.com/sandbox-run/sandbox-run/internal/app/clusternode"
	"github.com/sandbox-run/sandbox-run/internal/app/imagecmd"
	"github.com/sandbox-run/sandbox-run/internal/app/sandboxcmd"
	"github.com/sandbox-run/sandbox-run/internal/app/secretcmd"
	"github.com/sandbox-run/sandbox-run/pkg/gvisor"
	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// con is where the program's output and the command's messages go.
var con = cli.NewConsole(os.Stdout, os.Stderr)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `sandbox-run runs untrusted code in a sandbox.

Usage:
  sandbox-run execute [flags] [-- program args...]   run code (see execute -h)
  sandbox-run serve [--addr HOST:PORT] [--config F]  serve the HTTP API (see serve -h)
  sandbox-run worker --nats URL --nats-creds F       run sandboxes for a cluster on NATS JetStream
  sandbox-run cluster init|status ...                write a NATS cluster's config and creds; a cluster's health
  sandbox-run mcp [--config F]                       serve MCP (Model Context Protocol) on stdin/stdout for AI agents
  sandbox-run repl -l python|javascript [--server U] a REPL on an interpreter session, local or on a server
  sandbox-run sandbox create|ls|exec|shell|cp|kill   live sandboxes on a server: processes, files, a shell
  sandbox-run secrets put|ls|rm ...                  a server's secrets, which runs use unseen (execute --secret)
  sandbox-run languages [--output-format text|json]  list languages and toolchains
  sandbox-run sessions ls | rm ID... | rm --all      list or remove the sessions of --session-id runs
  sandbox-run images pull|ls|rm|prune|import ...     manage the OCI images runs use (execute --image)
  sandbox-run doctor                                 check what this host supports
  sandbox-run bench | soak ...                       the measuring tools (sandbox-run-bench, built apart)
  sandbox-run version                                print the version

Run 'sandbox-run COMMAND -h' for a command's flags.
`

// Exit codes for outcomes other than the program's own exit.
const (
	exitUsage   = 2
	exitLimit   = 121
	exitCompile = 122
	exitTimeout = 124
	exitSetup   = 125
)

func main() {
	sandbox.Init()    // a sandbox's PID 1 is this binary; it never returns there
	agent.Main()      // and a live sandbox's agent (pkg/live): nor there
	gvisor.ShimMain() // and a gVisor sandbox booted ahead's first program
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(exitUsage)
	}
	args, code := os.Args[2:], 0
	clusternode.Version = version
	switch os.Args[1] {
	case "execute", "exec", "run":
		code = cmdExecute(args)
	case "serve", "server":
		code = cmdServe(args)
	case "worker":
		code = cmdWorker(args)
	case "cluster":
		code = cmdCluster(args)
	case "mcp":
		code = cmdMCP(args)
	case "repl":
		code = cmdRepl(args)
	case "languages", "langs":
		code = cmdLanguages(args)
	case "sessions", "session":
		code = cmdSessions(args)
	case "images", "image":
		code = imagecmd.Run(args, con)
	case "sandbox", "sandboxes":
		code = sandboxcmd.Run(args, con)
	case "secrets", "secret":
		code = secretcmd.Run(args, con)
	case "bench", "soak":
		code = cmdTool(os.Args[1:])
	case "doctor":
		code = cmdDoctor(args)
	case "version", "--version":
		fmt.Println("sandbox-run", version)
	case "help", "-h", "--help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "sandbox-run: unknown command %q\n\n%s", os.Args[1], usage)
		code = exitUsage
	}
	// A command that used the process-wide engine leaves no idle sandbox,
	// cgroup or mount behind.
	sandbox.CloseDefault()
	os.Exit(code)
}

// cmdTool runs the measuring tools, which live in their own binary
// (cmd/sandbox-run-bench) so that the product carries none of them:
// sandbox-run-bench beside this binary, or on $PATH.
func cmdTool(args []string) int {
	tool := "sandbox-run-bench"
	path, err := exec.LookPath(tool)
	if exe, e := os.Executable(); e == nil {
		if p := filepath.Join(filepath.Dir(exe), tool); fileExists(p) {
			path, err = p, nil
		}
	}
	if err != nil {
		return fatalf(exitUsage, "%s is a tool of its own: build it with go build -o bin/%s ./cmd/%s, then run %s %s", tool, tool, tool, tool, strings.Join(args, " "))
	}
	exe, _ := os.Executable()
	env := append(os.Environ(), "SANDBOX_RUN_BIN="+exe)
	return fatalf(exitSetup, "%v", syscall.Exec(path, append([]string{tool}, args...), env))
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

func fatalf(code int, format string, a ...any) int {
	con.Printf("sandbox-run: "+format+"\n", a...)
	return code
}
