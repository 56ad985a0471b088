package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// cgroupMountPoints lists the mount points of the cgroup hierarchies.
func cgroupMountPoints(t *testing.T) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		for i, fld := range fields {
			if fld == "-" && i+1 < len(fields) && (fields[i+1] == "cgroup" || fields[i+1] == "cgroup2") {
				points = append(points, fields[4])
			}
		}
	}
	return points
}

// TestCLILeavesNothing: one-shot commands (20 `execute` at once, with
// `doctor` and `bench` beside them) remove every cgroup directory, mount
// and temp file they made before they exit, under their own cgroup and
// under a cgroup parent given by the environment or the flag. Before, each
// left its sandbox's ct-<pid>-1 (with next- cgroups inside) until another
// engine started, and never under another parent. Half of them get a
// cgroup parent of their own, where no other engine's clean-up of stale
// cgroups can hide what they leave.
func TestCLILeavesNothing(t *testing.T) {
	e, err := sandbox.Default() // the CLIs are in this process's cgroup
	if err != nil {
		t.Fatal(err)
	}
	var optionParents []string
	parentName := func(i int) string {
		name := fmt.Sprintf("sandbox-run-clitest-%d-%d", os.Getpid(), i)
		for _, mp := range cgroupMountPoints(t) {
			optionParents = append(optionParents, filepath.Join(mp, name, "sandbox-run"))
		}
		return name
	}
	t.Cleanup(func() {
		for _, p := range optionParents {
			os.Remove(p)
			os.Remove(filepath.Dir(p))
		}
	})

	type run struct {
		args []string
		env  []string
		tmp  string
		pid  int
		res  cliResult
		err  error
	}
	var runs []*run
	for i := 0; i < 20; i++ {
		r := &run{args: []string{"execute", "--language", "bash", "--code", fmt.Sprintf("echo hi %d", i)}}
		switch i % 4 {
		case 1:
			r.env = []string{"SANDBOX_RUN_CGROUP_PARENT=" + parentName(i)}
		case 3:
			r.args = append(r.args[:1], append([]string{"--cgroup-parent", parentName(i)}, r.args[1:]...)...)
		}
		runs = append(runs, r)
	}
	runs = append(runs,
		&run{args: []string{"doctor", "-o", "json"}},
		&run{args: []string{"doctor", "--cgroup-parent", parentName(20)}},
		// execute reads the configuration file as serve does.
		&run{args: []string{"execute", "--config", configFile(t, "cgroup_parent: "+parentName(21)+"\n"), "-l", "bash", "--code", "echo hi config"}})
	var wg sync.WaitGroup
	for _, r := range runs {
		r.tmp = t.TempDir()
		cmd := cliCommand(t, append(r.env, "TMPDIR="+r.tmp), r.args...)
		var out, errb syncBuffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		r.pid = cmd.Process.Pid
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.err = cmd.Wait()
			r.res = cliResult{cmd.ProcessState.ExitCode(), out.String(), errb.String()}
		}()
	}
	wg.Wait()

	parents := append([]string(nil), optionParents...)
	for _, p := range e.Cgroups().Parents {
		parents = append(parents, p)
	}
	used := map[string]bool{}
	for _, p := range optionParents {
		if _, err := os.Stat(p); err == nil {
			used[filepath.Base(filepath.Dir(p))] = true
		}
	}
	if len(used) != 12 {
		t.Errorf("%d of 12 CLIs made their cgroups under the cgroup parent given", len(used))
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, r := range runs {
		if r.res.code != 0 || (r.args[0] == "execute" && !strings.HasPrefix(r.res.stdout, "hi ")) {
			t.Errorf("%v: exit %d (%v)\nstdout %s\nstderr %s", r.args, r.res.code, r.err, r.res.stdout, r.res.stderr)
		}
		prefix := fmt.Sprintf("ct-%d-", r.pid)
		for _, p := range parents {
			entries, _ := os.ReadDir(p)
			for _, en := range entries {
				if strings.HasPrefix(en.Name(), prefix) {
					t.Errorf("%v left the cgroup %s", r.args, filepath.Join(p, en.Name()))
				}
			}
		}
		if left, _ := os.ReadDir(r.tmp); len(left) > 0 {
			t.Errorf("%v left %d files in its TMPDIR: %v", r.args, len(left), left)
		}
		if strings.Contains(string(mounts), r.tmp) || strings.Contains(string(mounts), prefix) {
			t.Errorf("%v left a mount", r.args)
		}
	}
}

// configFile writes a configuration file for a test and returns its path.
func configFile(t *testing.T, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
