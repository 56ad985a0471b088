package sandbox

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests run anywhere but matter on a pure cgroup v2 kernel, where CI
// runs them in a VM (scripts/cgroupv2-vm). They use the test binary itself
// as the workload, so they need no toolchain inside the VM.

// runWorkload is the program side: TestMain calls it when the binary is
// started as a workload inside a sandbox.
func runWorkload(kind string) {
	switch kind {
	case "hello":
		cg, _ := os.ReadFile("/proc/self/cgroup")
		fmt.Printf("hello uid=%d cgroup=%s", os.Getuid(), cg)
	case "memory":
		var keep [][]byte
		for i := 0; i < 256; i++ {
			b := make([]byte, 1<<20)
			for j := range b {
				b[j] = byte(j)
			}
			keep = append(keep, b)
		}
		fmt.Println("allocated", len(keep))
	case "fork":
		// Raw clones: the children only block in ppoll, so they need no
		// Go runtime (whose threads would count against the limit too).
		for i := 0; i < 100; i++ {
			pid, _, errno := syscall.RawSyscall6(syscall.SYS_CLONE, uintptr(syscall.SIGCHLD), 0, 0, 0, 0, 0)
			if errno != 0 {
				fmt.Println("fork refused after", i)
				os.Exit(1)
			}
			if pid == 0 {
				for {
					syscall.RawSyscall6(syscall.SYS_PPOLL, 0, 0, 0, 0, 0, 0)
				}
			}
		}
		fmt.Println("forked 100")
	case "spin":
		for {
		}
	case "sleep":
		time.Sleep(time.Minute)
	case "engine", "engine-ro":
		runEngineWorkload(kind)
	}
	os.Exit(0)
}

func workload(t *testing.T, kind string, l Limits) *Result {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	mounts := append(append([]Mount(nil), SystemMounts...), Mount{Source: exe, Target: "/opt/workload"})
	res, err := testEngine(t).Run(context.Background(), &Spec{
		Args:   []string{"/opt/workload"},
		Env:    []string{"SANDBOX_TEST_WORKLOAD=" + kind},
		Mounts: mounts,
		Limits: l,
	})
	if err != nil {
		t.Fatalf("workload %s: %v", kind, err)
	}
	return res
}

// TestCgroupWorkloads checks limits and accounting with the binary as its
// own workload, on whichever cgroup version the host has. With
// SANDBOX_TEST_REQUIRE_CGROUP=2 (set in the VM) it fails unless v2 is used.
func TestCgroupWorkloads(t *testing.T) {
	info := testEngine(t).Cgroups()
	t.Logf("cgroup v%d, parents %v", info.Version, info.Parents)
	if want := os.Getenv("SANDBOX_TEST_REQUIRE_CGROUP"); want != "" && want != fmt.Sprint(info.Version) {
		t.Fatalf("engine uses cgroup v%d, want v%s", info.Version, want)
	}

	res := workload(t, "hello", Limits{})
	out := string(res.Stdout)
	if !strings.HasPrefix(out, "hello uid=1000 cgroup=") || res.ExitCode != 0 {
		t.Fatalf("hello: exit=%d stdout=%q stderr=%q", res.ExitCode, out, res.Stderr)
	}
	// The cgroup namespace is rooted at the sandbox's cgroup: the program
	// sees its run's cgroup, named at random, and nothing of the host's.
	// (next- when it was made ahead, while the sandbox waited in the pool.)
	if info.Version == 2 && !regexp.MustCompile(`0::/(run|next)-[0-9a-f]{16}\n`).MatchString(out) {
		t.Errorf("cgroup namespace not rooted at the sandbox's cgroup: %q", out)
	}
	if res.PeakMemory <= 0 || res.CPUTime <= 0 {
		t.Errorf("no accounting: peak=%d cpu=%v", res.PeakMemory, res.CPUTime)
	}

	res = workload(t, "memory", Limits{Memory: 32 << 20})
	if res.Limit != LimitMemory || strings.Contains(string(res.Stdout), "allocated") {
		t.Errorf("memory: limit=%q exit=%d signal=%s stdout=%q", res.Limit, res.ExitCode, res.Signal, res.Stdout)
	}

	res = workload(t, "fork", Limits{Processes: 16, WallTime: 60 * time.Second})
	if res.Limit != LimitProcesses || !strings.HasPrefix(string(res.Stdout), "fork refused after") {
		t.Errorf("fork: limit=%q stdout=%q stderr=%q", res.Limit, res.Stdout, res.Stderr)
	}

	res = workload(t, "spin", Limits{CPUTime: 300 * time.Millisecond, WallTime: 60 * time.Second})
	t.Logf("spin: cpu=%v wall=%v", res.CPUTime, res.WallTime)
	// Software emulation in the VM is slow to deliver the kill; the 10 ms
	// bound is asserted on real hardware by TestCPULimitPrecise.
	if res.Limit != LimitCPUTime || res.CPUTime < 290*time.Millisecond || res.CPUTime > 400*time.Millisecond {
		t.Errorf("spin: limit=%q cpu=%v", res.Limit, res.CPUTime)
	}

	res = workload(t, "sleep", Limits{WallTime: 500 * time.Millisecond})
	if res.Limit != LimitWallTime {
		t.Errorf("sleep: limit=%q", res.Limit)
	}

	if left := runCgroups(t); len(left) > 0 {
		t.Errorf("cgroups left: %v", left)
	}
	if left := sandboxProcesses(t); len(left) > 0 {
		t.Errorf("processes left: %v", left)
	}
}
