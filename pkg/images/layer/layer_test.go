//go:build linux

package layer

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ent is one tar entry of a test layer.
type ent struct {
	name string
	typ  byte
	mode int64
	body string
	link string
}

func file(name, body string) ent { return ent{name: name, typ: tar.TypeReg, mode: 0o644, body: body} }
func dir(name string) ent        { return ent{name: name, typ: tar.TypeDir, mode: 0o755} }
func symlink(name, to string) ent {
	return ent{name: name, typ: tar.TypeSymlink, mode: 0o777, link: to}
}
func hardlink(name, to string) ent { return ent{name: name, typ: tar.TypeLink, mode: 0o644, link: to} }

var mtime = time.Unix(1_600_000_000, 0)

// tarOf builds an uncompressed tar stream of ents.
func tarOf(t *testing.T, ents ...ent) *bytes.Reader {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.link, ModTime: mtime, Format: tar.FormatPAX}
		if e.typ == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if e.typ == tar.TypeChar || e.typ == tar.TypeBlock {
			h.Devmajor, h.Devminor = 1, 3
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("tar header %q: %v", e.name, err)
		}
		if _, err := io.WriteString(tw, e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return bytes.NewReader(buf.Bytes())
}

// box is a layer directory, base/a/b/root, with a sentinel directory next
// to it, base/a/b/outside, holding files that no layer may touch. Every
// escape a test tries (".." and relative symlinks climb at most three
// levels, absolute targets name the sentinel) lands beneath base, so a
// broken Apply damages nothing but the test's own directory.
type box struct {
	t               *testing.T
	base, dir, out  string
	before, passwd0 string
}

