package images

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/sandbox-run/sandbox-run/internal/testkit/imagetest"
)

func TestParseRef(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"python:3.12-slim", "index.docker.io/library/python:3.12-slim"},
		{"docker.io/library/python:3.12-slim", "index.docker.io/library/python:3.12-slim"},
		{"ghcr.io/org/img:tag", "ghcr.io/org/img:tag"},
		{"busybox", "index.docker.io/library/busybox:latest"},
		{"127.0.0.1:5000/test/img", "127.0.0.1:5000/test/img:latest"},
		{"localhost:5000/img:v1", "localhost:5000/img:v1"},
		{"alpine@sha256:" + strings.Repeat("ab", 32), "index.docker.io/library/alpine@sha256:" + strings.Repeat("ab", 32)},
		{"oci:/srv/layout", "oci:/srv/layout"},
		{"oci:/srv/layout:v2", "oci:/srv/layout:v2"},
		{"docker-archive:/tmp/img.tar", "docker-archive:/tmp/img.tar"},
		{"docker-archive:/tmp/img.tar:app:v1", "docker-archive:/tmp/img.tar:app:v1"},
	} {
		r, err := ParseRef(c.in)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if r.String() != c.want {
			t.Errorf("%q: %q, want %q", c.in, r.String(), c.want)
		}
	}
	for _, bad := range []string{"", " python", "Python:3", "oci:relative/dir", "oci:/a/../b", "docker-archive:",
		"https://ghcr.io/x", "img:bad tag", "a\x00b", "alpine@sha256:abc"} {
		if _, err := ParseRef(bad); !errors.Is(err, ErrRef) {
			t.Errorf("%q: %v, want ErrRef", bad, err)
		}
	}
}

// newRegistry is an in-memory registry on 127.0.0.1 (imagetest's).
func newRegistry(t *testing.T) *imagetest.Registry { return imagetest.NewRegistry(t) }

