package gvisor

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCheckpointRestore proves on this kernel what pause, fork and
// snapshots build on: a Python process holding state in a sandbox of this
// backend's making (its bundle, /work, cgroup) is checkpointed while it
// runs on, and restored into a new sandbox (a bundle of its own, another
// /work) that continues with that state; the two go on independently.
func TestCheckpointRestore(t *testing.T) {
	g := testRunner(t)
	// It keeps 16 MiB of random bytes and a counter, and for each line
	// it reads says the line, the counter, and whether the bytes' digest
	// is still the first one.
	s := spec("/usr/bin/python3", "-u", "-c", `import hashlib, os, sys
data = os.urandom(16 << 20)
first = hashlib.sha256(data).hexdigest()[:16]
n = 0
for line in sys.stdin:
    n += 1
    print(line.strip(), n, first, hashlib.sha256(data).hexdigest()[:16] == first)
`)
	l := s.Limits.WithDefaults()
	start := func(b *box, args ...string) (*os.File, *bufio.Reader) {
		t.Helper()
		inR, inW, _ := os.Pipe()
		outR, outW, _ := os.Pipe()
		cmd := exec.Command(g.cfg.Runsc, g.runArgs(b, args...)...)
		cmd.Dir = b.bundle
		cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, outW
		if err := cmd.Run(); err != nil {
			t.Fatalf("runsc %s: %v", args[0], err)
		}
		inR.Close()
		outW.Close()
		t.Cleanup(func() { inW.Close(); outR.Close() })
		return inW, bufio.NewReader(outR)
	}
	ask := func(in *os.File, out *bufio.Reader, line string) []string {
		t.Helper()
		if _, err := in.WriteString(line + "\n"); err != nil {
			t.Fatal(err)
		}
		reply, err := out.ReadString('\n')
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		return strings.Fields(reply)
	}
	b1, err := g.newBox(s, l, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b1.close(g)
	in1, out1 := start(b1, "run", "--detach", "--bundle", b1.bundle, b1.id)
	first := ask(in1, out1, "before")
	if len(first) != 4 || first[1] != "1" || first[3] != "True" {
		t.Fatalf("the program: %q", first)
	}

	image := filepath.Join(t.TempDir(), "image")
	t0 := time.Now()
	if out, err := exec.Command(g.cfg.Runsc, g.runArgs(b1, "checkpoint", "--leave-running", "--image-path", image, b1.id)...).CombinedOutput(); err != nil {
		t.Fatalf("checkpoint: %v %s", err, out)
	}
	checkpointed := time.Since(t0)

	b2, err := g.newBox(s, l, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.close(g)
	t0 = time.Now()
	in2, out2 := start(b2, "restore", "--detach", "--image-path", image, "--bundle", b2.bundle, b2.id)
	restored := time.Since(t0)
	size := int64(0)
	filepath.Walk(image, func(_ string, fi os.FileInfo, _ error) error {
		if fi != nil && !fi.IsDir() {
			size += fi.Size()
		}
		return nil
	})
	t.Logf("checkpoint (leaving it running) %v, restore %v, image %.1f MiB", checkpointed, restored, float64(size)/(1<<20))

	// The copy goes on from the state at the checkpoint: its counter
	// next, its 16 MiB the same; the original goes on by itself.
	if got := ask(in2, out2, "copy"); len(got) != 4 || got[1] != "2" || got[2] != first[2] || got[3] != "True" {
		t.Errorf("the restored copy: %q (before the checkpoint: %q)", got, first)
	}
	if got := ask(in1, out1, "original"); len(got) != 4 || got[1] != "2" || got[2] != first[2] {
		t.Errorf("the original after the checkpoint: %q", got)
	}
	if got := ask(in2, out2, "copy-again"); len(got) != 4 || got[1] != "3" {
		t.Errorf("the copy again: %q", got)
	}
	// It is a sandbox of its own: its /work is b2's, not b1's.
	if err := os.WriteFile(filepath.Join(b2.work.Dir(), "mine"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(b1.work.Dir(), "mine")); err == nil {
		t.Error("the copy's /work is the original's")
	}
}
