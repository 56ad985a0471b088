package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// runCgroupsOf lists the run cgroups an engine process owns (named
// run-<pid>-<n> under the engine's parent cgroups) and the processes in them.
func runCgroupsOf(t *testing.T, pid int) (dirs []string, procs int) {
	e, err := sandbox.Default()
	if err != nil {
		t.Fatal(err)
	}
	for _, parent := range e.Cgroups().Parents {
		entries, _ := os.ReadDir(parent)
		for _, ent := range entries {
			if strings.HasPrefix(ent.Name(), fmt.Sprintf("ct-%d-", pid)) {
				// A sandbox: PID 1 in it (or its init leaf), runs below.
				dir := filepath.Join(parent, ent.Name())
				dirs = append(dirs, dir)
				runs, _ := filepath.Glob(filepath.Join(dir, "run-*", "cgroup.procs"))
				for _, f := range runs {
					b, _ := os.ReadFile(f)
					procs += len(strings.Fields(string(b)))
				}
			}
		}
	}
	return dirs, procs
}

// TestServerKilledMidRun: a server killed with SIGKILL while a run is in
// flight leaves no sandbox process (PID 1 dies with it), and the next
// server removes the empty cgroups it left.
func TestServerKilledMidRun(t *testing.T) {
	srv := startServe(t, nil)
	go http.Post(srv.url+"/api/sandbox/execute", "application/json",
		strings.NewReader(`{"language":"bash","code":"sleep 60 & sleep 60"}`))
	pid := srv.cmd.Process.Pid
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, procs := runCgroupsOf(t, pid); procs > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the run never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	srv.cmd.Process.Signal(syscall.SIGKILL)
	<-srv.done
	deadline = time.Now().Add(5 * time.Second)
	for {
		// The sandbox is gone. Its empty cgroups remain until an engine
		// starts: another test binary's engine may have removed them already.
		dirs, procs := runCgroupsOf(t, pid)
		if procs == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after SIGKILL of the server: %d processes in %v", procs, dirs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	startServe(t, nil) // a new engine cleans up what the dead one left
	if dirs, _ := runCgroupsOf(t, pid); len(dirs) > 0 {
		t.Fatalf("stale cgroups not removed: %v", dirs)
	}
}
