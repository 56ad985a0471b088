package executor

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/sandbox-run/sandbox-run/internal/testkit/imagetest"
	"github.com/sandbox-run/sandbox-run/pkg/images"
	"github.com/sandbox-run/sandbox-run/pkg/images/registry"
)

// markedImage is a busybox image with /etc/marker (its name) and a file
// of random bytes: images of about one size that share no layer.
func markedImage(t *testing.T, name string) v1.Image {
	t.Helper()
	data := make([]byte, 128<<10)
	rand.Read(data)
	return imagetest.BusyboxImage(t, []string{"PATH=/bin"},
		imagetest.File{Name: "etc/marker", Data: []byte(name + "\n")}, imagetest.File{Name: "etc/random", Data: data})
}

// The image store stays within ImageCaps.StoreBytes: adding an image
// evicts the least recently used one; an evicted image runs again
// (fetched anew, in no sandbox of the pool left from before); an image a
// run uses is not evicted under it.
func TestImageStoreBound(t *testing.T) {
	imgA, imgB := markedImage(t, "image-a"), markedImage(t, "image-b")
	a, b := layoutRef(t, imgA), layoutRef(t, imgB)
	perImage := imagetest.StoreBytes(t, imgA) // its blob, its unpacked files, records
	bound := perImage * 3 / 2                 // one fits, two do not
	data := t.TempDir()
	x, err := New(Config{DataDir: data, CacheDir: t.TempDir(), Engine: testExec.engine, CompileCacheBytes: -1,
		ImageRegistry: registry.Fetch, ImageCaps: images.Caps{StoreBytes: bound}})
	if err != nil {
		t.Fatal(err)
	}
	store, err := x.Images()
	if err != nil {
		t.Fatal(err)
	}
	run := func(ref, code, want string) {
		t.Helper()
		res := executeWith(t, x, &Request{Language: "sh", Image: ref, Code: []byte(code)})
		if res.Status != StatusCompleted || res.Stdout != want {
			t.Errorf("run in %s: %s", ref, describe(res))
		}
	}
	stored := func() string {
		t.Helper()
		list, err := store.List()
		if err != nil {
			t.Fatal(err)
		}
		var refs []string
		for _, img := range list {
			refs = append(refs, img.Ref)
		}
		n, err := store.Usage()
		if err != nil {
			t.Fatal(err)
		}
		if n > bound {
			t.Errorf("the store holds %d bytes, over its bound %d (%v)", n, bound, refs)
		}
		return strings.Join(refs, " ")
	}
	run(a, "cat /etc/marker", "image-a\n")
	run(b, "cat /etc/marker", "image-b\n")
	if got := stored(); got != b {
		t.Errorf("after a, b: the store has %q, want b alone", got)
	}
	run(a, "cat /etc/marker; ls /bin/sh", "image-a\n/bin/sh\n") // fetched anew
	if got := stored(); got != a {
		t.Errorf("after a again: the store has %q, want a alone", got)
	}

	// A run in a reads its file after b was added: a, in use, stays.
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(a, "sleep 2; cat /etc/marker", "image-a\n")
	}()
	used := filepath.Join(data, "images", "used", strings.TrimPrefix(imagetest.Digest(t, imgA), "sha256:"))
	for deadline := time.Now().Add(time.Minute); !heldFile(used); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the run never held its image")
		}
	}
	run(b, "cat /etc/marker", "image-b\n")
	<-done
	if got := stored(); got != a {
		t.Errorf("b added while a ran: the store has %q, want a (in use) alone", got)
	}
}

// heldFile says whether someone holds a flock on the file, from
// /proc/locks: probing with a lock of our own would make the store's
// non-blocking hold fail while we hold it (a run then reads its image as
// evicted: seen in CI).
func heldFile(p string) bool {
	st, err := os.Stat(p)
	if err != nil {
		return false
	}
	ino := st.Sys().(*syscall.Stat_t).Ino
	locks, err := os.ReadFile("/proc/locks")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(locks), "\n") {
		// "1: FLOCK  ADVISORY  READ  1234 08:01:5678 0 EOF": major:minor:inode
		f := strings.Fields(line)
		if len(f) > 5 && f[1] == "FLOCK" {
			if parts := strings.Split(f[5], ":"); len(parts) == 3 && parts[2] == strconv.FormatUint(ino, 10) {
				return true
			}
		}
	}
	return false
}
