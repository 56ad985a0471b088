package live_test

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
	"github.com/sandbox-run/sandbox-run/pkg/gvisor"
	"github.com/sandbox-run/sandbox-run/pkg/images/registry"
	"github.com/sandbox-run/sandbox-run/pkg/live"
	"github.com/sandbox-run/sandbox-run/pkg/local"
)

// imageMarker is /etc/image-marker's content in the test image: only the
// image has it.
const imageMarker = "only-in-the-live-test-image"

// held says whether a shared flock is held on the file (the image
// store's mark of an image in use).
func held(p string) bool {
	f, err := os.Open(p)
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

// TestLiveInImage: a live sandbox whose root is an OCI image with no C
// library (a static busybox), as the server keeps it (a state dir), made
// by the engine and under gVisor: its processes see the image's root and
// environment, files go both ways through the agent, the image is held
// while the sandbox runs; a new Manager takes it over after a restart with
// its image, which it holds again, and lets go once the sandbox is killed.
func TestLiveInImage(t *testing.T) {
	t.Run("native", func(t *testing.T) { testLiveInImage(t, "") })
	t.Run("gvisor", func(t *testing.T) {
		if _, err := gvisor.Find(""); err != nil {
			t.Skip(err)
		}
		testLiveInImage(t, "gvisor")
	})
}

func testLiveInImage(t *testing.T, isolation string) {
	img := imagetest.BusyboxImage(t, []string{"PATH=/bin", "IMAGE_VAR=from-the-image"},
		imagetest.File{Name: "etc/image-marker", Data: []byte(imageMarker + "\n")})
	ref := imagetest.WriteLayout(t, filepath.Join(t.TempDir(), "layout"), img, "")
	home, _ := os.UserHomeDir()
	data := t.TempDir()
	xc := executor.Config{DataDir: data, CacheDir: filepath.Join(home, ".cache", "sandbox-run-test", "cache"),
		Engine: live.Engine(), ImageRegistry: registry.Fetch}
	if isolation != "" {
		g, err := gvisor.New(gvisor.Config{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		xc.GVisor = g
	}
	x, err := executor.New(xc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := live.Config{StateDir: t.TempDir(), DefaultMemoryBytes: 256 << 20}
	m := live.NewManager(local.LiveStarter(x), cfg)
	ctx := context.Background()
	s, err := m.Create(ctx, "k", live.CreateOptions{Image: ref, Timeout: time.Hour, Isolation: isolation})
	if err != nil {
		t.Fatal(err)
	}
	if s.Image != ref {
		t.Errorf("the sandbox's image is %q, want %q", s.Image, ref)
	}
	used := filepath.Join(data, "images", "used", strings.TrimPrefix(imagetest.Digest(t, img), "sha256:"))
	if !held(used) {
		t.Error("the sandbox's image is not held")
	}
	if out, code := livetest.Run(t, s.Client(), "sh", "-c", `cat /etc/image-marker; echo "$IMAGE_VAR $HOME"; test -e /usr/bin/python3 || echo no-host`); code != 0 ||
		out != imageMarker+"\nfrom-the-image /home/user\nno-host\n" {
		t.Fatalf("in the image: %d %q", code, out)
	}
	hostKernel, _ := os.ReadFile("/proc/version")
	if out, _ := livetest.Run(t, s.Client(), "sh", "-c", "cat /proc/version"); (out == string(hostKernel)) == (isolation == "gvisor") {
		t.Errorf("isolation %q, the kernel: %q", isolation, out)
	}
	if _, err := s.WriteFile(ctx, "/home/user/note", strings.NewReader("written"), 0o644); err != nil {
		t.Fatal(err)
	}
	read := func(s *live.Sandbox) string {
		t.Helper()
		f, err := s.Open(ctx, "/home/user/note")
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(f)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got := read(s); got != "written" {
		t.Fatalf("read back %q", got)
	}
	if out, _ := livetest.Run(t, s.Client(), "sh", "-c", "cat /work/note"); out != "written" {
		t.Fatalf("the file in the sandbox: %q", out)
	}

	m.Detach() // the server stops: the sandbox runs on
	m2 := live.NewManager(local.LiveStarter(x), cfg)
	defer m2.Close()
	if n := m2.Reattached(); n != 1 {
		t.Fatalf("taken over: %d", n)
	}
	s2, err := m2.Get("k", s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if s2.Image != ref {
		t.Errorf("taken over with image %q, want %q", s2.Image, ref)
	}
	if !held(used) {
		t.Error("the image is not held after the take-over")
	}
	if out, code := livetest.Run(t, s2.Client(), "sh", "-c", "cat /etc/image-marker"); code != 0 || out != imageMarker+"\n" {
		t.Fatalf("after the take-over: %d %q", code, out)
	}
	if got := read(s2); got != "written" {
		t.Fatalf("after the take-over, read back %q", got)
	}
	if err := m2.Kill("k", s.ID); err != nil {
		t.Fatal(err)
	}
	if held(used) {
		t.Error("the image is still held after the sandbox ended")
	}
}

// A live sandbox in an image the source does not have is the request's
// error (live.ErrInvalid), and holds nothing.
func TestLiveInUnknownImage(t *testing.T) {
	x, err := executor.New(executor.Config{DataDir: t.TempDir(), CacheDir: t.TempDir(), Engine: live.Engine(), ImageRegistry: registry.Fetch})
	if err != nil {
		t.Fatal(err)
	}
	m := live.NewManager(local.LiveStarter(x), live.Config{})
	defer m.Close()
	_, err = m.Create(context.Background(), "k", live.CreateOptions{Image: "oci:" + filepath.Join(t.TempDir(), "none")})
	if !errors.Is(err, live.ErrInvalid) {
		t.Fatalf("an image that is not there: %v", err)
	}
}
