package executor

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/sandbox-run/sandbox-run/internal/testkit/imagetest"
	"github.com/sandbox-run/sandbox-run/pkg/images"
	"github.com/sandbox-run/sandbox-run/pkg/images/registry"
)

// ---------------------------------------------------------------------------
// Test images (built with internal/testkit/imagetest)
// ---------------------------------------------------------------------------

// imageMarker is the content of /etc/image-marker, a file only the test
// images have.
const imageMarker = "only-in-the-test-image-7f3a9c"

// busyboxConfig is the config of the busybox test image: a PATH of its
// own, a variable, and HOME, USER, TMPDIR, User and WorkingDir that the
// sandbox must not take.
var busyboxConfig = v1.Config{
	Env:        []string{"PATH=/custom/bin:/bin", "IMAGE_VAR=from-the-image", "HOME=/root", "USER=root", "TMPDIR=/var/tmp"},
	User:       "0:0",
	WorkingDir: "/etc",
}

// busyboxImage is imagetest's busybox system (the host's static busybox
// with its applets as absolute symlinks, as in alpine) with
// /etc/image-marker and /custom/bin/imgtool, a script found only through
// the image's PATH, and busyboxConfig.
func busyboxImage(t *testing.T) v1.Image {
	t.Helper()
	return imagetest.ImageConfig(t, busyboxConfig, imagetest.Layer(t, append(imagetest.BusyboxFiles(t),
		imagetest.File{Name: "etc/image-marker", Data: []byte(imageMarker + "\n")},
		imagetest.File{Name: "custom/bin/imgtool", Data: []byte("#!/bin/sh\necho imgtool-ran\n"), Mode: 0o755})...))
}

// layoutRef writes img as the only image of a new OCI layout, untagged,
// and returns its reference, oci:DIR.
func layoutRef(t testing.TB, img v1.Image) string {
	t.Helper()
	return imagetest.WriteLayout(t, filepath.Join(t.TempDir(), "layout"), img, "")
}

// imageExecutor is an executor of its own (its image store under a new
// data dir) on the shared engine; cacheDir "" is a new one too, so that
// nothing is remembered from other runs.
func imageExecutor(t *testing.T, cacheDir string) *Executor {
	t.Helper()
	if cacheDir == "" {
		cacheDir = t.TempDir()
	}
	x, err := New(Config{DataDir: t.TempDir(), CacheDir: cacheDir, Engine: testExec.engine, CompileCacheBytes: -1, ImageRegistry: registry.Fetch})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// executeErr runs req on x, expecting a refusal (an error and no result).
func executeErr(t *testing.T, x *Executor, req *Request) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := x.Execute(ctx, req)
	if err == nil {
		t.Fatalf("Execute(%s, image %q) succeeded: %s", req.Language, req.Image, describe(res))
	}
	if res != nil {
		t.Errorf("Execute(%s, image %q) returned a result with its error %v: %s", req.Language, req.Image, err, describe(res))
	}
	return err
}

// kv reads the "key=value" lines of out.
func kv(out string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = v
		}
	}
	return m
}

var sha256Digest = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// ---------------------------------------------------------------------------
// Runs in images
// ---------------------------------------------------------------------------

// imageProbe reports what a program sees of its root, environment and
// identity, one "key=value" a line.
const imageProbe = `echo "marker=$(cat /etc/image-marker)"
for p in /usr/bin/python3 /etc/debian_version /usr /lib; do
  if [ -e "$p" ]; then echo "visible $p=yes"; else echo "visible $p=no"; fi
done
echo "var=$IMAGE_VAR"
echo "path=$PATH"
echo "tool=$(imgtool)"
echo "home=$HOME"
echo "user=$USER"
echo "tmpdir=$TMPDIR"
echo "pwd=$(pwd)"
echo "uid=$(id -u)"
for d in / /bin /etc /custom/bin /work /tmp; do
  if touch "$d/probe" 2>/dev/null; then echo "writable $d=yes"; else echo "writable $d=no"; fi
done
echo tmp-data > /tmp/t.txt && echo "tmpread=$(cat /tmp/t.txt)"
echo from-the-program > /work/out.txt
`

