package live

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestPackUnpack: a snapshot's tree goes through a tar stream as it was
// (files with their modes, directories, links as links); a stream that
// names a path outside the tree, or writes through a link it made, is
// refused and writes nothing outside.
func TestPackUnpack(t *testing.T) {
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "work", "d"), 0o755)
	os.WriteFile(filepath.Join(src, "work", "d", "f"), []byte("secret\n"), 0o640)
	os.Symlink("/etc", filepath.Join(src, "work", "etc"))
	os.WriteFile(filepath.Join(src, "snapshot.json"), []byte("{}"), 0o600)
	var buf bytes.Buffer
	if err := PackDir(&buf, src); err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	if err := UnpackDir(bytes.NewReader(buf.Bytes()), dst); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "work", "d", "f")); string(b) != "secret\n" {
		t.Errorf("d/f: %q %v", b, err)
	}
	if st, err := os.Stat(filepath.Join(dst, "work", "d", "f")); err != nil || st.Mode().Perm() != 0o640 {
		t.Errorf("d/f's mode: %v %v", st, err)
	}
	if l, err := os.Readlink(filepath.Join(dst, "work", "etc")); l != "/etc" {
		t.Errorf("the link: %q %v", l, err)
	}

	outside := t.TempDir()
	for name, entries := range map[string][]*tar.Header{
		"dot-dot":  {{Name: "../" + filepath.Base(outside) + "/x", Typeflag: tar.TypeReg, Mode: 0o644}},
		"absolute": {{Name: outside + "/x", Typeflag: tar.TypeReg, Mode: 0o644}},
		"via-link": {{Name: "out", Typeflag: tar.TypeSymlink, Linkname: outside}, {Name: "out/x", Typeflag: tar.TypeReg, Mode: 0o644}},
	} {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for _, h := range entries {
			tw.WriteHeader(h)
		}
		tw.Close()
		if err := UnpackDir(&b, t.TempDir()); err == nil {
			t.Errorf("%s: unpacked", name)
		}
		if _, err := os.Stat(filepath.Join(outside, "x")); err == nil {
			t.Fatalf("%s: wrote outside the tree", name)
		}
	}
}
