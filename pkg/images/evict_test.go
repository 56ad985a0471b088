package images

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/sandbox-run/sandbox-run/internal/testkit/imagetest"
	"github.com/sandbox-run/sandbox-run/pkg/images/layer"
)

// blobLayer is a layer of one file of n random bytes (they do not
// compress): a layer of a known size.
func blobLayer(t *testing.T, name string, n int) v1.Layer {
	t.Helper()
	data := make([]byte, n)
	rand.Read(data)
	return imagetest.Layer(t, imagetest.File{Name: "data/" + name, Data: data})
}

// layoutOf writes img to a layout of its own and returns its reference.
func layoutOf(t *testing.T, img v1.Image) string {
	t.Helper()
	return imagetest.WriteLayout(t, filepath.Join(t.TempDir(), "layout"), img, "t")
}

// use has the store use ref as a run does (Use) and releases it.
func use(t *testing.T, s *Store, ref string, max int64) *Image {
	t.Helper()
	img, root, release, err := s.Use(context.Background(), ref, Caps{StoreBytes: max}, layer.Limits{}, nil)
	if err != nil {
		t.Fatalf("use %s: %v", ref, err)
	}
	if _, err := os.Stat(root); err != nil {
		t.Fatalf("use %s: its root: %v", ref, err)
	}
	release()
	time.Sleep(5 * time.Millisecond) // distinct last-use times on any file system
	return img
}

// listed is the references the store lists, sorted.
func listed(t *testing.T, s *Store) []string {
	t.Helper()
	list, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, img := range list {
		out = append(out, img.Ref)
	}
	sort.Strings(out)
	return out
}

