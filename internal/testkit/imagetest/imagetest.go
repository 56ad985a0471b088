// Package imagetest builds small OCI images for tests, in-process with
// go-containerregistry: a static busybox with its applets linked as in
// alpine, written as an OCI image layout or pushed to an in-memory registry
// served on 127.0.0.1. Nothing reaches beyond the machine.
package imagetest

import (
	"archive/tar"
	"bytes"
	"io"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// File is one entry of a layer: a regular file (Mode 0 is 0644), a
// directory (Dir) or a symlink (Link).
type File struct {
	Name string
	Data []byte
	Mode int64
	Dir  bool
	Link string
}

// Busybox returns the host's busybox when it is statically linked
// (Debian's busybox-static), or skips the test.
func Busybox(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("busybox")
	if err == nil {
		out, _ := exec.Command("ldd", p).CombinedOutput()
		if strings.Contains(string(out), "not a dynamic executable") || strings.Contains(string(out), "statically linked") {
			return p
		}
	}
	t.Skip("no static busybox here (install busybox-static)")
	return ""
}

// Layer is an uncompressed layer of files. The directories above a file
// that no earlier entry makes are made before it (0755).
func Layer(t testing.TB, files ...File) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime := time.Unix(1700000000, 0)
	made := map[string]bool{}
	for _, f := range files {
		for _, d := range parents(path.Dir(path.Clean(f.Name))) {
			if made[d] {
				continue
			}
			made[d] = true
			if err := tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mtime}); err != nil {
				t.Fatal(err)
			}
		}
		h := &tar.Header{Name: f.Name, Mode: f.Mode, ModTime: mtime, Typeflag: tar.TypeReg, Size: int64(len(f.Data))}
		switch {
		case f.Dir:
			h.Typeflag, h.Size = tar.TypeDir, 0
			made[path.Clean(f.Name)] = true
			if h.Mode == 0 {
				h.Mode = 0o755
			}
		case f.Link != "":
			h.Typeflag, h.Linkname, h.Size, h.Mode = tar.TypeSymlink, f.Link, 0, 0o777
		case h.Mode == 0:
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write(f.Data)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// parents lists d and the directories above it ("a/b": "a", "a/b"), none
// for "." or "/".
func parents(d string) []string {
	if d == "." || d == "/" || d == "" {
		return nil
	}
	return append(parents(path.Dir(d)), d)
}

// BusyboxFiles are the entries of a busybox root: /bin/busybox and the
// applets sh, cat, echo, ls, id, sleep, env, pwd, touch, wc, test,
// printf, mkdir, rm, true linked to it (absolute symlinks), /etc and /tmp.
func BusyboxFiles(t testing.TB) []File {
	t.Helper()
	data, err := os.ReadFile(Busybox(t))
	if err != nil {
		t.Fatal(err)
	}
	files := []File{{Name: "bin", Dir: true}, {Name: "bin/busybox", Data: data, Mode: 0o755},
		{Name: "etc", Dir: true}, {Name: "tmp", Dir: true, Mode: 0o1777}}
	for _, a := range []string{"sh", "cat", "echo", "ls", "id", "sleep", "env", "pwd", "touch", "wc",
		"test", "printf", "mkdir", "rm", "true"} {
		files = append(files, File{Name: path.Join("bin", a), Link: "/bin/busybox"})
	}
	return files
}

// Image is an image of the layers (base first) whose config sets env.
func Image(t testing.TB, env []string, layers ...v1.Layer) v1.Image {
	t.Helper()
	return ImageConfig(t, v1.Config{Env: env}, layers...)
}

// ImageConfig is an image of the layers (base first), for linux on this
// machine's architecture, whose config is cfg (Env, User, WorkingDir,
// Entrypoint, Cmd...).
func ImageConfig(t testing.TB, cfg v1.Config, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config = cfg
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	return img
}

// BusyboxImage is a one-layer busybox image with extra files and env.
func BusyboxImage(t testing.TB, env []string, extra ...File) v1.Image {
	t.Helper()
	return Image(t, env, Layer(t, append(BusyboxFiles(t), extra...)...))
}

// StoreBytes is about what a one-layer image takes in an image store: its
// layer's blob, the files it unpacks to, and room for the records.
func StoreBytes(t testing.TB, img v1.Image) int64 {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) == 0 {
		t.Fatalf("layers: %v", err)
	}
	blob, err := layers[0].Size()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tarBytes, err := io.Copy(io.Discard, rc)
	if err != nil {
		t.Fatal(err)
	}
	return blob + tarBytes + 64<<10
}

