package executor

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
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
