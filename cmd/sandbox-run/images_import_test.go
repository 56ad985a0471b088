package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/testkit/imagetest"
)

// busyboxTree makes a root filesystem tree under dir: a static busybox
// with sh, cat and ls linked to it (relative symlinks), /etc/marker and
// /tmp; it skips the test without a static busybox.
func busyboxTree(t *testing.T, dir, marker string) {
	t.Helper()
	data, err := os.ReadFile(imagetest.Busybox(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"bin", "etc", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "bin/busybox"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"sh", "cat", "ls"} {
		if err := os.Symlink("busybox", filepath.Join(dir, "bin", a)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "etc/marker"), []byte(marker), 0o644); err != nil {
		t.Fatal(err)
	}
}

// tarTree is a gzip tar archive of the tree under dir, as `tar -C dir -cz .`
// writes one (entries "./bin/", ...).
func tarTree(t *testing.T, dir string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			link, _ = os.Readlink(p)
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h.Name = "./" + filepath.ToSlash(rel)
		if fi.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			tw.Write(data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

// images import makes an image of a directory and of a tarball (a file or
// standard input) that execute --image runs at once: the program sees the
// image's files and none of the host's /usr. The same tree gives the same
// digest; a second tag keeps the first; a hostile tarball is refused with
// nothing written; a tree imported again under its tag is what the next
// run sees; wrong command lines are usage errors.
func TestImagesImport(t *testing.T) {
	dir := t.TempDir()
	tree := filepath.Join(dir, "rootfs")
	busyboxTree(t, tree, "from-the-tree\n")
	archive := filepath.Join(dir, "rootfs.tar.gz")
	if err := os.WriteFile(archive, tarTree(t, tree), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"SANDBOX_RUN_DATA_DIR=" + filepath.Join(dir, "data")}
	out := filepath.Join(dir, "images", "mine")
	imported := func(src, ref, stdin string) string {
		t.Helper()
		r := cliEnv(t, env, stdin, "images", "import", src, ref, "-o", "json")
		var res struct {
			Ref, Digest string
			Entries     int
		}
		if err := json.Unmarshal([]byte(r.stdout), &res); r.code != 0 || err != nil || res.Ref != ref || res.Entries != 8 {
			t.Fatalf("images import %s %s: exit %d %v %q %q", src, ref, r.code, err, r.stdout, r.stderr)
		}
		return res.Digest
	}
	marker := "from-the-tree\n"
	run := func(ref string) {
		t.Helper()
		r := cliEnv(t, env, "", "execute", "-l", "sh", "--image", ref, "--code", "cat /etc/marker; ls /usr 2>/dev/null || echo no-usr")
		if r.code != 0 || r.stdout != marker+"no-usr\n" {
			t.Fatalf("execute --image %s: exit %d stdout %q stderr %q", ref, r.code, r.stdout, r.stderr)
		}
	}

	r := cliEnv(t, env, "", "images", "import", tree, "oci:"+out+":v1")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "oci:"+out+":v1 sha256:") || !strings.Contains(r.stdout, "8 entries") {
		t.Fatalf("images import: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	run("oci:" + out + ":v1")
	fromTree := imported(tree, "oci:"+filepath.Join(dir, "again")+":x", "")
	if again := imported(tree, "oci:"+filepath.Join(dir, "again")+":x", ""); again != fromTree {
		t.Errorf("the same tree imported twice: %s then %s", fromTree, again)
	}
	imported(archive, "oci:"+out+":v2", "")
	run("oci:" + out + ":v2")
	run("oci:" + out + ":v1") // still there
	imported("-", "oci:"+out+":stdin", string(tarTree(t, tree)))
	run("oci:" + out + ":stdin")

	// A hostile tarball: refused, nothing written.
	var evil bytes.Buffer
	tw := tar.NewWriter(&evil)
	tw.WriteHeader(&tar.Header{Name: "etc/ok", Mode: 0o644, Size: 2, Typeflag: tar.TypeReg})
	tw.Write([]byte("ok"))
	tw.WriteHeader(&tar.Header{Name: "../escape", Mode: 0o644, Size: 5, Typeflag: tar.TypeReg})
	tw.Write([]byte("pwned"))
	tw.Close()
	evilPath := filepath.Join(dir, "evil.tar")
	os.WriteFile(evilPath, evil.Bytes(), 0o644)
	r = cliEnv(t, env, "", "images", "import", evilPath, "oci:"+filepath.Join(dir, "evil", "layout")+":v1")
	if r.code != exitUsage || !strings.Contains(r.stderr, "climbs out of the root") {
		t.Errorf("a tarball with ../escape: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	for _, p := range []string{filepath.Join(dir, "evil"), filepath.Join(dir, "escape"), filepath.Join(dir, "evil", "escape")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("the refused import left %s", p)
		}
	}
	index, _ := os.ReadFile(filepath.Join(out, "index.json"))
	if r := cliEnv(t, env, "", "images", "import", evilPath, "oci:"+out+":v1"); r.code != exitUsage {
		t.Errorf("a hostile tarball into an existing layout: exit %d", r.code)
	}
	if now, _ := os.ReadFile(filepath.Join(out, "index.json")); !bytes.Equal(now, index) {
		t.Error("a refused import changed the layout's index")
	}
	run("oci:" + out + ":v1")

	// The tree changed and imported again under its tag: the next run
	// has the new files (the store reads a layout again when it changes).
	marker = "changed\n"
	if err := os.WriteFile(filepath.Join(tree, "etc/marker"), []byte(marker), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := cliEnv(t, env, "", "images", "import", tree, "oci:"+out+":v1"); r.code != 0 {
		t.Fatalf("images import again: exit %d %q", r.code, r.stderr)
	}
	run("oci:" + out + ":v1")

	notTar := filepath.Join(dir, "notes.txt")
	os.WriteFile(notTar, bytes.Repeat([]byte("just text\n"), 100), 0o644)
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"images", "import"}, "wants SOURCE"},
		{[]string{"images", "import", tree}, "wants SOURCE"},
		{[]string{"images", "import", filepath.Join(dir, "nope"), "oci:" + filepath.Join(dir, "x")}, "no such file"},
		{[]string{"images", "import", notTar, "oci:" + filepath.Join(dir, "x")}, "neither a directory nor a tar archive"},
		{[]string{"images", "import", tree, "python:3.12-slim"}, "oci:/DIR"},
		{[]string{"images", "import", tree, "oci:relative/dir"}, "absolute"},
		{[]string{"images", "import", tree, "oci:" + filepath.Join(dir, "x"), "--env", "NOVALUE"}, "NAME=VALUE"},
		{[]string{"images", "import", tree, "oci:" + filepath.Join(dir, "x"), "--mtime", "yesterday"}, "--mtime"},
		{[]string{"images", "ls", "--keep-owners"}, "images import"},
	} {
		r := cliEnv(t, env, "", c.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.msg) {
			t.Errorf("%q: exit %d (want %d) %q, want it to say %q", c.args, r.code, exitUsage, r.stderr, c.msg)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "x")); err == nil {
		t.Error("a refused import left its layout")
	}
}

// importExample is the example of `images import` for docs/IMAGES.md
// ("## Importing images"); TestImagesImportExample runs the docs' block
// once it is there, this one until then.
const importExample = "```console" + `
$ mkdir -p rootfs/bin rootfs/etc rootfs/tmp
$ cp /bin/busybox rootfs/bin/    # a static busybox (Debian, Ubuntu: apt install busybox-static)
$ for a in sh cat ls; do ln -s busybox rootfs/bin/$a; done
$ echo 'built without docker' > rootfs/etc/motd
$ sandbox-run images import rootfs oci:$PWD/my-image:v1
oci:…/my-image:v1 sha256:… (…, 8 entries) in …
$ sandbox-run execute --image oci:$PWD/my-image:v1 -l sh -c 'cat /etc/motd; ls /usr 2>/dev/null || echo no /usr'
built without docker
no /usr
$ tar -C rootfs -czf rootfs.tar.gz . && sandbox-run images import rootfs.tar.gz oci:$PWD/my-image:v2
oci:…/my-image:v2 sha256:… (…, 8 entries) in …
$ sandbox-run execute --image oci:$PWD/my-image:v2 -l sh -c 'cat /etc/motd'
built without docker
` + "```\n"

// TestImagesImportExample runs the console example of `images import`
// (docs/IMAGES.md, "## Importing images") as written, with the host's
// static busybox and tar.
func TestImagesImportExample(t *testing.T) {
	if bb := imagetest.Busybox(t); !sameFile(bb, "/bin/busybox") {
		t.Skipf("the static busybox is %s, not /bin/busybox", bb)
	}
	block := importExample
	if doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "IMAGES.md")); err == nil {
		if _, section, ok := strings.Cut(string(doc), "## Importing images\n"); ok {
			section, _, _ = strings.Cut(section, "\n## ")
			if strings.Contains(section, "```console\n") {
				block = docBlock(t, "docs/IMAGES.md", "## Importing images\n", "console")
			}
		}
	}
	block = strings.TrimPrefix(strings.TrimSuffix(block, "```\n"), "```console\n")
	runConsole(t, t.TempDir(), "", block)
}

func sameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}