// A run in an OCI layout image has the image's root, not the host's; the
// image's environment under the sandbox's own HOME, USER and TMPDIR; the
// sandbox's working directory and user, not the image config's; a
// read-only root with /work and /tmp writable.
func TestImageLayoutRun(t *testing.T) {
	img := busyboxImage(t)
	ref := layoutRef(t, img)
	x := imageExecutor(t, "")
	res := executeWith(t, x, &Request{Language: "sh", Image: ref, Code: []byte(imageProbe)})
	if res.Status != StatusCompleted {
		t.Fatalf("run in the image: %s", describe(res))
	}
	got := kv(res.Stdout)
	want := map[string]string{
		"marker":                      imageMarker,
		"visible /usr/bin/python3":    "no",
		"visible /etc/debian_version": "no",
		"visible /usr":                "no",
		"visible /lib":                "no",
		"var":                         "from-the-image",
		"path":                        "/custom/bin:/bin",
		"tool":                        "imgtool-ran",
		"home":                        "/tmp",
		"user":                        "sandbox",
		"tmpdir":                      "/tmp",
		"pwd":                         "/work",
		"writable /":                  "no",
		"writable /bin":               "no",
		"writable /etc":               "no",
		"writable /custom/bin":        "no",
		"writable /work":              "yes",
		"writable /tmp":               "yes",
		"tmpread":                     "tmp-data",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	// The host paths probed must exist on the host for "no" to mean
	// anything.
	for _, p := range []string{"/usr/bin/python3", "/etc/debian_version", "/usr", "/lib"} {
		if _, err := os.Stat(p); err != nil {
			t.Logf("%s is not on this host either: its check above proves nothing", p)
		}
	}
	if uid, ok := got["uid"]; !ok || uid == "" || uid == "0" {
		t.Errorf("uid = %q, want the sandbox's unprivileged user (the image config says 0)", uid)
	}
	if string(res.OutputFiles["out.txt"]) != "from-the-program\n" {
		t.Errorf("output files: %v", keys(res.OutputFiles))
	}
	canon, err := images.ParseRef(ref)
	if err != nil {
		t.Fatal(err)
	}
	if res.Image != canon.String() {
		t.Errorf("Result.Image = %q, want %q", res.Image, canon.String())
	}
	if !sha256Digest.MatchString(res.ImageDigest) {
		t.Errorf("Result.ImageDigest = %q, want sha256: and 64 hex digits", res.ImageDigest)
	}
	if want := imagetest.Digest(t, img); res.ImageDigest != want {
		t.Errorf("Result.ImageDigest = %q, want the image's %q", res.ImageDigest, want)
	}
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
	}
}

// Two references to one image (the same digest: two layouts, or two
// tags) each run under their own name: the result names the reference
// the request gave, not the first one that brought the image here.
func TestImageSameDigestTwoRefs(t *testing.T) {
	img := busyboxImage(t)
	x := imageExecutor(t, "")
	for _, ref := range []string{layoutRef(t, img), layoutRef(t, img)} {
		res := executeWith(t, x, &Request{Language: "sh", Image: ref, Code: []byte("cat /etc/image-marker")})
		canon, err := images.ParseRef(ref)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != StatusCompleted || res.Image != canon.String() || res.ImageDigest != imagetest.Digest(t, img) {
			t.Errorf("%s: %s, image %q digest %q, want %q", ref, describe(res), res.Image, res.ImageDigest, canon.String())
		}
	}
}

