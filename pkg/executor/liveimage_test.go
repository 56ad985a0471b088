package executor

import (
	"context"
	"debug/elf"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/testkit/imagetest"
	"github.com/sandbox-run/sandbox-run/internal/testkit/livetest"
	"github.com/sandbox-run/sandbox-run/pkg/live"
	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// TestStartLiveInImage: a live sandbox whose root is an image with no C
// library at all (a static busybox): the agent runs there through the
// host's loader, the processes it starts see the image's root and
// environment (its PATH first, but the sandbox's HOME), none of the host's
// system, and the image's own /home beside the home link. The image stays
// held while the sandbox runs, and goes with Release.
func TestStartLiveInImage(t *testing.T) {
	x := imageExecutor(t, "")
	img := imagetest.ImageConfig(t, busyboxConfig, imagetest.Layer(t, append(imagetest.BusyboxFiles(t),
		imagetest.File{Name: "etc/image-marker", Data: []byte(imageMarker + "\n")},
		imagetest.File{Name: "home/other/kept", Data: []byte("kept\n")})...))
	ref := layoutRef(t, img)
	reqR, reqW := io.Pipe()
	evR, evW := io.Pipe()
	p, err := x.StartLive(context.Background(), LiveSpec{Image: ref, Languages: []string{"python"}, Env: map[string]string{"X": "y"},
		Limits: sandbox.Limits{WallTime: 10 * time.Minute}, Requests: reqR, Events: evW})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	ended := make(chan struct{})
	go func() { _, _ = p.Wait(); evW.Close(); close(ended) }()
	if p.ImageDigest != imagetest.Digest(t, img) {
		t.Errorf("image digest %q, want %q", p.ImageDigest, imagetest.Digest(t, img))
	}
	used := filepath.Join(x.imageStore.dir, "used", strings.TrimPrefix(p.ImageDigest, "sha256:"))
	if !heldFile(used) {
		t.Error("the sandbox's image is not held")
	}
	c := live.NewClient(reqW, evR)
	out, code := livetest.Run(t, c, "sh", "-c", `cat /etc/image-marker; echo "$PATH|$IMAGE_VAR|$HOME|$USER|$X"; pwd; ls /home; cat /home/other/kept; readlink /home/user; test -e /usr || echo no-usr; command -v python3 || echo no-python`)
	want := imageMarker + "\n/custom/bin:/bin:/usr/local/bin:/usr/bin|from-the-image|/home/user|sandbox|y\n/work\nother\nuser\nkept\n/work\nno-usr\nno-python\n"
	if code != 0 || out != want {
		t.Fatalf("exit %d:\n%s\nwant:\n%s", code, out, want)
	}
	// Files through the agent, in the sandbox's home.
	if out, code := livetest.Run(t, c, "sh", "-c", "echo hi > ~/f; cat /work/f"); code != 0 || out != "hi\n" {
		t.Fatalf("a file in the home: %d %q", code, out)
	}
	reqW.Close()
	select {
	case <-ended:
	case <-time.After(time.Minute):
		p.Kill()
		t.Fatal("the live sandbox did not end with its requests")
	}
	p.Release()
	if heldFile(used) {
		t.Error("the image is still held after Release")
	}
}

// An image that cannot be had is an *ImageError (a malformed reference,
// one the source does not have); a live sandbox in an image is never kept
// ready.
func TestStartLiveImageErrors(t *testing.T) {
	x := imageExecutor(t, "")
	var ie *ImageError
	for _, ref := range []string{"Not A Ref!", "oci:" + filepath.Join(t.TempDir(), "none")} {
		if _, err := x.StartLive(context.Background(), LiveSpec{Image: ref}); !errors.As(err, &ie) {
			t.Errorf("image %q: %v", ref, err)
		}
	}
	if err := x.PrewarmLive(LiveSpec{Image: "alpine"}, 1); err == nil {
		t.Error("an image's live sandboxes kept ready")
	}
}

// HoldImage holds an image the store has, and lets one it has not be.
func TestHoldImage(t *testing.T) {
	x := imageExecutor(t, "")
	img := imagetest.BusyboxImage(t, []string{"PATH=/bin"})
	if _, err := x.PullImage(context.Background(), layoutRef(t, img)); err != nil {
		t.Fatal(err)
	}
	d := imagetest.Digest(t, img)
	used := filepath.Join(x.imageStore.dir, "used", strings.TrimPrefix(d, "sha256:"))
	release := x.HoldImage(d)
	if !heldFile(used) {
		t.Error("not held")
	}
	release()
	if heldFile(used) {
		t.Error("held after release")
	}
	x.HoldImage("")()
	x.HoldImage("sha256:" + strings.Repeat("0", 64))()
}

// The agent in a root not the host's: a dynamically linked one through
// the host's loader with its libraries (those of the libraries too) at
// agentLibDir, a static one as it is; a file that is no program is an
// error, and so is a library found nowhere.
func TestAgentInRoot(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	interp, _ := elfInterp(f)
	f.Close()
	args, mounts, err := agentInRoot(exe)
	if err != nil {
		t.Fatal(err)
	}
	if interp == "" {
		t.Log("this test binary is statically linked")
		if !slices.Equal(args, []string{agent.Path}) || len(mounts) != 0 {
			t.Errorf("a static agent: %q %v", args, mounts)
		}
	} else {
		loader := agentLibDir + "/" + filepath.Base(interp)
		if want := []string{loader, "--library-path", agentLibDir, agent.Path}; !slices.Equal(args, want) {
			t.Errorf("args %q, want %q", args, want)
		}
		targets := map[string]bool{}
		for _, m := range mounts {
			targets[m.Target] = true
			if m.Writable || !filepath.IsAbs(m.Source) {
				t.Errorf("mount %+v", m)
			}
		}
		if !targets[loader] || !targets[agentLibDir+"/libc.so.6"] || len(targets) != len(mounts) {
			t.Errorf("mounts %+v", mounts)
		}
	}
	if args, mounts, err := agentInRoot(imagetest.Busybox(t)); err != nil || !slices.Equal(args, []string{agent.Path}) || len(mounts) != 0 {
		t.Errorf("a static program: %q %v %v", args, mounts, err)
	}
	notELF := filepath.Join(t.TempDir(), "script")
	os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755)
	if _, _, err := agentInRoot(notELF); err == nil {
		t.Error("a script as the agent")
	}
	if _, _, err := findLib("libnowhere.so.9", []string{t.TempDir()}, elf.ELFCLASS64, elf.EM_X86_64); err == nil {
		t.Error("a library found nowhere")
	}
}

// In an image, a live sandbox's environment is the image's (its PATH
// first, then the usual directories it lacks) but for HOME, USER and
// TMPDIR; the spec's comes over it. On the host's system, the
// toolchains' directories come first.
func TestLiveEnvInImage(t *testing.T) {
	got := testExec.liveEnv(nil, []string{"PATH=/opt/x/bin:/usr/bin", "LANG=de_DE.UTF-8", "HOME=/root", "USER=root", "TMPDIR=/var/tmp", "A=b", "=bad"},
		map[string]string{"A": "c"})
	want := []string{"A=c", "HOME=" + LiveHome, "LANG=de_DE.UTF-8", "PATH=/opt/x/bin:/usr/bin:/usr/local/bin:/bin", "TMPDIR=/tmp", "USER=sandbox"}
	if !slices.Equal(got, want) {
		t.Errorf("in an image: %q, want %q", got, want)
	}
	got = testExec.liveEnv([]*Toolchain{{Home: "/opt/py", Bin: "/opt/py/bin/python3"}}, nil, nil)
	if !slices.Contains(got, "PATH=/opt/py/bin:/usr/local/bin:/usr/bin:/bin") {
		t.Errorf("on the host: %q", got)
	}
}
