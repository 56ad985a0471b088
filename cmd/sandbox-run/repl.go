package main

import "github.com/sandbox-run/sandbox-run/internal/app/repl"

// cmdRepl is `sandbox-run repl`: a read-eval-print loop on an interpreter
// session, in process or on a server (internal/app/repl).
func cmdRepl(args []string) int { return repl.Command(args, con, remoteFailure) }