// An image from a registry runs, and is not fetched again by the next
// run; a repository or tag the registry lacks is the request's error
// (ImageError, ErrUnknown); a registry out of reach is a set-up failure
// in the result, and the program does not run.
func TestImageFromRegistry(t *testing.T) {
	img := busyboxImage(t)
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers, %v", len(layers), err)
	}
	ld, err := layers[0].Digest()
	if err != nil {
		t.Fatal(err)
	}
	reg := imagetest.NewRegistry(t)
	reg.Push(t, img, "test/busybox:latest")
	pushGets := reg.BlobGets(ld.String())
	x := imageExecutor(t, "")

	// Without a tag: :latest, as the canonical reference says.
	ref := reg.Host + "/test/busybox"
	code := []byte("cat /etc/image-marker; echo \"var=$IMAGE_VAR\"\n")
	for run := 1; run <= 2; run++ {
		res := executeWith(t, x, &Request{Language: "sh", Image: ref, Code: code})
		if res.Status != StatusCompleted || res.Stdout != imageMarker+"\nvar=from-the-image\n" {
			t.Fatalf("run %d: %s", run, describe(res))
		}
		if want := reg.Host + "/test/busybox:latest"; res.Image != want {
			t.Errorf("run %d: Result.Image = %q, want %q", run, res.Image, want)
		}
		if want := imagetest.Digest(t, img); res.ImageDigest != want {
			t.Errorf("run %d: Result.ImageDigest = %q, want %q", run, res.ImageDigest, want)
		}
		if n := reg.BlobGets(ld.String()) - pushGets; n != 1 {
			t.Errorf("after run %d the layer was fetched %d times, want once", run, n)
		}
	}

	for _, missing := range []string{reg.Host + "/test/nope:v1", reg.Host + "/test/busybox:nope"} {
		err := executeErr(t, x, &Request{Language: "sh", Image: missing, Code: code})
		var ie *ImageError
		if !errors.As(err, &ie) || !errors.Is(err, images.ErrUnknown) {
			t.Errorf("%s: %v (%T), want an *ImageError wrapping images.ErrUnknown", missing, err, err)
		} else if ie.Ref != missing {
			t.Errorf("%s: ImageError.Ref = %q", missing, ie.Ref)
		}
	}

	// A dead port: listened on, then closed.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dead := addr + "/test/busybox:latest"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := x.Execute(ctx, &Request{Language: "sh", Image: dead, Code: []byte("echo PROGRAM-RAN; echo x > ran.txt\n")})
	if err != nil {
		t.Fatalf("unreachable registry: error %v (%T), want a result with status %s", err, err, StatusSetupError)
	}
	if res.Status != StatusSetupError || res.Error == "" {
		t.Errorf("unreachable registry: %s", describe(res))
	}
	if !strings.Contains(res.Error, addr) && !strings.Contains(res.Error, "connection refused") {
		t.Errorf("unreachable registry: the error names neither %s nor a refused connection: %q", addr, res.Error)
	}
	if strings.Contains(res.Stdout, "PROGRAM-RAN") || len(res.OutputFiles) != 0 || res.ExitCode != -1 {
		t.Errorf("unreachable registry: the program ran? %s, files %v", describe(res), keys(res.OutputFiles))
	}
	if res.ImageDigest != "" {
		t.Errorf("unreachable registry: ImageDigest %q", res.ImageDigest)
	}
}

// An invalid reference is refused before anything happens: not even the
// image store is opened.
func TestImageInvalidRef(t *testing.T) {
	x := imageExecutor(t, "")
	for _, ref := range []string{"UPPER/Case::x", "oci:relative/path", "oci:/a/../b", "https://example.com/x:1", " busybox"} {
		req := &Request{Language: "sh", Image: ref, Code: []byte("echo PROGRAM-RAN\n")}
		err := executeErr(t, x, req)
		var ie *ImageError
		if !errors.As(err, &ie) || !errors.Is(err, images.ErrRef) {
			t.Errorf("%q: %v (%T), want an *ImageError wrapping images.ErrRef", ref, err, err)
		}
		if err := x.Validate(req); !errors.As(err, &ie) {
			t.Errorf("Validate(%q): %v (%T), want an *ImageError", ref, err, err)
		}
	}
	// The store is opened lazily, under the data dir, when a run first
	// needs an image.
	if _, err := os.Stat(filepath.Join(x.dataDir, "images")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the image store was opened for invalid references (%v)", err)
	}
}

// bashImage is an image of the host's bash and the libraries it loads,
// at /opt/bash/bin/bash (found by the image's PATH only), with
// /etc/image-marker.
func bashImage(t testing.TB) v1.Image {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash on the host")
	}
	out, err := exec.Command("ldd", bash).Output()
	if err != nil {
		t.Skipf("ldd %s: %v", bash, err)
	}
	read := func(p string) []byte {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	files := []imagetest.File{
		{Name: "opt/bash/bin/bash", Data: read(bash), Mode: 0o755},
		{Name: "etc/image-marker", Data: []byte(imageMarker + "\n")},
	}
	libs := 0
	// "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or
	// "/lib64/ld-linux-x86-64.so.2 (0x...)"; the vdso has no file.
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if _, rest, ok := strings.Cut(line, "=> "); ok {
			line = rest
		}
		p, _, _ := strings.Cut(line, " ")
		if !strings.HasPrefix(p, "/") {
			continue
		}
		files = append(files, imagetest.File{Name: strings.TrimPrefix(p, "/"), Data: read(p), Mode: 0o755})
		libs++
	}
	if libs == 0 {
		t.Fatalf("no libraries in ldd's output:\n%s", out)
	}
	return imagetest.Image(t, []string{"PATH=/opt/bash/bin"}, imagetest.Layer(t, files...))
}

