package images

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/compression"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/sandbox-run/sandbox-run/pkg/images/layer"
)

// entry is one tar entry of a test layer: a file with content, a
// directory (name ending in /), or a symlink (link set).
type entry struct{ name, content, link string }

func tarLayer(t *testing.T, comp compression.Compression, entries ...entry) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(e.content))}
		switch {
		case strings.HasSuffix(e.name, "/"):
			h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
		case e.link != "":
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, e.link, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, e.content)
	}
	tw.Close()
	data := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithCompression(comp))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// pullLayout writes the image to an OCI layout and pulls it.
func pullLayout(t *testing.T, s *Store, img v1.Image) *Image {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "layout")
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	got, err := s.Pull(context.Background(), "oci:"+dir, Caps{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func readTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		switch {
		case d.IsDir():
			out[rel+"/"] = ""
		case d.Type()&os.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			out[rel] = "-> " + l
		default:
			b, _ := os.ReadFile(p)
			out[rel] = string(b)
		}
		return nil
	})
	return out
}

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	st, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Ino
}

// An image's root is its layers applied in order (whiteouts included);
// two images on one base share its unpacked tree and file data.
func TestRoot(t *testing.T) {
	base := tarLayer(t, compression.GZip,
		entry{name: "usr/"}, entry{name: "usr/bin/"}, entry{name: "usr/bin/tool", content: "v1"},
		entry{name: "bin", link: "usr/bin"}, entry{name: "etc/"}, entry{name: "etc/os-release", content: "test"},
		entry{name: "old/"}, entry{name: "old/junk", content: "x"})
	top := tarLayer(t, compression.ZStd,
		entry{name: "usr/bin/tool", content: "v2"}, entry{name: ".wh.old"}, entry{name: "app/"}, entry{name: "app/main.py", content: "print(1)"})
	other := tarLayer(t, compression.None, entry{name: "srv/"}, entry{name: "srv/data", content: "d"})
	img1, err := mutate.AppendLayers(empty.Image, base, top)
	if err != nil {
		t.Fatal(err)
	}
	img2, err := mutate.AppendLayers(empty.Image, base, other)
	if err != nil {
		t.Fatal(err)
	}
	s := openStore(t)
	rec1, rec2 := pullLayout(t, s, img1), pullLayout(t, s, img2)
	root1, err := s.Root(rec1, layer.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"usr/": "", "usr/bin/": "", "usr/bin/tool": "v2", "bin": "-> usr/bin", "etc/": "",
		"etc/os-release": "test", "app/": "", "app/main.py": "print(1)"}
	got := readTree(t, root1)
	if len(got) != len(want) {
		t.Errorf("root: %q, want %q", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("root %s: %q, want %q", k, got[k], v)
		}
	}
	root2, err := s.Root(rec2, layer.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got := readTree(t, root2); got["srv/data"] != "d" || got["usr/bin/tool"] != "v1" || got["old/junk"] != "x" {
		t.Errorf("second image's root: %q", got)
	}
	if inode(t, filepath.Join(root2, "etc/os-release")) != inode(t, filepath.Join(root1, "etc/os-release")) {
		t.Error("two images on one base do not share its files")
	}
	// The base's own tree is untouched by the layers above it.
	if n := chainDirs(t, s); n != 3 {
		t.Errorf("%d chains, want 3 (the base, and one above it per image)", n)
	}
	baseDiff, _ := base.DiffID()
	baseHex, _ := parseDigest(baseDiff.String())
	if b, err := os.ReadFile(filepath.Join(s.dir, "chains", baseHex, "usr/bin/tool")); err != nil || string(b) != "v1" {
		t.Errorf("the base's tree changed under the layer above: %q %v", b, err)
	}
	// Again: nothing to do, same answer.
	if again, err := s.Root(rec1, layer.Limits{}); err != nil || again != root1 {
		t.Errorf("second Root: %q %v", again, err)
	}
	// Prune keeps what images use, and drops the rest once unreferenced.
	if _, err := s.Prune(); err != nil {
		t.Fatal(err)
	}
	if n := chainDirs(t, s); n != 3 {
		t.Errorf("prune removed chains still in use: %d left", n)
	}
	for i, rec := range []*Image{rec2, rec1} {
		want := []int{2, 0}[i] // image 1's two chains, then none
		if err := s.Remove(rec.Ref); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Prune(); err != nil {
			t.Fatal(err)
		}
		entries, _ := os.ReadDir(filepath.Join(s.dir, "chains"))
		if len(entries) != 2*want { // each chain's tree and its measure
			t.Errorf("after removing %s: %d entries in chains/, want %d", rec.Ref, len(entries), 2*want)
		}
	}
}

// A hostile layer fails the root and leaves nothing: no chain, nothing
// outside the store.
func TestRootHostileLayer(t *testing.T) {
	// The link points at a directory of the test's own: were the layer to
	// escape, only that would show it.
	outside := t.TempDir()
	bad := tarLayer(t, compression.GZip, entry{name: "l", link: outside}, entry{name: "l/escaped", content: "x"})
	img, err := mutate.AppendLayers(empty.Image, bad)
	if err != nil {
		t.Fatal(err)
	}
	s := openStore(t)
	rec := pullLayout(t, s, img)
	if _, err := s.Root(rec, layer.Limits{}); err == nil {
		t.Fatal("a layer writing through a symlink was unpacked")
	}
	if _, err := os.Stat(filepath.Join(outside, "escaped")); err == nil {
		t.Fatal("the layer wrote through its symlink, outside the store")
	}
	for _, d := range []string{filepath.Join(s.dir, "chains"), s.tmp} {
		if entries, _ := os.ReadDir(d); len(entries) != 0 {
			t.Errorf("%s holds %d entries after a failed unpack", d, len(entries))
		}
	}
}

// A layer whose content is not its diff id (a blob swapped in the store)
// is refused.
func TestRootChecksDiffID(t *testing.T) {
	good := tarLayer(t, compression.GZip, entry{name: "a", content: "1"})
	img, err := mutate.AppendLayers(empty.Image, good)
	if err != nil {
		t.Fatal(err)
	}
	s := openStore(t)
	rec := pullLayout(t, s, img)
	// Another layer's bytes where this one's blob is.
	swapped := tarLayer(t, compression.GZip, entry{name: "a", content: "2"})
	rc, _ := swapped.Compressed()
	b, _ := io.ReadAll(rc)
	p, _ := s.BlobPath(rec.Layers[0].Digest)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Root(rec, layer.Limits{}); err == nil || !strings.Contains(err.Error(), "diff id") {
		t.Errorf("a swapped blob: %v", err)
	}
}

// chainDirs counts the unpacked chain trees.
func chainDirs(t *testing.T, s *Store) int {
	t.Helper()
	entries, _ := os.ReadDir(filepath.Join(s.dir, "chains"))
	n := 0
	for _, e := range entries {
		if e.IsDir() {
			n++
		}
	}
	return n
}

// The unpacking limits are the whole image's: two layers that each fit
// but not together are refused, and the chain that would pass them is
// not made.
func TestRootLimitsWholeImage(t *testing.T) {
	blob := strings.Repeat("x", 600<<10)
	l1 := tarLayer(t, compression.GZip, entry{name: "a", content: blob})
	l2 := tarLayer(t, compression.GZip, entry{name: "b", content: blob})
	img, err := mutate.AppendLayers(empty.Image, l1, l2)
	if err != nil {
		t.Fatal(err)
	}
	s := openStore(t)
	rec := pullLayout(t, s, img)
	_, err = s.Root(rec, layer.Limits{MaxBytes: 1 << 20})
	if err == nil || !strings.Contains(err.Error(), "in all") {
		t.Fatalf("two layers of 600 KiB under 1 MiB in all: %v", err)
	}
	if n := chainDirs(t, s); n != 1 {
		t.Errorf("%d chains made, want only the first layer's", n)
	}
	// Each alone fits; the entries count too.
	if _, err := s.Root(rec, layer.Limits{MaxBytes: 2 << 20}); err != nil {
		t.Errorf("under 2 MiB in all: %v", err)
	}
	img3, err := mutate.AppendLayers(img, tarLayer(t, compression.GZip, entry{name: "c", content: "c"}))
	if err != nil {
		t.Fatal(err)
	}
	rec3 := pullLayout(t, s, img3)
	if _, err := s.Root(rec3, layer.Limits{MaxEntries: 2}); err == nil || !strings.Contains(err.Error(), "entries in all") {
		t.Errorf("three one-entry layers under 2 entries in all: %v", err)
	}
}
