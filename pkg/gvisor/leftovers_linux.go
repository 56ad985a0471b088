package gvisor

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Quiesce waits until what ended runs hold is removed (sandboxes booted
// ahead are removed after their run's result is out) and no sandbox is
// booting.
func (g *Runner) Quiesce() {
	g.closing.Wait()
	g.pool.fills.Wait()
}

// Leftovers lists what runs that ended left of this runner's: bundles,
// runsc's containers and cgroups that are not a sandbox booted ahead's,
// for leak checks (call Quiesce first).
func (g *Runner) Leftovers() []string {
	pooled := g.pool.ids()
	var left []string
	entries, _ := os.ReadDir(g.runs)
	for _, e := range entries {
		if !pooled[e.Name()] {
			left = append(left, "gVisor bundle "+filepath.Join(g.runs, e.Name()))
		}
	}
	out, _ := exec.Command(g.cfg.Runsc, "--root", g.state, "list", "--quiet").Output()
	for _, id := range strings.Fields(string(out)) {
		if !pooled[id] {
			left = append(left, "gVisor container "+id)
		}
	}
	ours := fmt.Sprintf("sr%d-", os.Getpid()) // other processes' runners share the parent
	for _, parent := range g.cg.allDirs(g.cg.parent) {
		entries, _ := os.ReadDir(parent)
		for _, e := range entries {
			if e.IsDir() && strings.HasPrefix(e.Name(), ours) && !pooled[e.Name()] {
				left = append(left, "gVisor cgroup "+filepath.Join(parent, e.Name()))
			}
		}
	}
	return left
}
