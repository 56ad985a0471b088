package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func init() {
	onPrivateTmp = func(dir string) {
		// The CLI was started in a mount namespace of its own (its mounts
		// private): what it binds here is seen by it and its children only.
		fail := func(err error) {
			fmt.Fprintln(os.Stderr, "private /tmp:", err)
			os.Exit(125)
		}
		// The engine runs its sandboxes' PID 1 from this executable, which
		// go test builds under /tmp: it stays at its path.
		exe, err := os.Executable()
		if err != nil {
			fail(err)
		}
		if rel, ok := strings.CutPrefix(exe, "/tmp/"); ok {
			at := filepath.Join(dir, rel)
			if err := os.MkdirAll(filepath.Dir(at), 0o755); err != nil {
				fail(err)
			}
			if err := os.WriteFile(at, nil, 0o755); err != nil {
				fail(err)
			}
			if err := unix.Mount(exe, at, "", unix.MS_BIND, ""); err != nil {
				fail(err)
			}
		}
		if err := unix.Mount(dir, "/tmp", "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			fail(err)
		}
	}
}

// TestToolchainChecksLeaveNoTmp: "languages" and "doctor" start every
// toolchain's version command on the host, and leave nothing in /tmp. They
// used to run them with HOME=/tmp, and left /tmp/.config/go/telemetry (Go's
// telemetry counters) and /tmp/hsperfdata_root (the JVM's, which ignores
// TMPDIR). Each CLI runs in a mount namespace of its own whose /tmp is a
// directory of this test: everything it or a toolchain puts in /tmp lands
// there and is theirs for certain, whatever other programs do with the
// host's /tmp meanwhile.
func TestToolchainChecksLeaveNoTmp(t *testing.T) {
	tmp := t.TempDir()
	data := filepath.Join(tmp, "data") // the data dir, at /tmp/data for the CLI
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	// The skeleton the CLI binds its own executable at (see onPrivateTmp).
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	exeTop, _, _ := strings.Cut(strings.TrimPrefix(exe, "/tmp/"), "/")
	for _, args := range [][]string{{"languages"}, {"languages", "--output-format", "json"}, {"doctor"}} {
		cmd := cliCommand(t, []string{privateTmpEnv + "=" + tmp, "TMPDIR=/tmp", "SANDBOX_RUN_DATA_DIR=/tmp/data", "GOCOVERDIR="}, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
		var out syncBuffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ns, nsErr := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", cmd.Process.Pid))
		if err := cmd.Wait(); err != nil {
			t.Errorf("%v: %v\n%s", args, err, out.String())
		}
		// A toolchain may leave a child that writes after the CLI ended
		// (the go command's telemetry did): wait for every process of the
		// CLI's mount namespace to end.
		if nsErr != nil {
			t.Fatal(nsErr)
		}
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
			in := inMountNS(ns)
			if len(in) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%v: processes of the CLI still running a minute after it: %v", args, in)
				break
			}
		}
		entries, _ := os.ReadDir(tmp)
		var left []string
		for _, e := range entries {
			if e.Name() != "data" && e.Name() != exeTop {
				left = append(left, e.Name())
				os.RemoveAll(filepath.Join(tmp, e.Name()))
			}
		}
		if len(left) > 0 {
			t.Errorf("%v left in /tmp: %s", args, strings.Join(left, ", "))
		}
	}
}

// inMountNS lists the processes in mount namespace ns ("mnt:[N]").
func inMountNS(ns string) []string {
	var in []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if l, err := os.Readlink(filepath.Join("/proc", e.Name(), "ns", "mnt")); err == nil && l == ns {
			comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
			in = append(in, e.Name()+" "+strings.TrimSpace(string(comm)))
		}
	}
	return in
}