// The version of the toolchain in an image is the one found in it (by
// its version command, in a sandbox of the image), and it is remembered
// under CacheDir/image-toolchains: another executor on that cache dir
// reads it there instead of checking again.
func TestImageToolchainVersion(t *testing.T) {
	img := bashImage(t)
	ref := layoutRef(t, img)
	hostOut, err := exec.Command("bash", "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	wantVersion := versionOf(string(hostOut))
	if !regexp.MustCompile(`^\d+\.\d+`).MatchString(wantVersion) {
		t.Fatalf("the host's bash --version gives %q", wantVersion)
	}

	cacheDir := t.TempDir()
	code := []byte("echo \"bash=$BASH_VERSION\"; echo \"marker=$(< /etc/image-marker)\"\n")
	run := func(x *Executor) *Result {
		t.Helper()
		var tr Trace
		res := executeWith(t, x, &Request{Language: "bash", Image: ref, Code: code, Trace: &tr})
		got := kv(res.Stdout)
		if res.Status != StatusCompleted || got["marker"] != imageMarker || !strings.HasPrefix(got["bash"], wantVersion) {
			t.Fatalf("bash in the image: %s", describe(res))
		}
		if res.Version != wantVersion {
			t.Errorf("Result.Version = %q, want %q", res.Version, wantVersion)
		}
		if tr.Toolchain != "/opt/bash/bin/bash" {
			t.Errorf("toolchain %q, want /opt/bash/bin/bash (by the image's PATH)", tr.Toolchain)
		}
		return res
	}
	res := run(imageExecutor(t, cacheDir))
	hexPart := strings.TrimPrefix(res.ImageDigest, "sha256:")
	memos, _ := filepath.Glob(filepath.Join(cacheDir, "image-toolchains", hexPart+"-*.json"))
	if len(memos) != 1 {
		entries, _ := os.ReadDir(filepath.Join(cacheDir, "image-toolchains"))
		t.Fatalf("%d memo files for the image's digest, want 1 (the directory has %v)", len(memos), entries)
	}
	data, err := os.ReadFile(memos[0])
	if err != nil {
		t.Fatal(err)
	}
	var memo struct{ Bin, Version string }
	if err := json.Unmarshal(data, &memo); err != nil {
		t.Fatalf("memo %s: %v: %s", memos[0], err, data)
	}
	if memo.Bin != "/opt/bash/bin/bash" || memo.Version != wantVersion {
		t.Errorf("memo %s = %s, want bin /opt/bash/bin/bash and version %s", memos[0], data, wantVersion)
	}
	before, err := os.Stat(memos[0])
	if err != nil {
		t.Fatal(err)
	}

	// A new executor (a new process's) on the same cache dir, with a store
	// of its own: it finds the version remembered. The memo is rewritten
	// (a new file renamed over it) only after a version check: the same
	// file, untouched, means none ran.
	run(imageExecutor(t, cacheDir))
	after, err := os.Stat(memos[0])
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("the memo was written again by the second executor: the version was checked again")
	}
	if ino := after.Sys().(*syscall.Stat_t).Ino; ino != before.Sys().(*syscall.Stat_t).Ino {
		t.Errorf("memo inode %d, was %d", ino, before.Sys().(*syscall.Stat_t).Ino)
	}

	// A version the image does not have is named with the one it has.
	err = executeErr(t, imageExecutor(t, cacheDir), &Request{Language: "bash", Version: "1.0", Image: ref, Code: code})
	var ule *UnsupportedLanguageError
	if !errors.As(err, &ule) || !strings.Contains(err.Error(), wantVersion) || !strings.Contains(err.Error(), ref) {
		t.Errorf("bash 1.0 in the image: %v (%T), want an *UnsupportedLanguageError naming %s and %s", err, err, ref, wantVersion)
	}
}