func sameRefs(a []string, b ...string) bool {
	sort.Strings(b)
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// storeBytes is what the store holds (failing the test if it cannot say).
func storeBytes(t *testing.T, s *Store) int64 {
	t.Helper()
	n, err := s.Usage()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Past its bound the store evicts the least recently used image (by run,
// not by pull), and the order survives reopening the store; an evicted
// image is fetched anew when used again; the store holds what it says.
func TestTrimEvictsLeastRecentlyUsed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStoreAt(t, dir)
	const size = 256 << 10
	refs := map[string]string{}
	for _, n := range []string{"a", "b", "c", "d"} {
		refs[n] = layoutOf(t, imagetest.Image(t, nil, blobLayer(t, n, size)))
	}
	const unbounded = 1 << 40
	use(t, s, refs["a"], unbounded)
	one := storeBytes(t, s) // one image: its blob, its unpacked file, records
	if one < 2*size || one > 2*size+64<<10 {
		t.Fatalf("one image of %d bytes takes %d in the store, want its blob and its file", size, one)
	}
	bound := one * 5 / 2 // two fit, three do not
	use(t, s, refs["b"], bound)
	use(t, s, refs["a"], bound) // a used again: b is now the least recently used
	if got := listed(t, s); !sameRefs(got, refs["a"], refs["b"]) {
		t.Fatalf("within the bound the store lists %v", got)
	}
	b, _ := s.Get(refs["b"])
	use(t, s, refs["c"], bound)
	if got := listed(t, s); !sameRefs(got, refs["a"], refs["c"]) {
		t.Errorf("after a, b, a, c: the store lists %v, want a and c (b least recently used)", got)
	}
	if n := storeBytes(t, s); n > bound {
		t.Errorf("the store holds %d bytes, over its bound %d", n, bound)
	}
	// Nothing of b is left: its record, blob, chain.
	bh, _ := parseDigest(b.Digest)
	lh, _ := parseDigest(b.Layers[0].Digest)
	chain, _ := chainID("", b.Layers[0].DiffID)
	for _, p := range []string{"images/" + bh + ".json", "used/" + bh, "blobs/sha256/" + lh, "chains/" + chain, "chains/" + chain + ".json"} {
		if fileExists(filepath.Join(dir, p)) {
			t.Errorf("%s of the evicted image is still there", p)
		}
	}

	// Reopened (a restart): c, then a were used last; d evicts a.
	s = openStoreAt(t, dir)
	use(t, s, refs["c"], bound)
	use(t, s, refs["d"], bound)
	if got := listed(t, s); !sameRefs(got, refs["c"], refs["d"]) {
		t.Errorf("after reopening, c and d used: the store lists %v, want c and d", got)
	}
	// b again: fetched anew, and its content is b's.
	img := use(t, s, refs["b"], bound)
	if img.Digest != b.Digest {
		t.Errorf("b fetched anew is %s, want %s", img.Digest, b.Digest)
	}
	if got := listed(t, s); !sameRefs(got, refs["d"], refs["b"]) {
		t.Errorf("after b again: the store lists %v, want d and b", got)
	}
	if n := storeBytes(t, s); n > bound {
		t.Errorf("the store holds %d bytes, over its bound %d", n, bound)
	}
}

// An image held (a run uses it) is never evicted, even the least
// recently used, nor by another store on the same directory (another
// process); one the bound cannot keep goes once released.
func TestTrimNeverEvictsHeld(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStoreAt(t, dir)
	const size = 256 << 10
	a := layoutOf(t, imagetest.Image(t, nil, blobLayer(t, "a", size)))
	b := layoutOf(t, imagetest.Image(t, nil, blobLayer(t, "b", size)))
	c := layoutOf(t, imagetest.Image(t, nil, blobLayer(t, "c", size)))
	use(t, s, a, 1<<40)
	one := storeBytes(t, s)
	bound := one * 3 / 2 // one image fits, two do not

	imgA, rootA, releaseA, err := s.Use(context.Background(), a, Caps{StoreBytes: bound}, layer.Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	use(t, s, b, bound) // a held: b, the newest, is the one that goes once released
	if got := listed(t, s); !sameRefs(got, a) {
		t.Errorf("a held, b used and released: the store lists %v, want a alone", got)
	}
	if _, err := os.Stat(filepath.Join(rootA, "data", "a")); err != nil {
		t.Errorf("the root of the held image: %v", err)
	}

	// Another store on the directory (a CLI beside a server) trims: a is
	// held here, so it stays.
	other := openStoreAt(t, dir)
	if tr, err := other.Trim(1); err != nil || len(tr.Evicted) != 0 || len(tr.Held) != 1 {
		t.Errorf("another process's trim to 1 byte: %+v %v, want a kept as held", tr, err)
	}
	// ... and a hold there counts here too.
	releaseA()
	releaseOther, ok := other.Hold(imgA.Digest)
	if !ok {
		t.Fatal("another store cannot hold a")
	}
	time.Sleep(5 * time.Millisecond)
	use(t, s, c, bound)
	if got := listed(t, s); !sameRefs(got, a) {
		t.Errorf("a held by another store: the store lists %v, want a alone", got)
	}
	// Prune keeps a held image whose reference was removed.
	if err := s.Remove(a); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prune(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(rootA, "data", "a")); err != nil {
		t.Errorf("prune removed a held image: %v", err)
	}
	// Released (the other store's trim to 1 byte, which a kept above it,
	// then trims again), a goes.
	releaseOther()
	if _, err := s.Trim(bound); err != nil {
		t.Fatal(err)
	}
	if h, _ := parseDigest(imgA.Digest); fileExists(filepath.Join(dir, "images", h+".json")) || fileExists(filepath.Join(rootA, "data", "a")) {
		t.Error("a, released and unnamed, is still stored past the bound")
	}
	if n := storeBytes(t, s); n > bound {
		t.Errorf("the store holds %d bytes, over its bound %d", n, bound)
	}
}

// A held image that alone exceeds the bound is kept while held, and
// evicted when released.
func TestTrimOversizedImageKeptWhileHeld(t *testing.T) {
	t.Parallel()
	s := openStoreAt(t, t.TempDir())
	a := layoutOf(t, imagetest.Image(t, nil, blobLayer(t, "a", 128<<10)))
	_, root, release, err := s.Use(context.Background(), a, Caps{StoreBytes: 1 << 10}, layer.Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := listed(t, s); !sameRefs(got, a) {
		t.Errorf("held: the store lists %v", got)
	}
	if _, err := os.Stat(filepath.Join(root, "data", "a")); err != nil {
		t.Errorf("held: %v", err)
	}
	release()
	if got := listed(t, s); len(got) != 0 {
		t.Errorf("released: the store lists %v, want nothing", got)
	}
}

// Layers an evicted image shares with a kept one stay (blob and unpacked
// chain), and the kept image still runs from its tree; the store counts a
// file its chains share (hard links) once.
func TestTrimKeepsSharedLayers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStoreAt(t, dir)
	base := blobLayer(t, "base", 512<<10)
	x := layoutOf(t, imagetest.Image(t, nil, base, blobLayer(t, "x", 64<<10)))
	y := layoutOf(t, imagetest.Image(t, nil, base, blobLayer(t, "y", 64<<10)))
	z := layoutOf(t, imagetest.Image(t, nil, blobLayer(t, "z", 32<<10)))
	imgX := use(t, s, x, 1<<40)
	withX := storeBytes(t, s)
	imgY := use(t, s, y, 1<<40)
	withXY := storeBytes(t, s)
	// y adds its top layer (blob and file) and its chain's records, not
	// the base again (its chain links the base's file).
	if added := withXY - withX; added > 2*(64<<10)+(64<<10) {
		t.Errorf("an image sharing a 512 KiB base added %d bytes", added)
	}
	if naive := naiveSize(t, dir); naive < withXY+512<<10 {
		t.Errorf("usage %d, every path counted %d: the shared file should count once", withXY, naive)
	}
	// z needs room: x (least recently used) goes, y and the base stay.
	use(t, s, z, withXY+1<<10)
	if got := listed(t, s); !sameRefs(got, y, z) {
		t.Fatalf("the store lists %v, want y and z", got)
	}
	baseBlob, _ := parseDigest(imgX.Layers[0].Digest)
	topX, _ := parseDigest(imgX.Layers[1].Digest)
	baseChain, _ := chainID("", imgX.Layers[0].DiffID)
	xChain, _ := chainID(baseChain, imgX.Layers[1].DiffID)
	for p, want := range map[string]bool{"blobs/sha256/" + baseBlob: true, "chains/" + baseChain: true,
		"blobs/sha256/" + topX: false, "chains/" + xChain: false} {
		if fileExists(filepath.Join(dir, p)) != want {
			t.Errorf("%s: there %v, want %v", p, !want, want)
		}
	}
	root, err := s.Root(imgY, layer.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"data/base", "data/y"} {
		if fi, err := os.Stat(filepath.Join(root, f)); err != nil || fi.Size() == 0 {
			t.Errorf("y's %s: %v", f, err)
		}
	}
}

// naiveSize is the size of every file under dir, hard links counted each
// time.
func naiveSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// A trim never removes what a pull under way found in the store already:
// a blob it pinned stays though no image names it.
func TestTrimKeepsPinnedBlobs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStoreAt(t, dir)
	a := layoutOf(t, imagetest.Image(t, nil, blobLayer(t, "a", 64<<10)))
	img := use(t, s, a, 1<<40)
	h, _ := parseDigest(img.Layers[0].Digest)
	unpin := s.pin([]string{h})
	if err := s.Remove(a); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Trim(1); err != nil {
		t.Fatal(err)
	}
	if !fileExists(filepath.Join(dir, "blobs", "sha256", h)) {
		t.Error("a pinned blob was removed")
	}
	unpin()
	if _, err := s.Trim(1); err != nil {
		t.Fatal(err)
	}
	if fileExists(filepath.Join(dir, "blobs", "sha256", h)) {
		t.Error("an unpinned blob no image needs was kept past the bound")
	}
}

// Hold fails for an image the store no longer has; while another store
// evicts it (its lock taken) a hold fails rather than wait.
func TestHoldEvicted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openStoreAt(t, dir)
	img := use(t, s, layoutOf(t, imagetest.Image(t, nil, blobLayer(t, "a", 4<<10))), 1<<40)
	h, _ := parseDigest(img.Digest)
	f, ok := s.lockUsed(h)
	if !ok {
		t.Fatal("the used file of an image no one holds cannot be locked")
	}
	if _, ok := s.Hold(img.Digest); ok {
		t.Error("held an image being evicted")
	}
	f.Close()
	if _, err := s.Trim(1); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Hold(img.Digest); ok {
		t.Error("held an evicted image")
	}
	if _, err := s.Get(img.Ref); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get of the evicted image: %v, want ErrNotFound", err)
	}
	var st syscall.Stat_t
	if syscall.Stat(filepath.Join(dir, "used", h), &st) == nil {
		t.Error("the evicted image's used file is still there")
	}
}