func newBox(t *testing.T) *box {
	t.Helper()
	base := t.TempDir()
	nest := filepath.Join(base, "a", "b")
	b := &box{t: t, base: base, dir: filepath.Join(nest, "root"), out: filepath.Join(nest, "outside")}
	for _, d := range []string{b.dir, b.out, filepath.Join(b.out, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range map[string]string{"f": "host file", "keep": "host keep", "sub/g": "host g", "x": "host x"} {
		if err := os.WriteFile(filepath.Join(b.out, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b.before = b.outside()
	b.passwd0 = nlink("/etc/passwd")
	return b
}

// apply applies a layer of ents to the box's directory.
func (b *box) apply(ents ...ent) (Stats, error) {
	b.t.Helper()
	return Apply(b.dir, tarOf(b.t, ents...), Limits{})
}

// mustApply applies a layer that must apply cleanly.
func (b *box) mustApply(ents ...ent) Stats {
	b.t.Helper()
	st, err := b.apply(ents...)
	if err != nil {
		b.t.Fatalf("apply: %v", err)
	}
	return st
}

// refused applies a layer that must fail with an error matching want,
// and checks that nothing outside the directory changed.
func (b *box) refused(want error, ents ...ent) {
	b.t.Helper()
	_, err := b.apply(ents...)
	if err == nil {
		b.t.Fatalf("layer applied, want %v", want)
	}
	if !errors.Is(err, want) {
		b.t.Fatalf("error %v, want %v", err, want)
	}
	var ee *EntryError
	if !errors.As(err, &ee) {
		b.t.Fatalf("error %v is not an *EntryError", err)
	}
	b.untouched()
}

// untouched checks that everything beneath base but the layer directory,
// and the link count of the host's /etc/passwd, are as they were.
func (b *box) untouched() {
	b.t.Helper()
	if now := b.outside(); now != b.before {
		b.t.Fatalf("outside the directory changed:\nbefore:\n%s\nafter:\n%s", b.before, now)
	}
	if now := nlink("/etc/passwd"); now != b.passwd0 {
		b.t.Fatalf("/etc/passwd changed: %s -> %s", b.passwd0, now)
	}
}

// outside describes the tree beneath base without the layer directory
// (types, modes, links, contents, times).
func (b *box) outside() string {
	b.t.Helper()
	var lines []string
	err := filepath.WalkDir(b.base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == b.dir {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(b.base, p)
		lines = append(lines, rel+" "+statString(p))
		return nil
	})
	if err != nil {
		b.t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// nlink describes the link count of p (not its content or times, which a
// busy host may change).
func nlink(p string) string {
	fi, err := os.Stat(p)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprint(fi.Sys().(*syscall.Stat_t).Nlink)
}

// statString describes the file p without following it.
func statString(p string) string {
	fi, err := os.Lstat(p)
	if err != nil {
		return err.Error()
	}
	s := fmt.Sprintf("%v nlink=%d size=%d mtime=%d", fi.Mode(), fi.Sys().(*syscall.Stat_t).Nlink, fi.Size(), fi.ModTime().UnixNano())
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		to, _ := os.Readlink(p)
		s += " -> " + to
	case fi.Mode().IsRegular():
		data, _ := os.ReadFile(p)
		s += fmt.Sprintf(" %q", data)
	}
	return s
}

// in is the path of rel in the layer directory.
func (b *box) in(rel string) string { return filepath.Join(b.dir, rel) }

// content checks that rel is a regular file holding body.
func (b *box) content(rel, body string) {
	b.t.Helper()
	fi, err := os.Lstat(b.in(rel))
	if err != nil {
		b.t.Fatalf("%s: %v", rel, err)
	}
	if !fi.Mode().IsRegular() {
		b.t.Fatalf("%s: %v, not a regular file", rel, fi.Mode())
	}
	if data, _ := os.ReadFile(b.in(rel)); string(data) != body {
		b.t.Fatalf("%s holds %q, want %q", rel, data, body)
	}
}

// missing checks that rel is not in the layer directory.
func (b *box) missing(rels ...string) {
	b.t.Helper()
	for _, rel := range rels {
		if _, err := os.Lstat(b.in(rel)); !errors.Is(err, fs.ErrNotExist) {
			b.t.Fatalf("%s: exists (%v)", rel, err)
		}
	}
}

// linkTo checks that rel is a symlink to target.
func (b *box) linkTo(rel, target string) {
	b.t.Helper()
	if to, err := os.Readlink(b.in(rel)); err != nil || to != target {
		b.t.Fatalf("%s: link to %q (%v), want %q", rel, to, err, target)
	}
}

// mode checks the mode of rel.
func (b *box) mode(rel string, want fs.FileMode) {
	b.t.Helper()
	fi, err := os.Lstat(b.in(rel))
	if err != nil {
		b.t.Fatal(err)
	}
	if fi.Mode() != want {
		b.t.Fatalf("%s: mode %v, want %v", rel, fi.Mode(), want)
	}
}

// TestNormalLayer: files, directories, symlinks and hard links are made
// as the layer says, with their permission bits and file mtimes, and
// counted.
func TestNormalLayer(t *testing.T) {
	b := newBox(t)
	st := b.mustApply(
		dir("./"),
		dir("etc/"),
		ent{name: "etc/shadow", typ: tar.TypeReg, mode: 0o640, body: "secret"},
		file("etc/hostname", "box\n"),
		ent{name: "usr/bin/", typ: tar.TypeDir, mode: 0o711},
		ent{name: "usr/bin/tool", typ: tar.TypeReg, mode: 0o755, body: "#!/bin/sh\n"},
		hardlink("usr/bin/tool2", "/usr/bin/tool"),
		hardlink("usr/bin/tool3", "./usr/../usr/bin/tool"),
		symlink("bin", "usr/bin"),
		symlink("etc/abs", "/etc/hostname"),
		symlink("usr/bin/up", "../../../.."),
		file("/opt/abs/file", "rooted"),
		file("empty", ""),
	)
	want := Stats{Files: 5, Dirs: 3, Symlinks: 3, Hardlinks: 2, Bytes: int64(len("secret") + len("box\n") + len("#!/bin/sh\n") + len("rooted"))}
	if st != want {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
	b.content("etc/shadow", "secret")
	b.mode("etc/shadow", 0o640)
	b.content("etc/hostname", "box\n")
	b.mode("usr/bin", fs.ModeDir|0o711)
	b.mode("usr/bin/tool", 0o755)
	b.mode("opt", fs.ModeDir|0o755) // made for its child
	b.content("opt/abs/file", "rooted")
	b.content("empty", "")
	b.linkTo("bin", "usr/bin")
	b.linkTo("etc/abs", "/etc/hostname")
	b.linkTo("usr/bin/up", "../../../..")
	for _, name := range []string{"usr/bin/tool2", "usr/bin/tool3"} {
		a, _ := os.Stat(b.in("usr/bin/tool"))
		l, _ := os.Lstat(b.in(name))
		if l == nil || !os.SameFile(a, l) {
			t.Fatalf("%s is not a hard link of usr/bin/tool", name)
		}
	}
	if fi, _ := os.Lstat(b.in("etc/hostname")); !fi.ModTime().Equal(mtime) {
		t.Fatalf("mtime %v, want %v", fi.ModTime(), mtime)
	}
	b.untouched()
}

// TestEmptyAndTruncated: an empty stream is an empty layer; a truncated
// one is an error.
func TestEmptyAndTruncated(t *testing.T) {
	b := newBox(t)
	if st, err := Apply(b.dir, bytes.NewReader(nil), Limits{}); err != nil || st != (Stats{}) {
		t.Fatalf("empty stream: %+v %v", st, err)
	}
	whole, _ := io.ReadAll(tarOf(t, file("a", strings.Repeat("x", 2000))))
	if _, err := Apply(b.dir, bytes.NewReader(whole[:1200]), Limits{}); err == nil {
		t.Fatal("truncated stream applied")
	}
	if _, err := Apply(filepath.Join(b.base, "nonexistent"), tarOf(t, file("a", "")), Limits{}); err == nil {
		t.Fatal("missing directory accepted")
	}
}

// TestReplace: a later entry, of this layer or a later one, replaces what
// is at its path, whatever its type; a directory over a directory only
// sets its mode.
func TestReplace(t *testing.T) {
	b := newBox(t)
	b.mustApply(
		file("a", "one"), file("a", "two"),
		dir("d"), file("d/x", "x"), dir("d/sub"), file("d/sub/y", "y"),
		file("f2d", "file"),
		file("f2l", "file"),
		symlink("l2f", filepath.Join(b.out, "f")),
		symlink("l2d", b.out),
		dir("keep"), file("keep/old", "old"),
	)
	b.content("a", "two")
	b.mustApply(
		file("d", "now a file"), // the tree goes
		dir("f2d"), file("f2d/in", "in"),
		symlink("f2l", "/nowhere"),
		file("l2f", "replaces the link"), // not written through it
		dir("l2d"), file("l2d/in", "in"),
		ent{name: "keep", typ: tar.TypeDir, mode: 0o750},
	)
	b.content("d", "now a file")
	b.content("f2d/in", "in")
	b.linkTo("f2l", "/nowhere")
	b.content("l2f", "replaces the link")
	b.content("l2d/in", "in")
	b.mode("keep", fs.ModeDir|0o750)
	b.content("keep/old", "old")
	b.untouched()
}

// TestWhiteout: across two layers, whiteouts remove a file and a whole
// directory tree (with a symlink to outside in it, not followed), and are
// not created themselves; a whiteout of something missing is harmless.
func TestWhiteout(t *testing.T) {
	b := newBox(t)
	b.mustApply(
		file("a/f", "f"), file("a/g", "g"),
		file("d/y", "y"), file("d/sub/x", "x"), symlink("d/out", b.out), symlink("d/outf", filepath.Join(b.out, "f")),
		ent{name: "d/sub/ro/", typ: tar.TypeDir, mode: 0o500}, file("d/sub/ro/z", "z"),
	)
	st := b.mustApply(file("a/.wh.f", ""), file(".wh.d", ""), file(".wh.none", ""), file("nodir/.wh.none", ""))
	if st.Whiteouts != 4 || st.Files != 0 {
		t.Fatalf("stats %+v", st)
	}
	b.missing("a/f", "a/.wh.f", "d", ".wh.d", "nodir")
	b.content("a/g", "g")
	b.untouched()
}

// TestWhiteoutSparesThisLayer: a whiteout removes only what lower layers
// wrote, even when this layer's entry at that path comes first.
func TestWhiteoutSparesThisLayer(t *testing.T) {
	b := newBox(t)
	b.mustApply(file("a/f", "lower"), file("d/old", "old"))
	b.mustApply(file("a/f", "upper"), file("a/.wh.f", ""), file("d/new", "new"), file(".wh.d", ""))
	b.content("a/f", "upper")
	b.content("d/new", "new")
	b.missing("d/old")
}

// TestOpaque: an opaque directory loses what the lower layers put in it,
// at any depth, and keeps this layer's entries, before and after the
// marker.
func TestOpaque(t *testing.T) {
	b := newBox(t)
	b.mustApply(
		file("d/old1", "old"), file("d/sub/old2", "old"), file("d/sub/deep/old3", "old"),
		file("d/keep", "lower"), symlink("d/outlink", b.out), file("e/untouched", "e"),
	)
	st := b.mustApply(
		dir("d/"),
		file("d/new1", "new1"),
		file("d/sub/new2", "new2"),
		file("d/keep", "upper"),
		file("d/.wh..wh..opq", ""),
		file("d/new3", "new3"),
		file("d/sub2/new4", "new4"),
		file("fresh/.wh..wh..opq", ""), // a new opaque directory is made
	)
	if st.Whiteouts != 2 {
		t.Fatalf("stats %+v", st)
	}
	b.content("d/new1", "new1")
	b.content("d/sub/new2", "new2")
	b.content("d/keep", "upper")
	b.content("d/new3", "new3")
	b.content("d/sub2/new4", "new4")
	b.content("e/untouched", "e")
	b.missing("d/old1", "d/sub/old2", "d/sub/deep", "d/outlink", "d/.wh..wh..opq", "fresh/.wh..wh..opq")
	if fi, err := os.Lstat(b.in("fresh")); err != nil || !fi.IsDir() {
		t.Fatalf("fresh: %v", err)
	}
	b.untouched()
}

// TestWhiteoutOfSymlinkToOutside: whiting out (or making opaque the
// directory of) a symlink to a directory outside removes the link only.
func TestWhiteoutOfSymlinkToOutside(t *testing.T) {
	b := newBox(t)
	b.mustApply(symlink("s", b.out), symlink("sf", filepath.Join(b.out, "f")), symlink("o/s", b.out))
	b.mustApply(file(".wh.s", ""), file(".wh.sf", ""), file("o/.wh..wh..opq", ""))
	b.missing("s", "sf", "o/s")
	b.untouched()
}

// TestEscapeDotDot: a ".." that climbs above the root is refused, for
// every kind of entry; ".." within the layer is cleaned.
func TestEscapeDotDot(t *testing.T) {
	for _, e := range []ent{
		file("../x", "escaped"),
		file("a/../../x", "escaped"),
		file("a/b/../../../outside/x", "escaped"),
		dir("../outside/newdir"),
		symlink("../outside/newlink", "/"),
		hardlink("../outside/newhard", "a"),
		file("./../outside/x", "escaped"),
	} {
		t.Run(e.name, func(t *testing.T) {
			b := newBox(t)
			b.refused(ErrEscape, file("a", "a"), e)
		})
	}
	b := newBox(t)
	b.mustApply(file("a/b/../c", "c"))
	b.content("a/c", "c")
}

// TestAbsoluteRooted: an absolute path is rooted at the directory.
func TestAbsoluteRooted(t *testing.T) {
	b := newBox(t)
	b.mustApply(file("/etc/x", "rooted"), file("//etc//y", "rooted"))
	b.content("etc/x", "rooted")
	b.content("etc/y", "rooted")
	b.untouched()
}

// TestEscapeThroughSymlink: no entry is written, linked or whited out
// through a symlinked parent, whatever the link's target and whichever
// layer made it.
func TestEscapeThroughSymlink(t *testing.T) {
	through := []ent{
		file("l/f", "escaped"),
		file("l/newname", "escaped"),
		file("l/new/deeper", "escaped"),
		dir("l/d"),
		symlink("l/s", "/"),
		hardlink("l/h", "g"),
		file("l/.wh.f", ""),
		file("l/.wh.keep", ""),
		file("l/sub/.wh.g", ""),
		file("l/.wh..wh..opq", ""),
		file("l/sub/.wh..wh..opq", ""),
	}
	// "" is the sentinel's absolute path; "../../.." is base.
	for _, target := range []string{"", "../outside", "../../..", "."} {
		for _, sameLayer := range []bool{true, false} {
			for _, e := range through {
				t.Run(fmt.Sprintf("%s/%v/%s", target, sameLayer, e.name), func(t *testing.T) {
					b := newBox(t)
					to := target
					if to == "" {
						to = b.out
					}
					link := symlink("l", to)
					if sameLayer {
						b.refused(ErrSymlinkParent, file("g", "g"), link, e)
					} else {
						b.mustApply(file("g", "g"), link)
						b.refused(ErrSymlinkParent, e)
					}
				})
			}
		}
	}
}

// TestEscapeFileReplacedBySymlink: a file that a later entry (of this
// layer or the next) turns into a symlink is not written through.
func TestEscapeFileReplacedBySymlink(t *testing.T) {
	b := newBox(t)
	b.refused(ErrSymlinkParent, file("l", "file"), symlink("l", b.out), file("l/f", "escaped"))
	b = newBox(t)
	b.mustApply(dir("l"), file("l/x", "x"))
	b.refused(ErrSymlinkParent, symlink("l", b.out), file("l/x", "escaped"))
	b = newBox(t)
	b.mustApply(file("l", "file"))
	b.refused(ErrSymlinkParent, symlink("l", "../outside"), dir("l/sub"))
}

// TestHardlinkEscapes: a hard link must name a regular file inside the
// directory reached without symlinks: not the host's /etc/passwd, not
// through a symlinked parent, not a symlink, not a directory.
func TestHardlinkEscapes(t *testing.T) {
	cases := []struct {
		name  string
		lower []ent
		link  ent
		want  error
	}{
		{"rooted /etc/passwd", nil, hardlink("p", "/etc/passwd"), ErrBadLink},
		{"dotdot /etc/passwd", nil, hardlink("p", "../../../../../../etc/passwd"), ErrEscape},
		{"dotdot outside", nil, hardlink("p", "../outside/f"), ErrEscape},
		{"symlinked parent", []ent{symlink("s", "OUT")}, hardlink("p", "s/f"), ErrSymlinkParent},
		{"symlinked parent relative", []ent{symlink("s", "../outside")}, hardlink("p", "s/f"), ErrBadLink},
		{"to a symlink", []ent{symlink("ls", "OUT/f")}, hardlink("p", "ls"), ErrBadLink},
		{"to a symlink to passwd", []ent{symlink("ls", "/etc/passwd")}, hardlink("p", "ls"), ErrBadLink},
		{"to a directory", []ent{dir("d")}, hardlink("p", "d"), ErrBadLink},
		{"to the root", nil, hardlink("p", "/"), ErrBadLink},
		{"missing", nil, hardlink("p", "nothing"), ErrBadLink},
	}
	for _, c := range cases {
		for _, sameLayer := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/%v", c.name, sameLayer), func(t *testing.T) {
				b := newBox(t)
				lower := make([]ent, len(c.lower))
				for i, e := range c.lower {
					e.link = strings.Replace(e.link, "OUT", b.out, 1)
					lower[i] = e
				}
				if sameLayer {
					b.refused(c.want, append(lower, c.link)...)
				} else {
					b.mustApply(lower...)
					b.refused(c.want, c.link)
				}
				b.missing("p")
			})
		}
	}
	// Within the directory, /etc/passwd is the layer's own.
	b := newBox(t)
	b.mustApply(file("etc/passwd", "root:x:0:0::/root:/bin/sh\n"), hardlink("p", "/etc/passwd"))
	b.content("p", "root:x:0:0::/root:/bin/sh\n")
	b.untouched()
}

// TestWhiteoutEscapes: a whiteout never reaches above the root.
func TestWhiteoutEscapes(t *testing.T) {
	for _, e := range []ent{
		file("../.wh.x", ""),
		file("../outside/.wh.x", ""),
		file("a/../../outside/.wh.x", ""),
		file("a/.wh...", ""),
		file(".wh...", ""),
		file("../.wh..wh..opq", ""),
		file("../outside/.wh..wh..opq", ""),
	} {
		t.Run(e.name, func(t *testing.T) {
			b := newBox(t)
			b.mustApply(file("a/x", "x"), file("x", "x"))
			b.refused(ErrEscape, e)
			b.content("a/x", "x")
			b.content("x", "x")
		})
	}
	b := newBox(t)
	b.refused(ErrBadEntry, file("a/.wh.", ""))
	b.refused(ErrBadEntry, file("a/.wh..", ""))
}

// TestSkipped: devices, FIFOs and unknown types are not created, nor are
// hard links to them; they are counted.
func TestSkipped(t *testing.T) {
	b := newBox(t)
	b.mustApply(file("dev/null", "lower file"))
	st := b.mustApply(
		ent{name: "dev/null", typ: tar.TypeChar, mode: 0o666},
		ent{name: "dev/sda", typ: tar.TypeBlock, mode: 0o660},
		ent{name: "fifo", typ: tar.TypeFifo, mode: 0o644},
		ent{name: "cont", typ: tar.TypeCont, mode: 0o644},
		ent{name: "weird", typ: 'Z', mode: 0o644},
		hardlink("null2", "dev/null"),
		file("a/.wh..wh.plnk", ""),
		ent{name: ".", typ: tar.TypeFifo, mode: 0o644},
	)
	if st.Skipped != 8 || st.Files+st.Dirs+st.Symlinks+st.Hardlinks != 0 {
		t.Fatalf("stats %+v", st)
	}
	b.missing("dev/sda", "fifo", "cont", "weird", "null2", "a")
	b.content("dev/null", "lower file") // left as it was
	b.untouched()
}

// TestModes: permission bits are kept, setuid and setgid dropped, sticky
// kept on directories only, directories stay u+rwx; the umask plays no
// part.
func TestModes(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	b := newBox(t)
	b.mustApply(
		ent{name: "suid", typ: tar.TypeReg, mode: 0o4755, body: "x"},
		ent{name: "sgid", typ: tar.TypeReg, mode: 0o2711},
		ent{name: "sticky", typ: tar.TypeReg, mode: 0o1644},
		ent{name: "ro", typ: tar.TypeReg, mode: 0o444},
		ent{name: "none", typ: tar.TypeReg, mode: 0},
		ent{name: "tmp/", typ: tar.TypeDir, mode: 0o1777},
		ent{name: "sgiddir/", typ: tar.TypeDir, mode: 0o2775},
		ent{name: "rodir/", typ: tar.TypeDir, mode: 0o555},
		file("rodir/f", "f"),
		file("implicit/f", "f"),
	)
	b.mode("suid", 0o755)
	b.mode("sgid", 0o711)
	b.mode("sticky", 0o644)
	b.mode("ro", 0o444)
	b.mode("none", 0)
	b.mode("tmp", fs.ModeDir|fs.ModeSticky|0o777)
	b.mode("sgiddir", fs.ModeDir|0o775)
	b.mode("rodir", fs.ModeDir|0o755)
	b.mode("implicit", fs.ModeDir|0o755)
	b.content("rodir/f", "f")
	// A later layer can still remove from and add to the read-only
	// directory.
	b.mustApply(file("rodir/.wh.f", ""), file("rodir/g", "g"))
	b.missing("rodir/f")
	b.content("rodir/g", "g")
}

// zeros is an endless source of zeros that counts what is read.
type zeros struct{ read int64 }

func (z *zeros) Read(p []byte) (int, error) {
	clear(p)
	z.read += int64(len(p))
	return len(p), nil
}

// duSize is the size of the regular files beneath dir.
func duSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			fi, _ := d.Info()
			n += fi.Size()
		}
		return nil
	})
	return n
}

