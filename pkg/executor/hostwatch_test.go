package executor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestFollowHost: what is installed on the host after the executor
// started is usable without a restart: a file a language mounts by a
// pattern (as python mounts /etc/matplotlibrc) and a toolchain that was
// missing. Changes to names no language looks for refresh nothing.
func TestFollowHost(t *testing.T) {
	old := hostQuiet
	hostQuiet = 100 * time.Millisecond
	t.Cleanup(func() { hostQuiet = old })
	host := t.TempDir()
	for _, d := range []string{"etc", "bin"} {
		if err := os.Mkdir(filepath.Join(host, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	langs := filepath.Join(t.TempDir(), "languages.yaml")
	yaml := fmt.Sprintf(`languages:
  - {name: rcsh, source: main.sh, toolchain: [/bin/bash], mounts: ["%[1]s/etc/toolrc*:/etc/toolrc"], run: ["{bin}", main.sh]}
  - {name: latesh, source: main.sh, toolchain: ["%[1]s/bin/latesh"], run: ["{bin}", main.sh]}
`, host)
	if err := os.WriteFile(langs, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	x, err := New(Config{Languages: langs, DataDir: t.TempDir(), ToolchainCacheDir: t.TempDir(), CompileCacheBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	watching := make(chan struct{})
	testHookWatching = func() { close(watching) }
	t.Cleanup(func() { testHookWatching = nil })
	ctx, cancel := context.WithCancel(context.Background())
	refreshed := make(chan struct{}, 16)
	followed := make(chan error, 1)
	go func() { followed <- x.FollowHost(ctx, func() { refreshed <- struct{}{} }) }()
	defer func() {
		cancel()
		if err := <-followed; err != nil {
			t.Errorf("FollowHost: %v", err)
		}
	}()
	rc := filepath.Join(host, "etc", "toolrc")
	script := []byte("cat /etc/toolrc 2>/dev/null || echo none\n")
	expectCompleted(t, executeWith(t, x, &Request{Language: "rcsh", Code: script}), "none\n")
	if _, _, err := x.reg.Resolve("latesh", ""); err == nil {
		t.Fatal("latesh is there before it is installed")
	}
	<-watching
	waitRefresh := func(what string) {
		t.Helper()
		select {
		case <-refreshed:
		case <-time.After(time.Minute):
			t.Fatalf("no refresh a minute after %s", what)
		}
	}
	// "Installed" the way dpkg does it: a new name, then renamed in place.
	if err := os.WriteFile(rc+".dpkg-new", []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(rc+".dpkg-new", rc); err != nil {
		t.Fatal(err)
	}
	waitRefresh("a mounted file was installed")
	expectCompleted(t, executeWith(t, x, &Request{Language: "rcsh", Code: script}), "from the host\n")

	if err := os.Symlink("/bin/bash", filepath.Join(host, "bin", "latesh")); err != nil {
		t.Fatal(err)
	}
	waitRefresh("a toolchain was installed")
	expectCompleted(t, executeWith(t, x, &Request{Language: "latesh", Code: []byte("echo late\n")}), "late\n")

	if g := x.reg.Generation(); g < 2 {
		t.Errorf("generation %d after two changes", g)
	}
	// What is watched: the pattern's directory and component, bare names
	// in the search path; a change to a name nothing looks for is not one.
	w := x.reg.hostWatches()
	for _, c := range []struct {
		dir, name string
		want      bool
	}{
		{filepath.Join(host, "etc"), "toolrc", true},
		{filepath.Join(host, "etc"), "toolrc.local", true},
		{filepath.Join(host, "etc"), "toolrc.dpkg-new", true}, // harmless: the rename follows
		{filepath.Join(host, "etc"), "unrelated", false},
		{filepath.Join(host, "bin"), "latesh", true},
		{filepath.Join(host, "bin"), "other-tool", false},
		{"/usr/bin", "node", true}, // javascript's bare candidate, in the search path
	} {
		if got := w.matches(c.dir, c.name); got != c.want {
			t.Errorf("a change to %s in %s matters: %v, want %v (watches %v)", c.name, c.dir, got, c.want, w)
		}
	}
}

// TestWatchPatterns: what a pattern depends on.
func TestWatchPatterns(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "not", "yet")
	w := watchSet{}
	for _, p := range []string{"/etc/matplotlibrc", "/etc/java-*", "/usr/lib/jvm/java-*/bin/java", missing + "/bin/tool"} {
		w.addPattern(p)
	}
	for dir, want := range map[string]string{"/etc": "[matplotlibrc java-*]", "/usr/lib/jvm": "[java-*]", filepath.Dir(filepath.Dir(missing)): "[not]"} {
		if got := fmt.Sprint(w[dir]); got != want {
			t.Errorf("%s: %s, want %s (%v)", dir, got, want, w)
		}
	}
}
