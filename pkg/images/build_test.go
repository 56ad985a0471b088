package images

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/zstd"

	"github.com/sandbox-run/sandbox-run/pkg/images/layer"
)

// writeTree makes files under root: name → content, a name ending in "/"
// a directory, content "-> T" a symlink to T.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch target, link := strings.CutPrefix(content, "-> "); {
		case strings.HasSuffix(name, "/"):
			err = os.MkdirAll(p, 0o755)
		case link:
			err = os.Symlink(target, p)
		default:
			err = os.WriteFile(p, []byte(content), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func layoutRef(t *testing.T, dir, tag string) Ref {
	t.Helper()
	r, err := ParseRef("oci:" + dir + ":" + tag)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// layerEntries reads the tar headers of the one layer of the image r names.
func layerEntries(t *testing.T, r Ref) (v1.Image, []*tar.Header) {
	t.Helper()
	img, err := openLayout(r)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var hdrs []*tar.Header
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return img, hdrs
		}
		if err != nil {
			t.Fatal(err)
		}
		hdrs = append(hdrs, h)
	}
}

func entryNamed(hdrs []*tar.Header, name string) *tar.Header {
	for _, h := range hdrs {
		if strings.TrimSuffix(h.Name, "/") == name {
			return h
		}
	}
	return nil
}