// A language whose toolchain the image lacks is unsupported there, and the
// error says in which image.
func TestImageMissingToolchain(t *testing.T) {
	ref := layoutRef(t, busyboxImage(t))
	x := imageExecutor(t, "")
	for _, lang := range []string{"python", "bash"} {
		err := executeErr(t, x, &Request{Language: lang, Image: ref, Code: []byte("print(1)\n")})
		var ule *UnsupportedLanguageError
		if !errors.As(err, &ule) {
			t.Errorf("%s in the busybox image: %v (%T), want an *UnsupportedLanguageError", lang, err, err)
			continue
		}
		if !strings.Contains(err.Error(), ref) {
			t.Errorf("%s in the busybox image: the error does not name the image %s: %v", lang, ref, err)
		}
	}
	// A language the executor does not know at all.
	err := executeErr(t, x, &Request{Language: "cobol-2099", Image: ref, Code: []byte("x")})
	var ule *UnsupportedLanguageError
	if !errors.As(err, &ule) {
		t.Errorf("unknown language in an image: %v (%T)", err, err)
	}
}

// Test cases run in the image, each case in it.
func TestImageTestCases(t *testing.T) {
	img := busyboxImage(t)
	ref := layoutRef(t, img)
	x := imageExecutor(t, "")
	code := "read a b\necho $((a + b))\ncat /etc/image-marker >&2\n"
	res := executeWith(t, x, &Request{Language: "sh", Image: ref, Code: []byte(code), TestCases: []TestCase{
		{InputData: "1 2\n", ExpectedOutput: ptr("3")},
		{InputData: "20 22\n", ExpectedOutput: ptr("42\n")},
	}})
	expectVerdicts(t, res, StatusCompleted, []string{VerdictAccepted, VerdictAccepted}, BatchSummary{Total: 2, Accepted: 2})
	for _, c := range res.TestCases {
		if !strings.Contains(c.Stderr, imageMarker) {
			t.Errorf("case %d did not run in the image: stderr %q", c.Index, c.Stderr)
		}
	}
	if res.ImageDigest != imagetest.Digest(t, img) || !strings.HasPrefix(res.Image, "oci:") {
		t.Errorf("image %q digest %q", res.Image, res.ImageDigest)
	}
}

// ---------------------------------------------------------------------------
// Finding a toolchain inside an image's tree
// ---------------------------------------------------------------------------

