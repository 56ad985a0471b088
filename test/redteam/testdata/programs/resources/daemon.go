//go:build ignore

// ForkExec a sleeper in a new session, then exit 0 without waiting.
package main

import (
	"fmt"
	"os"
	"syscall"
)

func main() {
	pid, err := syscall.ForkExec("/bin/sleep", []string{"sleep", "600"}, &syscall.ProcAttr{
		Files: []uintptr{^uintptr(0), ^uintptr(0), ^uintptr(0)},
		Sys:   &syscall.SysProcAttr{Setsid: true},
	})
	if err != nil {
		fmt.Println("forkexec:", err)
		os.Exit(1)
	}
	fmt.Println("daemon started", pid > 0)
}