func randomImage(t *testing.T, layers int64) v1.Image {
	t.Helper()
	img, err := random.Image(4096, layers)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func openStore(t *testing.T) *Store {
	t.Helper()
	return openStoreAt(t, t.TempDir())
}

// openStoreAt opens the store under dir, reaching registries (the tests'
// own, on 127.0.0.1) as pkg/images/registry does; that package imports
// this one, so the tests cannot.
func openStoreAt(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s.Registry = func(ctx context.Context, ref name.Reference) (v1.Image, error) {
		return remote.Image(ref, remote.WithContext(ctx), remote.WithPlatform(Platform))
	}
	return s
}

// checkStored asserts that every blob of img is in the store under its
// digest, and the record matches.
func checkStored(t *testing.T, s *Store, got *Image, img v1.Image) {
	t.Helper()
	d, _ := img.Digest()
	if got.Digest != d.String() {
		t.Errorf("digest %s, want %s", got.Digest, d)
	}
	layers, _ := img.Layers()
	if len(got.Layers) != len(layers) {
		t.Fatalf("%d layers, want %d", len(got.Layers), len(layers))
	}
	for i, l := range layers {
		ld, _ := l.Digest()
		diff, _ := l.DiffID()
		if got.Layers[i].Digest != ld.String() || got.Layers[i].DiffID != diff.String() {
			t.Errorf("layer %d: %+v, want %s %s", i, got.Layers[i], ld, diff)
		}
		p, err := s.BlobPath(ld.String())
		if err != nil {
			t.Fatal(err)
		}
		rc, _ := l.Compressed()
		want, _ := io.ReadAll(rc)
		rc.Close()
		if have, err := os.ReadFile(p); err != nil || !bytes.Equal(have, want) {
			t.Errorf("layer %d: stored blob differs (%v)", i, err)
		}
	}
}

func TestPullFromRegistry(t *testing.T) {
	tr := newRegistry(t)
	base := randomImage(t, 2)
	ref := tr.Push(t, base, "test/base:v1")
	s := openStore(t)
	var last Progress
	img, err := s.Pull(context.Background(), ref, Caps{}, func(p Progress) { last = p })
	if err != nil {
		t.Fatal(err)
	}
	checkStored(t, s, img, base)
	if last.Total == 0 || last.Done != last.Total {
		t.Errorf("last progress %+v", last)
	}
	if got, err := s.Get(ref); err != nil || got.Digest != img.Digest {
		t.Errorf("Get: %v %v", got, err)
	}

	// An image on the same base fetches only its new layer.
	extra, err := random.Layer(4096, types.DockerLayer)
	if err != nil {
		t.Fatal(err)
	}
	derived, err := mutate.AppendLayers(base, extra)
	if err != nil {
		t.Fatal(err)
	}
	ref2 := tr.Push(t, derived, "test/derived:v1")
	before := tr.Blobs()
	img2, err := s.Pull(context.Background(), ref2, Caps{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkStored(t, s, img2, derived)
	// The new layer and the config: the base's layers are not fetched.
	if n := tr.Blobs() - before; n > 2 {
		t.Errorf("pulling an image on a stored base fetched %d blobs, want the new layer and the config only", n)
	}
	list, err := s.List()
	if err != nil || len(list) != 2 {
		t.Fatalf("List: %d images, %v", len(list), err)
	}
}

// Pulls of one reference at once fetch each blob once.
func TestConcurrentPullsOnce(t *testing.T) {
	tr := newRegistry(t)
	img := randomImage(t, 3)
	ref := tr.Push(t, img, "test/once:v1")
	s := openStore(t)
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Pull(context.Background(), ref, Caps{}, nil)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := tr.Blobs(); n > 4 { // 3 layers and the config, once
		t.Errorf("6 pulls at once fetched %d blobs, want at most 4", n)
	}
}

// A blob that does not match its digest is refused and nothing of the
// pull is kept or named.
func TestCorruptBlobRefused(t *testing.T) {
	tr := newRegistry(t)
	img := randomImage(t, 2)
	ref := tr.Push(t, img, "test/bad:v1")
	layers, _ := img.Layers()
	d, _ := layers[1].Digest()
	tr.Corrupt(d.String())
	s := openStore(t)
	_, err := s.Pull(context.Background(), ref, Caps{}, nil)
	if err == nil {
		t.Fatal("a corrupt blob was accepted")
	}
	if !strings.Contains(err.Error(), d.String()) {
		t.Errorf("the error does not name the corrupt layer: %v", err)
	}
	if _, err := s.Get(ref); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after a failed pull: %v", err)
	}
	// The config and the first layer were good: kept as blobs (a later
	// pull need not fetch them), but no image names them.
	for dir, want := range map[string]int{"blobs/sha256": 2, "images": 0, s.tmp: 0} {
		if entries, _ := os.ReadDir(filepath.Join(s.dir, dir)); dir == s.tmp {
			entries, _ = os.ReadDir(s.tmp)
			if len(entries) != want {
				t.Errorf("tmp holds %d entries after a failed pull", len(entries))
			}
		} else if len(entries) != want {
			t.Errorf("%s holds %d entries after a failed pull, want %d", dir, len(entries), want)
		}
	}
	if p, _ := s.BlobPath(d.String()); fileExists(p) {
		t.Error("the corrupt layer was stored")
	}
}

func TestCaps(t *testing.T) {
	tr := newRegistry(t)
	ref := tr.Push(t, randomImage(t, 3), "test/caps:v1")
	s := openStore(t)
	for _, c := range []Caps{{Layers: 2}, {Bytes: 1000}} {
		if _, err := s.Pull(context.Background(), ref, c, nil); err == nil || !strings.Contains(err.Error(), "allowed") {
			t.Errorf("caps %+v: %v", c, err)
		}
	}
}

func TestPullLocalSources(t *testing.T) {
	img := randomImage(t, 2)
	other := randomImage(t, 1)
	dir := t.TempDir()

	// An OCI layout with two tagged images.
	lp, err := layout.Write(filepath.Join(dir, "layout"), empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	for tag, im := range map[string]v1.Image{"v1": img, "v2": other} {
		if err := lp.AppendImage(im, layout.WithAnnotations(map[string]string{refNameAnnotation: tag})); err != nil {
			t.Fatal(err)
		}
	}
	// docker save's format.
	archive := filepath.Join(dir, "img.tar")
	tag, _ := name.NewTag("app:v1")
	if err := tarball.WriteToFile(archive, tag, img); err != nil {
		t.Fatal(err)
	}
	s := openStore(t)
	for _, ref := range []string{"oci:" + filepath.Join(dir, "layout") + ":v1", "docker-archive:" + archive, "docker-archive:" + archive + ":app:v1"} {
		got, err := s.Pull(context.Background(), ref, Caps{}, nil)
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		checkStored(t, s, got, img)
	}
	if _, err := s.Pull(context.Background(), "oci:"+filepath.Join(dir, "layout"), Caps{}, nil); err == nil || !strings.Contains(err.Error(), "2 images") {
		t.Errorf("untagged pull of a layout with two images: %v", err)
	}
	if _, err := s.Pull(context.Background(), "oci:"+filepath.Join(dir, "layout")+":nope", Caps{}, nil); err == nil {
		t.Error("a missing tag was pulled")
	}
}

// A multi-platform index resolves to the host's platform.
func TestIndexResolvesToHostPlatform(t *testing.T) {
	mine, theirs := randomImage(t, 1), randomImage(t, 1)
	other := v1.Platform{OS: "linux", Architecture: "s390x"}
	if Platform.Architecture == "s390x" {
		other.Architecture = "riscv64"
	}
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: theirs, Descriptor: v1.Descriptor{Platform: &other}},
		mutate.IndexAddendum{Add: mine, Descriptor: v1.Descriptor{Platform: &Platform}})
	lp, err := layout.Write(filepath.Join(t.TempDir(), "layout"), empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{refNameAnnotation: "multi"})); err != nil {
		t.Fatal(err)
	}
	s := openStore(t)
	got, err := s.Pull(context.Background(), "oci:"+string(lp)+":multi", Caps{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkStored(t, s, got, mine)

	// And from a registry.
	tr := newRegistry(t)
	r, _ := name.ParseReference(tr.Host + "/test/multi:v1")
	if err := remote.WriteIndex(r, idx); err != nil {
		t.Fatal(err)
	}
	got, err = s.Pull(context.Background(), r.Name(), Caps{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkStored(t, s, got, mine)
}

func TestRemoveAndPrune(t *testing.T) {
	tr := newRegistry(t)
	a, b := randomImage(t, 2), randomImage(t, 1)
	refA, refB := tr.Push(t, a, "test/a:v1"), tr.Push(t, b, "test/b:v1")
	s := openStore(t)
	for _, ref := range []string{refA, refB} {
		if _, err := s.Pull(context.Background(), ref, Caps{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Remove(refA); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(refA); !errors.Is(err, ErrNotFound) {
		t.Errorf("second remove: %v", err)
	}
	freed, err := s.Prune()
	if err != nil || freed == 0 {
		t.Fatalf("prune: %d bytes, %v", freed, err)
	}
	la, _ := a.Layers()
	for _, l := range la {
		d, _ := l.Digest()
		p, _ := s.BlobPath(d.String())
		if _, err := os.Stat(p); err == nil {
			t.Errorf("a's layer %s survived the prune", d)
		}
	}
	got, err := s.Get(refB)
	if err != nil {
		t.Fatal(err)
	}
	checkStored(t, s, got, b)
}

// What an interrupted pull of a process that ended left in tmp/ is gone
// when the store opens; what a running process has there stays.
func TestOpenClearsInterruptedPull(t *testing.T) {
	dir := t.TempDir()
	live, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(live.tmp, "blob-1"), []byte("pulling"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A pid above the kernel's maximum (4194304) runs nowhere.
	dead := filepath.Join(dir, "tmp", "99999999-1")
	if err := os.Mkdir(dead, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dead, "blob-123"), []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tmp", "blob-old"), []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); err != nil {
		t.Fatal(err)
	}
	if fileExists(dead) || fileExists(filepath.Join(dir, "tmp", "blob-old")) {
		t.Error("what an ended process left in tmp/ is still there after Open")
	}
	if !fileExists(filepath.Join(live.tmp, "blob-1")) {
		t.Error("Open removed what a running process is writing")
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// A pull whose caller goes away does not fail those waiting for the same
// reference: they pull again.
func TestWaiterOutlivesCanceledPull(t *testing.T) {
	tr := newRegistry(t)
	ref := tr.Push(t, randomImage(t, 1), "test/wait:v1")
	_, release := tr.HoldBlobs()
	defer release()
	s := openStore(t)
	first, cancel := context.WithCancel(context.Background())
	firstErr := make(chan error, 1)
	go func() {
		_, err := s.Pull(first, ref, Caps{}, nil)
		firstErr <- err
	}()
	waitFor(t, "the first pull to fetch a blob", func() bool { return tr.Blobs() > 0 })
	type result struct {
		img *Image
		err error
	}
	second := make(chan result, 1)
	go func() {
		img, err := s.Pull(context.Background(), ref, Caps{}, nil)
		second <- result{img, err}
	}()
	r, _ := ParseRef(ref)
	waitFor(t, "the second pull to wait for the first", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		p := s.pulls[r.String()]
		return p != nil && p.waiters == 1
	})
	cancel()
	if err := <-firstErr; !errors.Is(err, context.Canceled) {
		t.Errorf("the canceled pull: %v", err)
	}
	release()
	got := <-second
	if got.err != nil {
		t.Fatalf("the waiting pull failed with the other's cancellation: %v", got.err)
	}
	if _, err := s.Get(ref); err != nil {
		t.Error(err)
	}
}

// waitFor polls cond until it holds (or a minute passes).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// Two stores on one directory (a CLI beside a server) lose none of each
// other's references.
func TestRefsSharedAcrossStores(t *testing.T) {
	dir := t.TempDir()
	a := openStoreAt(t, dir)
	b := openStoreAt(t, dir)
	var wg sync.WaitGroup
	for i := range 40 {
		st := a
		if i%2 == 1 {
			st = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := st.setRef(fmt.Sprintf("oci:/l%d", i), "sha256:"+strings.Repeat("a", 64)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	m, err := a.refs()
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 40 {
		t.Errorf("%d references of 40 kept", len(m))
	}
}