// Digest is img's digest, sha256:HEX.
func Digest(t testing.TB, img v1.Image) string {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// WriteLayout writes img as an OCI image layout in dir, tagged tag, and
// returns its reference, oci:DIR:TAG; with tag "" the image has no ref
// name, the only one of the layout, and the reference is oci:DIR.
func WriteLayout(t testing.TB, dir string, img v1.Image, tag string) string {
	t.Helper()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	var opts []layout.Option
	if tag != "" {
		opts = append(opts, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag}))
	}
	if err := p.AppendImage(img, opts...); err != nil {
		t.Fatal(err)
	}
	if tag == "" {
		return "oci:" + dir
	}
	return "oci:" + dir + ":" + tag
}

// Registry is an in-memory registry served on 127.0.0.1 for the test,
// counting the blobs it serves; it may hold them back or corrupt one.
type Registry struct {
	Host    string // 127.0.0.1:PORT
	mu      sync.Mutex
	gets    map[string]int // blob GETs by digest
	total   int            // blob GETs in all
	hold    chan struct{}  // while set, blob GETs wait for it to close
	held    chan struct{}  // told of each blob GET that waits
	corrupt string         // a blob served with a byte flipped
}

// Corrupt makes the registry serve the blob with digest d with one byte
// flipped.
func (r *Registry) Corrupt(d string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.corrupt = d
}

// Blobs is how many blob GETs the registry has had.
func (r *Registry) Blobs() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total
}

// HoldBlobs makes blob GETs wait until release is called (or their
// client goes away); held hears of each one that waits (a pull under way).
func (r *Registry) HoldBlobs() (held <-chan struct{}, release func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hold, r.held = make(chan struct{}), make(chan struct{}, 64)
	hold := r.hold
	var once sync.Once
	return r.held, func() { once.Do(func() { close(hold) }) }
}

// NewRegistry starts a registry that lives as long as the test.
func NewRegistry(t testing.TB) *Registry {
	t.Helper()
	r := &Registry{gets: map[string]int{}}
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/blobs/sha256:") {
			d := req.URL.Path[strings.LastIndex(req.URL.Path, "/")+1:]
			r.mu.Lock()
			r.gets[d]++
			r.total++
			hold, held, corrupt := r.hold, r.held, r.corrupt == d
			r.mu.Unlock()
			if hold != nil {
				select {
				case held <- struct{}{}:
				default:
				}
				select {
				case <-hold:
				case <-req.Context().Done():
					return
				}
			}
			if corrupt {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				body := rec.Body.Bytes()
				if len(body) > 0 {
					body[len(body)/2] ^= 0xff
				}
				maps.Copy(w.Header(), rec.Header())
				w.WriteHeader(rec.Code)
				w.Write(body)
				return
			}
		}
		h.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.Host = strings.TrimPrefix(srv.URL, "http://")
	return r
}

// Push puts img in the registry as repo:tag and returns the reference.
func (r *Registry) Push(t testing.TB, img v1.Image, repoTag string) string {
	t.Helper()
	ref := r.Host + "/" + repoTag
	tag, err := name.NewTag(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
	return ref
}

// BlobGets is how many times the blob with digest d was fetched.
func (r *Registry) BlobGets(d string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gets[d]
}