// TestBomb: a file that declares 10 GiB, fed from a generator, is refused
// with a *LimitError before anything is written, and without reading its
// content.
func TestBomb(t *testing.T) {
	b := newBox(t)
	var hdr bytes.Buffer
	tw := tar.NewWriter(&hdr)
	if err := tw.WriteHeader(&tar.Header{Name: "zeros", Typeflag: tar.TypeReg, Mode: 0o644, Size: 10 << 30}); err != nil {
		t.Fatal(err)
	}
	gen := &zeros{}
	start := time.Now()
	_, err := Apply(b.dir, io.MultiReader(&hdr, io.LimitReader(gen, 10<<30)), Limits{MaxBytes: 1 << 20})
	var le *LimitError
	if !errors.As(err, &le) || le.Entries || le.Limit != 1<<20 {
		t.Fatalf("error %v, want a byte *LimitError", err)
	}
	if err.Error() != "layer unpacks to more than 1 MiB" {
		t.Fatalf("message %q", err)
	}
	if gen.read > 2<<20 || time.Since(start) > 5*time.Second {
		t.Fatalf("read %d bytes of the bomb in %v", gen.read, time.Since(start))
	}
	// The declared size is over the limit: nothing is even created.
	if n := duSize(t, b.dir); n != 0 {
		t.Fatalf("%d bytes written", n)
	}
	b.missing("zeros")
	if msg := (&LimitError{Limit: DefaultMaxBytes}).Error(); msg != "layer unpacks to more than 8 GiB" {
		t.Fatalf("default message %q", msg)
	}
}

