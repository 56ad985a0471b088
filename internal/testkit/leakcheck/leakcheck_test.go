package leakcheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestProcessesEscaped: every process with a uid of the range counts,
// whether it descends from this process or escaped its tree (here one
// reparented away from us, as a program that left its sandbox would be);
// one with a uid outside the range does not.
func TestProcessesEscaped(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run as another uid")
	}
	lo, _ := UIDBlock(9)
	start := func(uid int, script string) int {
		t.Helper()
		c := exec.Command("sh", "-c", script)
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
		out, err := c.Output()
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil {
			t.Fatalf("%q", out)
		}
		t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
		return pid
	}
	child := exec.Command("sleep", "60")
	child.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(lo + 1), Gid: uint32(lo + 1)}}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { child.Process.Kill(); child.Wait() }()
	// Output has reaped the shells: their children were reparented away.
	escaped := start(lo+3, "setsid sleep 60 >/dev/null 2>&1 & echo $!")
	outside := start(lo+5, "setsid sleep 60 >/dev/null 2>&1 & echo $!")
	got := strings.Join(ProgramProcesses(lo, lo+4, ""), ", ")
	for _, pid := range []int{child.Process.Pid, escaped} {
		if !strings.Contains(got, "pid "+strconv.Itoa(pid)+" ") {
			t.Errorf("process %d of the range not found: %s", pid, got)
		}
	}
	if strings.Contains(got, "pid "+strconv.Itoa(outside)+" ") {
		t.Errorf("a process outside the range counted: %s", got)
	}
}

// TestUIDBlocks: the bands' blocks overlap neither each other nor the
// default engine's range.
func TestUIDBlocks(t *testing.T) {
	type span struct{ lo, hi int }
	spans := []span{{2000000000, 2000000000 + 8192}}
	for _, band := range []int{BandSandbox, BandRedTeam, BandAPIFaults} {
		lo, hi := UIDBlock(band)
		if hi-lo != 100_000 || hi > 1<<32-2 {
			t.Errorf("band %d: [%d, %d)", band, lo, hi)
		}
		spans = append(spans, span{lo, hi})
	}
	for i, a := range spans {
		for _, b := range spans[i+1:] {
			if a.lo < b.hi && b.lo < a.hi {
				t.Errorf("[%d, %d) overlaps [%d, %d)", a.lo, a.hi, b.lo, b.hi)
			}
		}
	}
}

// TestHostTemp: of a shared temporary directory only what the project
// could have made counts: a sandbox uid's entry, a toolchain's leftover.
func TestHostTemp(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown")
	}
	dir := t.TempDir()
	lo := 2009900000
	for _, n := range []string{"someone-elses", "sandboxed", "hsperfdata_root", ".config"} {
		if err := os.Mkdir(filepath.Join(dir, n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Chown(filepath.Join(dir, "sandboxed"), lo+1, lo+1)
	before := map[string]string{".config": "a toolchain's leftover"}
	got := strings.Join(NewIn(before, hostTemp(dir, lo, lo+4)), "; ")
	if got != "hsperfdata_root (a toolchain's leftover); sandboxed (owned by sandbox uid 2009900001 gid 2009900001)" {
		t.Errorf("new: %s", got)
	}
}
