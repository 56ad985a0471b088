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

// TestProcessesOnlyOurs: a process with a uid of the range counts when it
// descends from this process, not when it is another program's (here one
// reparented away from us, as another test binary's sandbox would be).
func TestProcessesOnlyOurs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run as another uid")
	}
	lo := 2009900000 + os.Getpid()%1000*4
	cred := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(lo + 1), Gid: uint32(lo + 1)}}
	child := exec.Command("sleep", "60")
	child.SysProcAttr = cred
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { child.Process.Kill(); child.Wait() }()
	// A daemon of the same uid, its parent gone: not ours.
	out, err := func() ([]byte, error) {
		c := exec.Command("sh", "-c", "setsid sleep 60 >/dev/null 2>&1 & echo $!")
		c.SysProcAttr = cred
		return c.Output()
	}()
	if err != nil {
		t.Fatal(err)
	}
	other, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("%q", out)
	}
	defer syscall.Kill(other, syscall.SIGKILL)
	// Output has reaped the shell: its child was reparented at its exit.
	got := strings.Join(ProgramProcesses(lo, lo+4, ""), ", ")
	if !strings.Contains(got, "pid "+strconv.Itoa(child.Process.Pid)+" ") {
		t.Errorf("our child %d not found: %s", child.Process.Pid, got)
	}
	if strings.Contains(got, "pid "+strconv.Itoa(other)+" ") {
		t.Errorf("another program's process %d counted: %s", other, got)
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