// TestBombManyFiles: the byte limit is over the whole layer: the file
// that would exceed it is not written.
func TestBombManyFiles(t *testing.T) {
	b := newBox(t)
	var ents []ent
	for i := range 8 {
		ents = append(ents, file(fmt.Sprintf("f%d", i), strings.Repeat("z", 300<<10)))
	}
	st, err := Apply(b.dir, tarOf(t, ents...), Limits{MaxBytes: 1 << 20})
	var le *LimitError
	if !errors.As(err, &le) || le.Entries {
		t.Fatalf("error %v, want a byte *LimitError", err)
	}
	if st.Files != 3 || st.Bytes != 3*300<<10 {
		t.Fatalf("stats %+v", st)
	}
	if n := duSize(t, b.dir); n > 1<<20 {
		t.Fatalf("%d bytes written", n)
	}
}

// TestBudgetWriter: a write that would pass the byte limit writes nothing.
func TestBudgetWriter(t *testing.T) {
	a := &applier{lim: Limits{MaxBytes: 10}}
	var out bytes.Buffer
	w := budgetWriter{&out, a}
	if n, err := w.Write([]byte("12345678")); n != 8 || err != nil {
		t.Fatal(n, err)
	}
	n, err := w.Write([]byte("abc"))
	var le *LimitError
	if n != 0 || !errors.As(err, &le) || out.String() != "12345678" || a.stats.Bytes != 8 {
		t.Fatalf("%d %v %q %d", n, err, out.String(), a.stats.Bytes)
	}
}

