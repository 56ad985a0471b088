package executor

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// fakeToolchains writes shell scripts printing a version, one per version.
func fakeToolchains(t *testing.T, versions ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, v := range versions {
		p := filepath.Join(dir, "fake-"+v, "bin", "fake")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\necho fake "+v+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func writeUserFile(t *testing.T, doc string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "langs.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestResolveVersions(t *testing.T) {
	dir := fakeToolchains(t, "3.11.2", "3.12.1", "3.9.18", "1.0.0-nightly")
	entry := func(v string, extra string) string {
		return "  - {name: fakelang, aliases: [fk], source: main.fk, toolchain: [" + dir + "/fake-" + v + "/bin/fake], version: [\"{bin}\"], run: [\"{bin}\"]" + extra + "}\n"
	}
	doc := "languages:\n" + entry("3.9.18", "") + entry("3.11.2", ", default: true") + entry("3.12.1", "") + entry("1.0.0-nightly", "") +
		"  - {name: fakelang, source: main.fk, toolchain: [/nonexistent/fake], version: [\"{bin}\"], run: [\"{bin}\"]}\n"
	reg, err := NewRegistry(writeUserFile(t, doc))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ ask, want string }{
		{"", "3.11.2"}, {"3.12", "3.12.1"}, {"3.12.1", "3.12.1"}, {"3", "3.11.2"}, {"3.9", "3.9.18"},
		{"nightly", "1.0.0-nightly"}, {"1", "1.0.0-nightly"},
	} {
		l, tc, err := reg.Resolve("FK", c.ask)
		if err != nil || tc.Version != c.want || l.Name != "fakelang" {
			t.Errorf("Resolve(fk, %q) = %v %v, want %s", c.ask, tc, err, c.want)
		}
	}
	_, _, err = reg.Resolve("fakelang", "3.1")
	var ue *UnsupportedLanguageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "3.12.1") || !strings.Contains(err.Error(), `"3.1"`) {
		t.Errorf("Resolve(3.1) error %v, want one listing the installed versions", err)
	}
	if l, ok := reg.Lookup("fk"); !ok || reg.Toolchain(l).Version != "3.11.2" {
		t.Errorf("Lookup(fk) = %v %v, want the default entry", l, ok)
	}
	if got := len(reg.Entries("fakelang")); got != 5 {
		t.Errorf("Entries = %d, want 5", got)
	}
	n := 0
	for _, name := range reg.LanguageNames() {
		if name == "fakelang" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("LanguageNames lists fakelang %d times", n)
	}
	// Without a default entry, the first available one.
	doc = "languages:\n" + "  - {name: other, source: m, toolchain: [/nonexistent/x], run: [x]}\n" +
		strings.ReplaceAll(entry("3.12.1", ""), "fakelang, aliases: [fk]", "other") + strings.ReplaceAll(entry("3.9.18", ""), "fakelang, aliases: [fk]", "other")
	reg, err = NewRegistry(writeUserFile(t, doc))
	if err != nil {
		t.Fatal(err)
	}
	if _, tc, err := reg.Resolve("other", ""); err != nil || tc.Version != "3.12.1" {
		t.Errorf("Resolve(other) = %v %v, want the first available", tc, err)
	}
	// A name that is another language's alias is refused.
	if _, err := ParseLanguages([]byte("languages:\n  - {name: a, aliases: [b], source: m, toolchain: [x], run: [x]}\n  - {name: b, source: m, toolchain: [x], run: [x]}\n")); err == nil {
		t.Errorf("ParseLanguages accepted a name used as another language's alias")
	}
}

func TestMergeLanguages(t *testing.T) {
	base := []Language{{Name: "a", Toolchain: []string{"/x"}, Source: "1"}, {Name: "a", Toolchain: []string{"/y"}, Source: "2"}}
	got := mergeLanguages(base, []Language{{Name: "a", Toolchain: []string{"/y"}, Source: "3"}, {Name: "a", Toolchain: []string{"/z"}, Source: "4"}, {Name: "b", Toolchain: []string{"/y"}, Source: "5"}})
	var srcs []string
	for _, l := range got {
		srcs = append(srcs, l.Name+l.Source)
	}
	if strings.Join(srcs, " ") != "a1 a3 a4 b5" {
		t.Errorf("merged %v", srcs)
	}
}

func TestEmbeddedLanguages(t *testing.T) {
	langs, err := embeddedLanguages()
	if err != nil {
		t.Fatal(err)
	}
	defaults := map[string]int{}
	for _, l := range langs {
		if l.Default {
			defaults[l.Name]++
		}
	}
	for name, n := range defaults {
		if n > 1 {
			t.Errorf("%s has %d default entries", name, n)
		}
	}
	// Debian's python stays the default.
	reg, err := NewRegistry("")
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := reg.Lookup("python"); !ok || l.Toolchain[0] != "/usr/bin/python3" {
		t.Errorf("default python is %v", l)
	}
}

