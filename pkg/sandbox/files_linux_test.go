package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSaveLoadFiles: a live run's /work and /tmp are copied out (files
// with their modes, directories, symbolic links as links, a FIFO left
// out, nothing followed out of the sandbox), bounded, and copied into
// another run as its user's.
func TestSaveLoadFiles(t *testing.T) {
	e := detachEngine(t, 24)
	live := func(script string) (*Process, chan *Result) {
		t.Helper()
		spec := withDefaults(&Spec{Args: []string{"/bin/sh", "-c", script}})
		spec.Detachable, spec.Home = true, "/home/user"
		p, err := e.Start(context.Background(), spec)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan *Result, 1)
		go func() {
			res, _ := p.Wait()
			done <- res
		}()
		return p, done
	}
	a, aDone := live(`mkdir -p d/e && echo secret > d/f && chmod 640 d/f && ln -s d/f l && ln -s / root && ln -s /etc/passwd pw &&
mkfifo p && echo tmp > /tmp/t && touch /work/ready && exec sleep 1000`)
	defer func() { a.Kill(); <-aDone }()
	dir := t.TempDir()
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := a.SaveFiles(context.Background(), dir, 1<<20); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, "work", "ready")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			out, _ := exec.Command("find", dir).CombinedOutput()
			a.Kill()
			res := <-aDone
			t.Fatalf("the program did not make its files: %s %+v", out, res)
		}
		os.RemoveAll(dir)
		time.Sleep(20 * time.Millisecond)
	}
	w := filepath.Join(dir, "work")
	if b, err := os.ReadFile(filepath.Join(w, "d", "f")); string(b) != "secret\n" {
		t.Errorf("d/f: %q %v", b, err)
	}
	if st, err := os.Lstat(filepath.Join(w, "d", "f")); err != nil || st.Mode().Perm() != 0o640 {
		t.Errorf("d/f's mode: %v %v", st.Mode(), err)
	}
	for link, want := range map[string]string{"l": "d/f", "root": "/", "pw": "/etc/passwd"} {
		if got, err := os.Readlink(filepath.Join(w, link)); got != want {
			t.Errorf("link %s: %q %v", link, got, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(w, "p")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the FIFO was copied: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "tmp", "t")); string(b) != "tmp\n" {
		t.Errorf("/tmp/t: %q", b)
	}
	if _, err := a.SaveFiles(context.Background(), t.TempDir(), 3); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a bound of 3 bytes: %v", err)
	}

	// Into another run: its user's, links as they were; a link it made
	// beforehand where a directory comes is not followed.
	b, bDone := live(`ln -s /etc d && touch made; while [ ! -f /work/ready ]; do sleep 0.02; done; sleep 0.2
cat d/f; stat -c '%U %a' d/f; readlink l; readlink root; cat /tmp/t; ls -ld d`)
	made := fmt.Sprintf("/proc/%d/root/work/made", b.c.cmd.Process.Pid)
	for _, err := os.Stat(made); err != nil; _, err = os.Stat(made) {
		if time.Now().After(deadline) {
			t.Fatal("the second program did not make its link")
		}
		time.Sleep(10 * time.Millisecond)
	}
	err := b.LoadFiles(dir)
	b.Kill()
	res := <-bDone
	if err == nil {
		t.Errorf("loaded through the run's own link d -> /etc: %s", res.Stdout)
	}
	if _, err := os.Stat("/etc/f"); err == nil {
		t.Fatal("the load wrote the host's /etc/f")
	}
	c, cDone := live(`while [ ! -f /work/ready ]; do sleep 0.02; done; sleep 0.2
cat d/f; stat -c '%U %a' d/f; readlink l; readlink root; cat /tmp/t`)
	if err := c.LoadFiles(dir); err != nil {
		t.Fatal(err)
	}
	res = <-cDone
	if got := string(res.Stdout); !strings.HasPrefix(got, "secret\n") || !strings.Contains(got, " 640\nd/f\n/\ntmp\n") || strings.Contains(got, "root 640") {
		t.Errorf("the files loaded, as the run sees them: %q %q", got, res.Stderr)
	}
}

// TestSaveLoadDirs: another backend's trees (host directories a sandbox
// wrote) are copied as a sandbox's are: links copied as links and never
// followed, FIFOs left out, the bound kept; loaded into a tree where the
// sandbox planted a link to the host's /etc, the copy fails rather than
// write through it.
func TestSaveLoadDirs(t *testing.T) {
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "d"), 0o755)
	os.WriteFile(filepath.Join(src, "d", "f"), []byte("secret\n"), 0o640)
	os.Symlink("/", filepath.Join(src, "root"))
	os.Symlink("/etc/passwd", filepath.Join(src, "pw"))
	if err := syscall.Mkfifo(filepath.Join(src, "p"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	n, err := SaveDirs(map[string]string{"work": src}, dir, 1<<20)
	if err != nil || n != int64(len("secret\n")) {
		t.Fatalf("SaveDirs: %d %v", n, err)
	}
	for link, want := range map[string]string{"root": "/", "pw": "/etc/passwd"} {
		if got, _ := os.Readlink(filepath.Join(dir, "work", link)); got != want {
			t.Errorf("link %s: %q", link, got)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "work", "p")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the FIFO was copied: %v", err)
	}
	if _, err := SaveDirs(map[string]string{"work": src}, t.TempDir(), 3); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a bound of 3 bytes: %v", err)
	}
	into := t.TempDir()
	os.Symlink("/etc", filepath.Join(into, "d")) // planted where a directory comes
	before, _ := os.ReadDir("/etc")
	if err := LoadDirs(dir, map[string]string{"work": into, "tmp": t.TempDir()}, os.Getuid()); err == nil {
		t.Error("a load through a planted link to /etc succeeded")
	}
	if _, err := os.Stat("/etc/f"); err == nil {
		t.Fatal("the load wrote into the host's /etc")
	}
	if after, _ := os.ReadDir("/etc"); len(after) != len(before) {
		t.Errorf("/etc changed: %d entries, %d before", len(after), len(before))
	}
	clean := t.TempDir()
	if err := LoadDirs(dir, map[string]string{"work": clean}, os.Getuid()); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(clean, "d", "f")); string(b) != "secret\n" {
		t.Errorf("loaded d/f: %q", b)
	}
}