// A directory becomes a one-layer OCI image: sorted entries, symlinks as
// symlinks (never followed out of the tree), hard links, modes and mtimes
// kept, owners root, sockets and whiteout names left out with a warning,
// the host's platform and the given environment in the config; the store
// pulls and unpacks it.
func TestImportTree(t *testing.T) {
	tree := filepath.Join(t.TempDir(), "rootfs")
	writeTree(t, tree, map[string]string{
		"bin/tool":      "#!/bin/sh\necho tool\n",
		"etc/marker":    "from the tree\n",
		"etc/abs-link":  "-> /etc/passwd",
		"etc/up-link":   "-> ../../../../../outside",
		"host-etc":      "-> /etc",
		"empty/":        "",
		"var/.wh.gone":  "a whiteout name",
		"private/note":  "secret",
		"var/lib/state": "s",
	})
	os.Chmod(filepath.Join(tree, "bin/tool"), 0o755)
	os.Chmod(filepath.Join(tree, "private/note"), 0o600)
	os.Chmod(filepath.Join(tree, "private"), 0o750)
	if err := os.Link(filepath.Join(tree, "etc/marker"), filepath.Join(tree, "etc/marker-hard")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(tree, "var/fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	sock, err := net.Listen("unix", filepath.Join(tree, "var/sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	mtime := time.Date(2024, 5, 6, 7, 8, 9, 500, time.UTC)
	if err := os.Chtimes(filepath.Join(tree, "etc/marker"), mtime, mtime); err != nil {
		t.Fatal(err)
	}

	dst := layoutRef(t, filepath.Join(t.TempDir(), "layout"), "v1")
	var warnings []string
	res, err := ImportPath(context.Background(), tree, dst, ImportOptions{
		Env: []string{"GREETING=hi"}, WorkingDir: "/srv",
		Warn: func(s string) { warnings = append(warnings, s) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ref != "oci:"+dst.Path+":v1" || !strings.HasPrefix(res.Digest, "sha256:") || res.Size == 0 {
		t.Errorf("result %+v", res)
	}
	if len(warnings) != 2 || !strings.Contains(warnings[0], "var/.wh.gone") || !strings.Contains(warnings[1], "var/sock: a socket") {
		t.Errorf("warnings %q, want the whiteout name and the socket", warnings)
	}
	img, hdrs := layerEntries(t, dst)
	var names []string
	for _, h := range hdrs {
		names = append(names, h.Name)
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: owner %d:%d %q:%q, want root's", h.Name, h.Uid, h.Gid, h.Uname, h.Gname)
		}
	}
	want := []string{"bin/", "bin/tool", "empty/", "etc/", "etc/abs-link", "etc/marker", "etc/marker-hard",
		"etc/up-link", "host-etc", "private/", "private/note", "var/", "var/fifo", "var/lib/", "var/lib/state"}
	if !slices.Equal(names, want) {
		t.Errorf("entries\n%q, want\n%q", names, want)
	}
	if res.Entries != len(want) {
		t.Errorf("%d entries reported, want %d", res.Entries, len(want))
	}
	for _, w := range []struct {
		name string
		typ  byte
		link string
		mode int64
	}{
		{"etc/abs-link", tar.TypeSymlink, "/etc/passwd", 0o777},
		{"etc/up-link", tar.TypeSymlink, "../../../../../outside", 0o777},
		{"host-etc", tar.TypeSymlink, "/etc", 0o777},
		{"etc/marker", tar.TypeReg, "", 0o644},
		{"etc/marker-hard", tar.TypeLink, "etc/marker", 0o644},
		{"bin/tool", tar.TypeReg, "", 0o755},
		{"private", tar.TypeDir, "", 0o750},
		{"private/note", tar.TypeReg, "", 0o600},
		{"var/fifo", tar.TypeFifo, "", 0o644},
	} {
		h := entryNamed(hdrs, w.name)
		if h == nil || h.Typeflag != w.typ || h.Linkname != w.link || h.Mode != w.mode {
			t.Errorf("%s: %+v, want type %c link %q mode %o", w.name, h, w.typ, w.link, w.mode)
		}
	}
	if h := entryNamed(hdrs, "etc/marker"); h == nil || !h.ModTime.Equal(mtime.Truncate(time.Second)) || h.Size != 14 {
		t.Errorf("etc/marker: %+v, want mtime %v", h, mtime)
	}

	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIManifestSchema1 || m.Config.MediaType != types.OCIConfigJSON || m.Layers[0].MediaType != types.OCILayer {
		t.Errorf("media types %s %s %s, want OCI's", m.MediaType, m.Config.MediaType, m.Layers[0].MediaType)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH || cf.Config.WorkingDir != "/srv" ||
		!slices.Equal(cf.Config.Env, []string{"PATH=" + DefaultPath, "GREETING=hi"}) {
		t.Errorf("config: %s/%s %+v", cf.OS, cf.Architecture, cf.Config)
	}

	// The store takes it as any layout.
	s := openStore(t)
	got, err := s.Pull(context.Background(), res.Ref, Caps{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != res.Digest {
		t.Errorf("pulled %s, imported %s", got.Digest, res.Digest)
	}
	root, err := s.Root(got, layer.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	tree2 := readTree(t, root)
	for name, want := range map[string]string{"etc/marker": "from the tree\n", "etc/marker-hard": "from the tree\n",
		"etc/abs-link": "-> /etc/passwd", "host-etc": "-> /etc", "empty/": ""} {
		if tree2[name] != want {
			t.Errorf("unpacked %s: %q, want %q", name, tree2[name], want)
		}
	}
	if _, ok := tree2["host-etc/passwd"]; ok {
		t.Error("the symlink out of the tree was followed")
	}
}

// The same tree gives the same digest, imported twice, into another
// layout, or again under the same tag (which then names one image); a
// copy with other mtimes gives the same digest when --mtime fixes them.
func TestImportDeterministic(t *testing.T) {
	dir := t.TempDir()
	tree := filepath.Join(dir, "rootfs")
	files := map[string]string{"a/b/c": "c", "a/d": "-> b/c", "z": "z", "m/": "", "a/b/e": "e"}
	writeTree(t, tree, files)
	digest := func(src string, dst Ref, opts ImportOptions) string {
		t.Helper()
		res, err := ImportPath(context.Background(), src, dst, opts)
		if err != nil {
			t.Fatal(err)
		}
		return res.Digest
	}
	first := digest(tree, layoutRef(t, filepath.Join(dir, "one"), "v1"), ImportOptions{})
	if again := digest(tree, layoutRef(t, filepath.Join(dir, "two"), "v1"), ImportOptions{}); again != first {
		t.Errorf("the same tree imported twice: %s then %s", first, again)
	}
	if again := digest(tree, layoutRef(t, filepath.Join(dir, "one"), "v1"), ImportOptions{}); again != first {
		t.Errorf("re-imported under the same tag: %s then %s", first, again)
	}
	idx, err := layout.ImageIndexFromPath(filepath.Join(dir, "one"))
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := idx.IndexManifest(); len(m.Manifests) != 1 {
		t.Errorf("the layout lists %d images after a re-import, want 1", len(m.Manifests))
	}

	copyTree := filepath.Join(dir, "copy")
	writeTree(t, copyTree, files)
	later := time.Now().Add(-time.Hour)
	filepath.WalkDir(copyTree, func(p string, d os.DirEntry, err error) error {
		return os.Chtimes(p, later, later)
	})
	if other := digest(copyTree, layoutRef(t, filepath.Join(dir, "three"), "v1"), ImportOptions{}); other == first {
		t.Error("a copy with other mtimes has the same digest")
	}
	epoch := time.Unix(1700000000, 0)
	a := digest(tree, layoutRef(t, filepath.Join(dir, "four"), "v1"), ImportOptions{MTime: &epoch})
	b := digest(copyTree, layoutRef(t, filepath.Join(dir, "five"), "v1"), ImportOptions{MTime: &epoch})
	if a != b {
		t.Errorf("with the mtime fixed, a tree and its copy: %s and %s", a, b)
	}
}

// A second tag added to a layout keeps the first; importing over a tag
// moves it, and the blobs only the old image had go.
func TestImportTagsShareLayout(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "layout")
	for _, name := range []string{"one", "two"} {
		writeTree(t, filepath.Join(dir, name), map[string]string{"etc/marker": name + "\n"})
	}
	imp := func(src, tag string) *Imported {
		t.Helper()
		res, err := ImportPath(context.Background(), filepath.Join(dir, src), layoutRef(t, out, tag), ImportOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	v1res := imp("one", "v1")
	v2res := imp("two", "v2")
	for tag, want := range map[string]string{"v1": v1res.Digest, "v2": v2res.Digest} {
		img, err := openLayout(layoutRef(t, out, tag))
		if err != nil {
			t.Fatalf("%s: %v", tag, err)
		}
		if d, _ := img.Digest(); d.String() != want {
			t.Errorf("%s names %s, want %s", tag, d, want)
		}
	}
	blob := func(d string) string { return filepath.Join(out, "blobs", "sha256", strings.TrimPrefix(d, "sha256:")) }
	writeTree(t, filepath.Join(dir, "one"), map[string]string{"etc/more": "more\n"})
	moved := imp("one", "v1")
	if moved.Digest == v1res.Digest {
		t.Fatal("a changed tree gave the same digest")
	}
	img, err := openLayout(layoutRef(t, out, "v1"))
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := img.Digest(); d.String() != moved.Digest {
		t.Errorf("v1 names %s after the re-import, want %s", d, moved.Digest)
	}
	if _, err := openLayout(layoutRef(t, out, "v2")); err != nil {
		t.Errorf("v2 after v1 moved: %v", err)
	}
	for _, gone := range []string{v1res.Digest, v1res.Layer} {
		if fileExists(blob(gone)) {
			t.Errorf("blob %s of the image v1 named before is still there", gone)
		}
	}
	for _, kept := range []string{v2res.Digest, v2res.Layer, moved.Layer} {
		if !fileExists(blob(kept)) {
			t.Errorf("blob %s is gone", kept)
		}
	}
	if leftovers, _ := filepath.Glob(filepath.Join(out, "blobs", "sha256", ".*")); len(leftovers) > 0 {
		t.Errorf("temporary files left: %q", leftovers)
	}
}

// tarArchive makes a tar archive of entries (name → content, as writeTree;
// "hard:T" a hard link to T), compressed by comp ("", "gzip", "zstd").
func tarArchive(t *testing.T, comp string, entries [][2]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.WriteCloser = nopWriteCloser{&buf}
	switch comp {
	case "gzip":
		w = gzip.NewWriter(&buf)
	case "zstd":
		z, err := zstd.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		w = z
	}
	tw := tar.NewWriter(w)
	for _, e := range entries {
		name, content := e[0], e[1]
		h := &tar.Header{Name: name, Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(content)), Uid: 1000, Gid: 1000,
			ModTime: time.Unix(1600000000, 0)}
		if target, ok := strings.CutPrefix(content, "-> "); ok {
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, target, 0
		} else if target, ok := strings.CutPrefix(content, "hard:"); ok {
			h.Typeflag, h.Linkname, h.Size = tar.TypeLink, target, 0
		} else if strings.HasSuffix(name, "/") {
			h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			io.WriteString(tw, content)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// A root filesystem tarball, plain, gzip or zstd: names cleaned ("./x",
// "/x"), owners root, mtimes kept; the same archive gives the same image.
func TestImportTarball(t *testing.T) {
	entries := [][2]string{{"./", ""}, {"./etc/", ""}, {"./etc/marker", "from the tarball\n"},
		{"/etc/absolute", "abs"}, {"etc/hard", "hard:./etc/marker"}, {"./bin/", ""}, {"./bin/sh", "-> busybox"}}
	var digests []string
	for _, comp := range []string{"", "gzip", "zstd"} {
		dir := t.TempDir()
		src := filepath.Join(dir, "rootfs.tar")
		if err := os.WriteFile(src, tarArchive(t, comp, entries), 0o644); err != nil {
			t.Fatal(err)
		}
		dst := layoutRef(t, filepath.Join(dir, "layout"), "")
		res, err := ImportPath(context.Background(), src, dst, ImportOptions{})
		if err != nil {
			t.Fatalf("%q: %v", comp, err)
		}
		if res.Ref != "oci:"+dst.Path+":latest" {
			t.Errorf("ref %s, want the tag latest", res.Ref)
		}
		digests = append(digests, res.Digest)
		_, hdrs := layerEntries(t, layoutRef(t, dst.Path, "latest"))
		var names []string
		for _, h := range hdrs {
			names = append(names, h.Name)
			if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(time.Unix(1600000000, 0)) {
				t.Errorf("%q %s: owner %d:%d mtime %v", comp, h.Name, h.Uid, h.Gid, h.ModTime)
			}
		}
		want := []string{"etc/", "etc/marker", "etc/absolute", "etc/hard", "bin/", "bin/sh"}
		if !slices.Equal(names, want) {
			t.Errorf("%q: entries %q, want %q", comp, names, want)
		}
		if h := entryNamed(hdrs, "etc/hard"); h == nil || h.Typeflag != tar.TypeLink || h.Linkname != "etc/marker" {
			t.Errorf("%q: hard link %+v", comp, h)
		}
	}
	if digests[0] != digests[1] || digests[1] != digests[2] {
		t.Errorf("one archive, compressed three ways, gave %q", digests)
	}
	// From a reader (standard input), with the owners kept.
	dst := layoutRef(t, filepath.Join(t.TempDir(), "layout"), "v1")
	if _, err := ImportTar(context.Background(), bytes.NewReader(tarArchive(t, "gzip", entries)), "standard input",
		dst, ImportOptions{KeepOwners: true}); err != nil {
		t.Fatal(err)
	}
	_, hdrs := layerEntries(t, dst)
	if h := entryNamed(hdrs, "etc/marker"); h == nil || h.Uid != 1000 || h.Gid != 1000 {
		t.Errorf("--keep-owners: %+v", h)
	}
}

// A hostile or broken source is refused (ErrImport) before anything is
// left behind: no layout made, an existing one unchanged, nothing written
// outside it.
func TestImportRefused(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "existing")
	writeTree(t, filepath.Join(dir, "good"), map[string]string{"etc/marker": "good"})
	if _, err := ImportPath(context.Background(), filepath.Join(dir, "good"), layoutRef(t, existing, "v1"), ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	index, err := os.ReadFile(filepath.Join(existing, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	notDir := filepath.Join(dir, "file")
	os.WriteFile(notDir, []byte("x"), 0o644)
	full := filepath.Join(dir, "full")
	writeTree(t, full, map[string]string{"something": "x"})
	text := filepath.Join(dir, "notes.txt")
	os.WriteFile(text, bytes.Repeat([]byte("not a tar archive\n"), 100), 0o644)
	empty := filepath.Join(dir, "empty.tar")
	os.WriteFile(empty, nil, 0o644)
	xz := filepath.Join(dir, "rootfs.tar.xz")
	os.WriteFile(xz, []byte("\xfd7zXZ\x00rest"), 0o644)

	registry, err := ParseRef("python:3")
	if err != nil {
		t.Fatal(err)
	}
	archive := func(name string, entries ...[2]string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, tarArchive(t, "gzip", entries), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name, src string
		dst       Ref
		opts      ImportOptions
		msg       string
	}{
		{"dot-dot entry", archive("evil1.tgz", [2]string{"etc/ok", "ok"}, [2]string{"../escape", "pwned"}), Ref{}, ImportOptions{}, "climbs out"},
		{"dot-dot inside", archive("evil2.tgz", [2]string{"a/../../escape", "pwned"}), Ref{}, ImportOptions{}, "climbs out"},
		{"hard link out", archive("evil3.tgz", [2]string{"etc/passwd", "hard:../../etc/passwd"}), Ref{}, ImportOptions{}, "climbs out"},
		{"hard link to nothing", archive("evil4.tgz", [2]string{"etc/shadow", "hard:etc/nothing"}), Ref{}, ImportOptions{}, "no earlier entry"},
		{"below a symlink", archive("evil5.tgz", [2]string{"etc", "-> /etc"}, [2]string{"etc/cron.d/x", "pwned"}), Ref{}, ImportOptions{}, "below the symlink"},
		{"missing source", filepath.Join(dir, "nope"), Ref{}, ImportOptions{}, "no such file"},
		{"not a tar", text, Ref{}, ImportOptions{}, "neither a directory nor a tar archive"},
		{"empty file", empty, Ref{}, ImportOptions{}, "neither a directory nor a tar archive"},
		{"xz", xz, Ref{}, ImportOptions{}, "xz -d"},
		{"to a registry", filepath.Join(dir, "good"), registry, ImportOptions{}, "oci:/DIR"},
		{"to a file", filepath.Join(dir, "good"), layoutRef(t, notDir, "v1"), ImportOptions{}, "not a directory"},
		{"to a full directory", filepath.Join(dir, "good"), layoutRef(t, full, "v1"), ImportOptions{}, "neither empty nor an OCI image layout"},
		{"bad env", filepath.Join(dir, "good"), Ref{}, ImportOptions{Env: []string{"NOVALUE"}}, "NAME=VALUE"},
		{"relative workdir", filepath.Join(dir, "good"), Ref{}, ImportOptions{WorkingDir: "srv"}, "absolute"},
	}
	for _, c := range cases {
		dsts := map[string]Ref{"into a new layout": layoutRef(t, filepath.Join(dir, "out", "new"), "v2"),
			"into the existing layout": layoutRef(t, existing, "v2")}
		if c.dst != (Ref{}) {
			dsts = map[string]Ref{"": c.dst}
		}
		for into, dst := range dsts {
			_, err := ImportPath(context.Background(), c.src, dst, c.opts)
			if !errors.Is(err, ErrImport) || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("%s %s: %v, want ErrImport saying %q", c.name, into, err, c.msg)
			}
			if fileExists(filepath.Join(dir, "out")) {
				t.Errorf("%s %s: the refused import left %s", c.name, into, filepath.Join(dir, "out"))
				os.RemoveAll(filepath.Join(dir, "out"))
			}
			if now, _ := os.ReadFile(filepath.Join(existing, "index.json")); !bytes.Equal(now, index) {
				t.Errorf("%s %s: the existing layout's index changed", c.name, into)
			}
			if fileExists(filepath.Join(dir, "escape")) || fileExists(filepath.Join(dir, "..", "escape")) {
				t.Errorf("%s %s: wrote an escape file", c.name, into)
			}
		}
	}
	if leftovers, _ := filepath.Glob(filepath.Join(existing, "blobs", "sha256", ".*")); len(leftovers) > 0 {
		t.Errorf("temporary files left in the existing layout: %q", leftovers)
	}
	if entries, _ := os.ReadDir(full); len(entries) != 1 {
		t.Errorf("the full directory was written to: %d entries", len(entries))
	}
}

// A layout written inside the tree it is made of is left out of it; so is
// what a cancelled import had written.
func TestImportLayoutInsideTree(t *testing.T) {
	tree := t.TempDir()
	writeTree(t, tree, map[string]string{"etc/marker": "x"})
	dst := layoutRef(t, filepath.Join(tree, "images", "mine"), "v1")
	res, err := ImportPath(context.Background(), tree, dst, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Skipped) != 1 || !strings.Contains(res.Skipped[0], "images/mine") {
		t.Errorf("skipped %q, want the layout", res.Skipped)
	}
	_, hdrs := layerEntries(t, dst)
	for _, h := range hdrs {
		if strings.HasPrefix(h.Name, "images/mine/") {
			t.Errorf("the layout's own %s is in the layer", h.Name)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out := filepath.Join(t.TempDir(), "cancelled")
	if _, err := ImportPath(ctx, tree, layoutRef(t, out, "v1"), ImportOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled import: %v", err)
	}
	if fileExists(out) {
		t.Error("a cancelled import left its layout")
	}
}
