package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWork: a /work for another backend holds its input files at its
// directory, bounded in size; what is written there comes back through
// Collect (a link does not); Close unmounts it.
func TestWork(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount")
	}
	dir := filepath.Join(t.TempDir(), "work")
	w, err := NewWork(dir, Limits{WorkSize: 1 << 20}, 0, []File{{Path: "in/a.txt", Data: []byte("input")}})
	if err != nil {
		t.Fatal(err)
	}
	if w.Dir() != dir {
		t.Errorf("Dir %q", w.Dir())
	}
	if b, err := os.ReadFile(filepath.Join(dir, "in/a.txt")); err != nil || string(b) != "input" {
		t.Fatalf("the input file: %q %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "out.txt"), []byte("output"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "big"), make([]byte, 2<<20), 0o644); err == nil {
		t.Error("wrote 2 MiB into a 1 MiB /work")
	}
	files, skipped := w.Collect(Collect{Patterns: []string{"out.txt", "link"}}, nil)
	if len(files) != 1 || files[0].Path != "out.txt" || string(files[0].Data) != "output" {
		t.Errorf("collected %+v", files)
	}
	if len(skipped) != 1 || skipped[0].Path != "link" {
		t.Errorf("skipped %+v", skipped)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the directory after Close holds %d entries", len(entries))
	}
}

// TestWorkUnmounted: a /work mounted nowhere is reached through this
// process's descriptor of it, and appears in no mount table.
func TestWorkUnmounted(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	w, err := NewWork("", Limits{WorkSize: 1 << 20}, 0, []File{{Path: "a.txt", Data: []byte("in")}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if b, err := os.ReadFile(filepath.Join(w.Dir(), "a.txt")); err != nil || string(b) != "in" {
		t.Fatalf("through %s: %q %v", w.Dir(), b, err)
	}
	if err := w.WriteFiles([]File{{Path: "b/c.txt", Data: []byte("later")}}, 0); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(w.Dir(), "b/c.txt")); string(b) != "later" {
		t.Errorf("a file written later: %q", b)
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), w.Dir()) {
		t.Errorf("%s is in the mount table", w.Dir())
	}
}
