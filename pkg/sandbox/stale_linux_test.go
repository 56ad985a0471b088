package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestStaleCgroupsCleaned: an engine removes the run cgroups of engine
// processes that died mid-run, and never those of a live one.
func TestStaleCgroupsCleaned(t *testing.T) {
	dead := exec.Command("/bin/true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	deadName := fmt.Sprintf("run-%d-1", dead.Process.Pid)
	liveName := fmt.Sprintf("run-%d-999999", os.Getpid())
	// One directory per hierarchy: co-mounted controllers share a parent.
	parents := distinctDirs(testEngine(t).Cgroups().Parents)
	if info := testEngine(t).Cgroups(); info.Version == 2 {
		parents = []string{info.Parents["unified"]}
	}
	for _, p := range parents {
		for _, n := range []string{deadName, liveName} {
			if err := os.MkdirAll(filepath.Join(p, n), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Cleanup(func() {
		for _, p := range parents {
			os.Remove(filepath.Join(p, liveName))
			os.Remove(filepath.Join(p, deadName))
		}
	})
	if _, err := New(Config{UIDBase: testUIDs(3), UIDSlots: 1}); err != nil {
		t.Fatal(err)
	}
	for _, p := range parents {
		if _, err := os.Stat(filepath.Join(p, deadName)); !os.IsNotExist(err) {
			t.Errorf("stale %s/%s not removed", p, deadName)
		}
		if _, err := os.Stat(filepath.Join(p, liveName)); err != nil {
			t.Errorf("a live engine's %s/%s was removed", p, liveName)
		}
	}
}
