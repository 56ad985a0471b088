package local

import (
	"context"
	"errors"
	"github.com/sandbox-run/sandbox-run/internal/testkit/livetest"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/testkit/imagetest"
	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/images/registry"
	"github.com/sandbox-run/sandbox-run/pkg/live"
	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

func TestMain(m *testing.M) {
	sandbox.Init() // a sandbox's PID 1 is this binary re-executed
	agent.Main()   // and a live sandbox's first program
	os.Exit(m.Run())
}

// marker is /etc/marker's content in the test image.
const marker = "only-in-the-local-test-image"

// heldImage says whether the image store under data holds the image with
// digest (a shared flock on its mark of use).
func heldImage(data, digest string) bool {
	f, err := os.Open(filepath.Join(data, "images", "used", strings.TrimPrefix(digest, "sha256:")))
	if err != nil {
		return false
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return true
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

// TestLiveStarterInImage: the starter passes a sandbox's image to the
// executor and holds it while the sandbox runs, on pipes (until it ends)
// and on a socket (its record keeps the image, and the starter of the
// next process holds it again when it takes the sandbox over); an image
// the source does not have is the request's error.
func TestLiveStarterInImage(t *testing.T) {
	img := imagetest.BusyboxImage(t, []string{"PATH=/bin"}, imagetest.File{Name: "etc/marker", Data: []byte(marker + "\n")})
	ref := imagetest.WriteLayout(t, filepath.Join(t.TempDir(), "layout"), img, "")
	digest := imagetest.Digest(t, img)
	data := t.TempDir()
	x, err := executor.New(executor.Config{DataDir: data, CacheDir: t.TempDir(), CompileCacheBytes: -1, ImageRegistry: registry.Fetch})
	if err != nil {
		t.Fatal(err)
	}
	start := LiveStarter(x)
	opts := live.StartOptions{Image: ref, MemoryBytes: 128 << 20, DiskBytes: 16 << 20, Lifetime: 10 * time.Minute}

	// On pipes: it ends with its requests, and lets its image go.
	reqR, reqW := io.Pipe()
	evR, evW := io.Pipe()
	run, err := start.StartLive(context.Background(), opts, reqR, evW)
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	go func() { run.Wait(); evW.Close(); close(ended) }() // Wait feeds the requests in
	if out, code := livetest.Run(t, live.NewClient(reqW, evR), "sh", "-c", "cat /etc/marker"); code != 0 || out != marker+"\n" {
		t.Fatalf("in the image: %d %q", code, out)
	}
	if !heldImage(data, digest) {
		t.Error("the image is not held while the sandbox runs")
	}
	reqW.Close()
	<-ended
	if heldImage(data, digest) {
		t.Error("the image is held after the sandbox ended")
	}

	// On a socket, through Managers that keep it over a restart.
	cfg := live.Config{StateDir: t.TempDir()}
	m := live.NewManager(start, cfg)
	s, err := m.Create(context.Background(), "k", live.CreateOptions{Image: ref})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := os.ReadFile(filepath.Join(cfg.StateDir, s.ID+".json"))
	if err != nil || !strings.Contains(string(rec), digest) {
		t.Fatalf("the record keeps no image digest: %v %s", err, rec)
	}
	m.Detach()
	m2 := live.NewManager(LiveStarter(x), cfg)
	defer m2.Close()
	s2, err := m2.Get("k", s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if out, code := livetest.Run(t, s2.Client(), "sh", "-c", "cat /etc/marker"); code != 0 || out != marker+"\n" {
		t.Fatalf("taken over: %d %q", code, out)
	}
	if !heldImage(data, digest) {
		t.Error("the image is not held again after the take-over")
	}
	if err := m2.Kill("k", s.ID); err != nil {
		t.Fatal(err)
	}
	if heldImage(data, digest) {
		t.Error("the image is held after the sandbox was killed")
	}

	opts.Image = "oci:" + filepath.Join(t.TempDir(), "none")
	if _, err := start.StartLive(context.Background(), opts, nil, nil); !errors.Is(err, live.ErrInvalid) {
		t.Errorf("an image that is not there: %v", err)
	}
}
