//go:build ignore

// Every process re-executes /proc/self/exe as fast as it can: a fork bomb
// through os/exec. The pids limit must hold it; the run must end it.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"time"
)

func main() {
	child := os.Getenv("BOMB_CHILD") != ""
	deadline := time.Now().Add(time.Second)
	refused := 0
	for !child && time.Now().Before(deadline) || child {
		cmd := exec.Command("/proc/self/exe")
		cmd.Env = []string{"BOMB_CHILD=1"}
		if err := cmd.Start(); err != nil {
			refused++
			if child {
				time.Sleep(time.Millisecond)
			}
		}
	}
	fmt.Println("refused", refused > 0)
}
