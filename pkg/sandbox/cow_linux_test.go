package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestFilesFrom: a run whose /work and /tmp start from a host directory
// (Spec.FilesFrom) sees its files as its own user's, reads and changes
// them, and its changes stay in its own bounded file system: the
// directory, and another run from it at the same time, see none of them;
// nothing of the directory is writable through the overlay's lower layer;
// a directory without tmp gives an empty /tmp; the run's mount table
// names none of the host's paths.
func TestFilesFrom(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"work/sub", "tmp"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	os.WriteFile(filepath.Join(dir, "work", "a.txt"), []byte("lower\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "work", "private"), []byte("mine\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "tmp", "t"), []byte("tmp\n"), 0o644)
	os.Symlink("/etc/hostname", filepath.Join(dir, "work", "link"))
	if _, err := testEngine(t).Run(t.Context(), withDefaults(&Spec{Args: []string{"true"}, FilesFrom: dir})); errors.Is(err, ErrNoCopyOnWrite) {
		t.Skip(err) // Debian 12's kernel, in the cgroup VMs
	} else if err != nil {
		t.Fatal(err)
	}
	script := `set -e
id -u; stat -c '%u %a' a.txt private sub /work /tmp
cat a.txt private /tmp/t
echo "$1" >> a.txt; echo new > sub/new; rm private; echo t2 > /tmp/t; readlink link
cat a.txt; ls /work | tr '\n' ' '; echo
head -c 3000000 /dev/zero > big 2>/dev/null || echo full`
	var wg sync.WaitGroup
	res := make([]*Result, 2)
	for i := range res {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i] = run(t, &Spec{Args: []string{"bash", "-c", script, "bash", "run" + string(rune('0'+i))}, FilesFrom: dir,
				Limits: Limits{WorkSize: 2 << 20}})
		}()
	}
	wg.Wait()
	for i, r := range res {
		want := "1000\n1000 644\n1000 600\n1000 755\n1000 755\n0 1777\nlower\nmine\ntmp\n/etc/hostname\nlower\nrun" + string(rune('0'+i)) +
			"\na.txt link sub \nfull\n"
		if string(r.Stdout) != want || r.ExitCode != 0 {
			t.Errorf("run %d: exit %d stdout %q stderr %q, want %q", i, r.ExitCode, r.Stdout, r.Stderr, want)
		}
	}
	for p, want := range map[string]string{"work/a.txt": "lower\n", "work/private": "mine\n", "tmp/t": "tmp\n"} {
		if b, err := os.ReadFile(filepath.Join(dir, p)); string(b) != want {
			t.Errorf("%s after the runs: %q %v", p, b, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "work", "sub", "new")); err == nil {
		t.Error("a run's new file reached the directory")
	}

	// Only work: /tmp starts empty.
	only := t.TempDir()
	os.MkdirAll(filepath.Join(only, "work"), 0o755)
	os.WriteFile(filepath.Join(only, "work", "f"), []byte("f\n"), 0o644)
	r := run(t, &Spec{Args: []string{"bash", "-c", "cat f; ls -A /tmp | wc -l; touch /tmp/x && echo ok; grep -E ' /(work|tmp) ' /proc/self/mountinfo >&2"}, FilesFrom: only})
	// Its mount table names no path of the host's.
	if mi := string(r.Stderr); !strings.Contains(mi, " /work ") || !strings.Contains(mi, "overlay") || strings.Contains(mi, only) {
		t.Errorf("the run's /work in its mount table: %q", mi)
	}
	if string(r.Stdout) != "f\n0\nok\n" {
		t.Errorf("work only: %q %q", r.Stdout, r.Stderr)
	}
	if _, err := testEngine(t).Run(t.Context(), withDefaults(&Spec{Args: []string{"true"}, FilesFrom: "relative"})); err == nil ||
		!strings.Contains(err.Error(), "absolute") {
		t.Errorf("a relative directory: %v", err)
	}
	if len(runCgroups(t)) != 0 {
		t.Errorf("run cgroups left: %v", runCgroups(t))
	}
}