func TestVersionOf(t *testing.T) {
	for in, want := range map[string]string{
		"rustc 1.97.0-nightly (abc 2026-01-01)": "1.97.0-nightly",
		"Python 3.12.1":                         "3.12.1",
		"gcc (Debian 12.2.0-14) 12.2.0":         "12.2.0",
		"v20.20.2":                              "20.20.2",
	} {
		if got := versionOf(in); got != want {
			t.Errorf("versionOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestVersionCheckPrivateHome: a toolchain's version command runs with a
// HOME, TMPDIR and working directory of its own, removed afterwards, and
// with the JVM's performance data (/tmp/hsperfdata_<user>, which ignores
// TMPDIR) off. It used to run with HOME=/tmp and left Go's telemetry in
// /tmp/.config and the JVM's hsperfdata_root in /tmp.
func TestVersionCheckPrivateHome(t *testing.T) {
	dir := t.TempDir()
	tmp := filepath.Join(dir, "tmp") // TMPDIR of this test's version checks
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", tmp)
	// A check's directory whose process ended during the check goes; a
	// running process's stays.
	dead := exec.Command("/bin/true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(tmp, fmt.Sprintf("%s%d-1", versionDirPrefix, dead.Process.Pid))
	live := filepath.Join(tmp, fmt.Sprintf("%s%d-1", versionDirPrefix, os.Getppid()))
	for _, d := range []string{stale, live} {
		if err := os.MkdirAll(filepath.Join(d, ".config"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	staleVersionDirs = sync.Once{}
	record := filepath.Join(dir, "record")
	bin := filepath.Join(dir, "bin", "fake")
	os.MkdirAll(filepath.Dir(bin), 0o755)
	script := "#!/bin/sh\n" +
		"mkdir -p \"$HOME/.config/go/telemetry\" && : > \"$TMPDIR/scratch\" && : > crash.log || exit 1\n" +
		"printf 'home=%s\\ntmpdir=%s\\ncwd=%s\\njava=%s\\ngotelemetry=%s\\n' \"$HOME\" \"$TMPDIR\" \"$(pwd)\" \"$JAVA_TOOL_OPTIONS\" \"$(cat $XDG_CONFIG_HOME/go/telemetry/mode)\" > " + record + "\n" +
		"echo 'Picked up JAVA_TOOL_OPTIONS: -XX:-UsePerfData' >&2\necho fake 2.5.1\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	reg, err := NewRegistry(writeUserFile(t, "languages:\n  - {name: fakelang, source: main.fk, toolchain: ["+bin+"], version: [\"{bin}\"], run: [\"{bin}\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, tc, err := reg.Resolve("fakelang", "")
	if err != nil || tc.Version != "2.5.1" {
		t.Fatalf("Resolve: %+v %v (the JVM's notice is not the version)", tc, err)
	}
	b, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		got[k] = v
	}
	if home := got["home"]; filepath.Dir(home) != tmp || got["tmpdir"] != home || got["cwd"] != home {
		t.Errorf("HOME %q, TMPDIR %q, cwd %q: want one directory of the check's own in %s", home, got["tmpdir"], got["cwd"], tmp)
	}
	if got["gotelemetry"] != "off" {
		t.Errorf("Go's telemetry mode %q, want off", got["gotelemetry"])
	}
	if !strings.Contains(got["java"], "-XX:-UsePerfData") {
		t.Errorf("JAVA_TOOL_OPTIONS %q does not turn hsperfdata off", got["java"])
	}
	if _, err := os.Stat(stale); err == nil {
		t.Errorf("a dead process's version check directory stayed")
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("a running process's version check directory went: %v", err)
	}
	os.RemoveAll(live)
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("the version check's directory was not removed: %v", left)
	}

	// A real JVM: its version still reads right, and its perf data is off.
	java := filepath.Join("/usr/bin", "java")
	if _, err := os.Stat(java); err != nil {
		t.Skip("no java on this host")
	}
	out, err := versionCheck([]string{java, "-XX:+PrintFlagsFinal", "-version"})
	if err != nil {
		t.Fatalf("java: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "UsePerfData") || !regexpMatch(`bool\s+UsePerfData\s+= false`, string(out)) {
		t.Errorf("the JVM of a version check keeps its perf data:\n%s", grepLines(string(out), "UsePerfData"))
	}
	if strings.Contains(string(out), "Picked up") {
		t.Errorf("the JVM's notice is in the output")
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("java's version check left %v", left)
	}
}

func regexpMatch(re, s string) bool { return regexp.MustCompile(re).MatchString(s) }

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
