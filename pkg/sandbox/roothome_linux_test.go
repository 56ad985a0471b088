package sandbox

import (
	"os"
	"path/filepath"
	"testing"
)

// A Home in a Root that has a directory there of its own (an image's
// /home): the link to /work goes beside that directory's entries, which
// stay, and nothing is written to the root's tree.
func TestSpecRootHome(t *testing.T) {
	bb := staticBusybox(t)
	if bb == "" {
		t.Skip("no static busybox (Debian's busybox-static)")
	}
	root := t.TempDir()
	for _, d := range []string{"bin", "home/other"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "busybox"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "home", "other", "kept"), []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := run(t, &Spec{
		Args: []string{"/bin/busybox", "sh", "-c", "/bin/busybox cat /home/other/kept; /bin/busybox readlink /home/user; echo hi > /home/user/f; /bin/busybox cat /work/f"},
		Root: root, Mounts: []Mount{}, Env: []string{"PATH=/bin"}, Home: "/home/user",
	})
	if got, want := string(res.Stdout), "kept\n/work\nhi\n"; res.ExitCode != 0 || got != want {
		t.Errorf("exit %d, stdout %q (want %q), stderr %s", res.ExitCode, got, want, res.Stderr)
	}
	if entries, _ := os.ReadDir(filepath.Join(root, "home")); len(entries) != 1 {
		t.Errorf("the root's /home has %d entries", len(entries))
	}
}