// TestMaxEntries: the entry limit counts headers, and stops at the first
// one over it.
func TestMaxEntries(t *testing.T) {
	b := newBox(t)
	var ents []ent
	for i := range 10 {
		ents = append(ents, file(fmt.Sprintf("f%d", i), "x"))
	}
	st, err := Apply(b.dir, tarOf(t, ents...), Limits{MaxEntries: 5})
	var le *LimitError
	if !errors.As(err, &le) || !le.Entries || le.Limit != 5 {
		t.Fatalf("error %v, want an entry *LimitError", err)
	}
	if err.Error() != "layer has more than 5 entries" {
		t.Fatalf("message %q", err)
	}
	names, _ := os.ReadDir(b.dir)
	if st.Files != 5 || len(names) != 5 {
		t.Fatalf("stats %+v, %d files", st, len(names))
	}
}

// TestPathLimits: paths longer than 4096 bytes or deeper than 256
// components are refused, as names, hard link targets and symlink
// targets; 256 components are fine.
func TestPathLimits(t *testing.T) {
	b := newBox(t)
	deep := strings.Repeat("a/", MaxPathDepth)
	b.mustApply(file(deep+"../f", "deep")) // 256 components after cleaning
	b.content(deep[:len(deep)-1]+"/../f", "deep")
	long := strings.Repeat("b", 200) + "/"
	for _, e := range []ent{
		file(deep+"f", "too deep"),
		file(strings.Repeat(long, 21)+"f", "too long"),
		hardlink("h", deep+"f"),
		symlink("s", strings.Repeat("c", MaxPathLen+1)),
	} {
		b.refused(ErrPathTooLong, e)
	}
	b.missing("h", "s", "bbb")
}

// TestRootEntries: an entry for the root directory changes nothing; a
// non-directory entry for it is refused.
func TestRootEntries(t *testing.T) {
	b := newBox(t)
	if err := os.Chmod(b.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	st := b.mustApply(dir("."), dir("/"), dir("./"))
	if st.Dirs != 3 {
		t.Fatalf("stats %+v", st)
	}
	if fi, _ := os.Stat(b.dir); fi.Mode().Perm() != 0o700 {
		t.Fatalf("root mode %v", fi.Mode())
	}
	b.refused(ErrBadEntry, file("/.", "x"))
	b.refused(ErrBadEntry, symlink("a/..", "/"))
	b.refused(ErrBadEntry, symlink("empty", ""))
}
