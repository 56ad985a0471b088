package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/internal/testkit/imagetest"
)

// execute --image runs in an image from a registry (the local CLI takes
// any image), and images ls | rm | pull | prune manage the data dir's
// store; a cached image's layer is fetched once.
func TestImagesCommand(t *testing.T) {
	reg := imagetest.NewRegistry(t)
	img := imagetest.BusyboxImage(t, []string{"PATH=/bin"}, imagetest.File{Name: "etc/marker", Data: []byte("cli-image\n")})
	ref := reg.Push(t, img, "cli/busybox:1")
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	layerDigest, err := layers[0].Digest()
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"SANDBOX_RUN_DATA_DIR=" + filepath.Join(t.TempDir(), "data")}
	for i := 0; i < 2; i++ {
		r := cliEnv(t, env, "", "execute", "-l", "sh", "--image", ref, "--code", "cat /etc/marker; ls /usr 2>/dev/null || echo no-usr")
		if r.code != 0 || r.stdout != "cli-image\nno-usr\n" {
			t.Fatalf("run %d: exit %d stdout %q stderr %q", i, r.code, r.stdout, r.stderr)
		}
	}
	if n := reg.BlobGets(layerDigest.String()); n != 1 {
		t.Errorf("the layer was fetched %d times over two runs, want once", n)
	}
	r := cliEnv(t, env, "", "images", "ls", "-o", "json")
	var list []struct{ Ref, Digest string }
	if err := json.Unmarshal([]byte(r.stdout), &list); r.code != 0 || err != nil || len(list) != 1 || list[0].Ref != ref {
		t.Fatalf("images ls: exit %d %q %v (want %s)", r.code, r.stdout, err, ref)
	}
	if r := cliEnv(t, env, "", "images", "rm", ref); r.code != 0 || !strings.Contains(r.stdout, "removed") {
		t.Errorf("images rm: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := cliEnv(t, env, "", "images", "ls"); r.code != 0 || strings.Contains(r.stdout, ref) {
		t.Errorf("images ls after rm: exit %d %q", r.code, r.stdout)
	}
	if r := cliEnv(t, env, "", "images", "rm", ref); r.code == 0 {
		t.Errorf("images rm of a removed image: exit 0")
	}
	if r := cliEnv(t, env, "", "images", "prune", "-o", "json"); r.code != 0 || !strings.Contains(r.stdout, "freed_bytes") {
		t.Errorf("images prune: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := cliEnv(t, env, "", "images", "pull", ref); r.code != 0 || !strings.Contains(r.stdout, "sha256:") {
		t.Errorf("images pull: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := cliEnv(t, env, "", "images", "pull", reg.Host+"/cli/missing:1"); r.code != exitUsage {
		t.Errorf("images pull of a missing image: exit %d (want %d) %q", r.code, exitUsage, r.stderr)
	}
	if r := cliEnv(t, env, "", "images", "frobnicate"); r.code != exitUsage {
		t.Errorf("images frobnicate: exit %d", r.code)
	}
	if r := cliEnv(t, env, "", "execute", "-l", "sh", "--image", "Not A Ref", "--code", "echo ran"); r.code != exitUsage || strings.Contains(r.stdout, "ran") {
		t.Errorf("execute --image with an invalid reference: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
}