// makeTree makes files under root, as imagetest.Layer would have them:
// directories, files and symlinks (written as they are, never followed),
// with the directories above them.
func makeTree(t *testing.T, root string, files []imagetest.File) {
	t.Helper()
	for _, e := range files {
		p := filepath.Join(root, e.Name)
		if e.Dir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if e.Link != "" {
			if err := os.Symlink(e.Link, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		mode := os.FileMode(0o644)
		if e.Mode != 0 {
			mode = os.FileMode(e.Mode)
		}
		if err := os.WriteFile(p, e.Data, mode); err != nil {
			t.Fatal(err)
		}
	}
}

// inRootTree is a tree whose links lead out of it if followed on the
// host: none of the targets it names outside exist in it.
var inRootTree = []imagetest.File{
	{Name: "usr/bin/busybox", Data: []byte("x"), Mode: 0o755},
	{Name: "usr/bin/sh", Link: "busybox"},
	{Name: "usr/bin/noexec", Data: []byte("x")},
	{Name: "usr/bin/adir", Dir: true},
	{Name: "usr/lib", Dir: true},
	{Name: "bin", Link: "usr/bin"},
	{Name: "abs", Link: "/usr/bin"},
	{Name: "etc/only-inside", Data: []byte("x")},
	// Out of the tree by "..": stops at its root.
	{Name: "usr/lib/up", Link: "../../../../../etc/only-inside"},
	{Name: "usr/lib/up-host", Link: "../../../../../etc/debian_version"},
	// Absolute: from the tree's root, not the host's.
	{Name: "usr/lib/abs-inside", Link: "/etc/only-inside"},
	{Name: "usr/lib/abs-host", Link: "/etc/debian_version"},
	{Name: "usr/bin/python3", Link: "/usr/bin/python3.11"},
	{Name: "loop1", Link: "loop2"},
	{Name: "loop2", Link: "/loop1"},
	{Name: "self", Link: "self"},
	{Name: "dangling", Link: "/nowhere/at/all"},
	{Name: "opt/tools/bin/mytool", Data: []byte("x"), Mode: 0o755},
	{Name: "opt/py/3.12/bin/python", Link: "/usr/bin/python3"},
}

func TestResolveInRoot(t *testing.T) {
	root := t.TempDir()
	makeTree(t, root, inRootTree)
	for _, c := range []struct{ in, want string }{
		{"/usr/bin/busybox", "/usr/bin/busybox"},
		{"/bin/sh", "/usr/bin/busybox"},
		{"/abs/sh", "/usr/bin/busybox"},
		{"/usr/bin", "/usr/bin"},
		{"/", "/"},
		{"/usr/lib/up", "/etc/only-inside"},
		{"/usr/lib/abs-inside", "/etc/only-inside"},
		// ".." of the path itself stops at the root too.
		{"/../../../usr/bin/sh", "/usr/bin/busybox"},
		{"usr/bin/sh", "/usr/bin/busybox"},
	} {
		got, err := resolveInRoot(root, c.in)
		if err != nil || got != c.want {
			t.Errorf("resolveInRoot(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, c := range []struct{ in, why string }{
		{"/usr/lib/up-host", "a link by .. to a file only the host has"},
		{"/usr/lib/abs-host", "an absolute link to a file only the host has"},
		{"/usr/bin/python3", "an absolute link to a file only the host may have"},
		{"/loop1", "a loop"},
		{"/self", "a link to itself"},
		{"/dangling", "a dangling link"},
		{"/nope/x", "a missing path"},
		{"/usr/bin/busybox/x", "a path through a file"},
	} {
		got, err := resolveInRoot(root, c.in)
		if err == nil {
			t.Errorf("resolveInRoot(%q) (%s) = %q, want an error", c.in, c.why, got)
		}
	}
	if _, err := resolveInRoot(root, "/loop1"); err == nil || !strings.Contains(err.Error(), "too many levels of symbolic links") {
		t.Errorf("a loop: %v, want too many levels of symbolic links", err)
	}
}

// ".." after a symlink in the path asked for goes up from where the link
// leads, as the kernel does.
func TestResolveInRootDotDotAfterLink(t *testing.T) {
	root := t.TempDir()
	makeTree(t, root, inRootTree)
	// /bin → usr/bin, so /bin/../lib is /usr/lib for the kernel.
	got, err := resolveInRoot(root, "/bin/../lib")
	if err != nil || got != "/usr/lib" {
		t.Errorf("resolveInRoot(%q) = %q, %v; the kernel gives /usr/lib", "/bin/../lib", got, err)
	}
}

func TestFindInRoot(t *testing.T) {
	root := t.TempDir()
	makeTree(t, root, inRootTree)
	for _, c := range []struct {
		cand string
		path []string
		want string
	}{
		// A bare name: the image's PATH first, then the system's dirs.
		{"mytool", []string{"/opt/tools/bin"}, "/opt/tools/bin/mytool"},
		{"mytool", nil, ""},
		{"mytool", []string{"opt/tools/bin"}, ""}, // a relative PATH entry is no place
		{"busybox", nil, "/usr/bin/busybox"},
		{"sh", []string{"/nowhere"}, "/usr/bin/busybox"},
		// Absolute, through links.
		{"/bin/sh", nil, "/usr/bin/busybox"},
		{"/abs/busybox", nil, "/usr/bin/busybox"},
		// Not executables: a file without x, a directory.
		{"/usr/bin/noexec", nil, ""},
		{"noexec", nil, ""},
		{"/usr/bin/adir", nil, ""},
		// Links to what only the host has lead nowhere.
		{"/usr/bin/python3", nil, ""},
		{"python3", nil, ""},
		{"/opt/py/*/bin/python", nil, ""},
		{"/opt/tools/*/mytool", nil, "/opt/tools/bin/mytool"},
		// The host's home is not the image's.
		{"~/.pyenv/versions/3.12.*/bin/python3.12", nil, ""},
		{"/missing", nil, ""},
	} {
		if got := findInRoot(root, c.cand, c.path); got != c.want {
			t.Errorf("findInRoot(%q, PATH %v) = %q, want %q", c.cand, c.path, got, c.want)
		}
	}
	if got := imagePath([]string{"A=1", "PATH=/opt/tools/bin:/usr/bin", "PATHX=/x"}); strings.Join(got, ":") != "/opt/tools/bin:/usr/bin" {
		t.Errorf("imagePath = %v", got)
	}
}

// A glob candidate is matched in the image's tree as the sandbox sees
// it: through an absolute link of the image, to the image's directory,
// not the host's.
func TestFindInRootGlobThroughAbsoluteLink(t *testing.T) {
	root := t.TempDir()
	makeTree(t, root, []imagetest.File{
		{Name: "srv/tools/v1/bin/tool", Data: []byte("x"), Mode: 0o755},
		{Name: "opt", Link: "/srv/tools"},
	})
	if got := findInRoot(root, "/opt/v1/bin/tool", nil); got != "/srv/tools/v1/bin/tool" {
		t.Fatalf("findInRoot(/opt/v1/bin/tool) = %q, want /srv/tools/v1/bin/tool", got)
	}
	if got := findInRoot(root, "/opt/*/bin/tool", nil); got != "/srv/tools/v1/bin/tool" {
		t.Errorf("findInRoot(%q) = %q, want /srv/tools/v1/bin/tool (the image's link, not the host's /srv)", "/opt/*/bin/tool", got)
	}
}

// BenchmarkImageBash times bash hello world through Execute in a cached
// image (bash and its libraries, an oci: layout already pulled and
// unpacked) against the host's bash, interleaved in one loop so that both
// see the same machine: image/host is the ratio docs/BENCHMARKS.md reports.
//
//	go test -run '^$' -bench ImageBash -benchtime 400x ./pkg/executor
func BenchmarkImageBash(b *testing.B) {
	ref := layoutRef(b, bashImage(b))
	code := []byte("echo hello")
	run := func(image string) time.Duration {
		start := time.Now()
		res, err := testExec.Execute(b.Context(), &Request{Language: "bash", Code: code, Image: image})
		if err != nil || res.Status != StatusCompleted || res.Stdout != "hello\n" {
			b.Fatalf("%v %+v", err, res)
		}
		return time.Since(start)
	}
	run(ref) // pull, unpack, find bash in it
	run("")
	var host, image time.Duration
	b.ResetTimer()
	for range b.N {
		host += run("")
		image += run(ref)
	}
	b.ReportMetric(float64(host.Microseconds())/1e3/float64(b.N), "host-ms/op")
	b.ReportMetric(float64(image.Microseconds())/1e3/float64(b.N), "image-ms/op")
	b.ReportMetric(float64(image)/float64(host), "image/host")
}

// A language entry may be backed by an image (languages stay data): its
// runs have the image's root without the request naming it, report the
// version found in it, and Prewarm prepares it once it is in the store
// (never pulling it at start). The entry here is bash's default, one of
// the languages Prewarm visits.
func TestLanguageEntryImage(t *testing.T) {
	ref := layoutRef(t, busyboxImage(t))
	langs := filepath.Join(t.TempDir(), "languages.yaml")
	yaml := "languages:\n" +
		"  - name: bash\n" +
		"    default: true\n" +
		"    source: main.sh\n" +
		"    toolchain: [/bin/sh]\n" +
		"    version: [/bin/sh, -c, \"echo 1.36.1\"]\n" +
		"    image: " + ref + "\n" +
		"    image_version: \"1.36\"\n" +
		"    run: [/bin/sh, main.sh]\n"
	if err := os.WriteFile(langs, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	x, err := New(Config{Languages: langs, DataDir: t.TempDir(), CacheDir: t.TempDir(), Engine: testExec.engine, CompileCacheBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	// Listed by its declared version before anything is pulled.
	if _, tc, err := x.Registry().Resolve("bash", "1.36"); err != nil || tc.Version != "1.36" || tc.ImageRef != ref {
		t.Fatalf("resolve before the pull: %+v %v", tc, err)
	}
	if err := x.Prewarm(1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(x.dataDir, "images", "refs.json")); err == nil {
		t.Error("Prewarm pulled the entry's image")
	}
	res, err := x.Execute(t.Context(), &Request{Language: "bash", Code: []byte("cat /etc/image-marker")})
	if err != nil || res.Status != StatusCompleted || res.Stdout != imageMarker+"\n" {
		t.Fatalf("run: %v %+v", err, res)
	}
	if res.Image != ref || res.Version != "1.36.1" || !strings.HasPrefix(res.ImageDigest, "sha256:") {
		t.Errorf("image %q version %q digest %q", res.Image, res.Version, res.ImageDigest)
	}
	l, _, _ := x.Registry().Resolve("bash", "")
	if tc := x.storedImageToolchain(l); tc == nil || tc.Root == "" {
		t.Errorf("the stored image's toolchain: %+v", tc)
	}
	if err := x.Prewarm(1); err != nil {
		t.Errorf("Prewarm with the image stored: %v", err)
	}
}
