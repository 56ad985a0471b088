//go:build linux

package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
)

// The bench tests check that the commands run and report what they
// should; they never look at the times measured.

func TestBenchFlags(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "-parts", "api"},              // --suite only
		{"bench", "-jobs", "5"},                 // --suite only
		{"bench", "--api", "-docker", "off"},    // --suite only
		{"bench", "-clients", "2"},              // --api or --suite only
		{"bench", "--suite", "-parts", "nope"},  // unknown part
		{"bench", "--suite", "-docker", "yes"},  // auto or off
		{"bench", "--suite", "-jobs", "0"},      // at least 1
		{"bench", "--suite", "-python", "/bin"}, // not with --api
	} {
		if r := cli(t, "", args...); r.code != exitUsage {
			t.Errorf("%v: exit %d, want %d; stderr %s", args, r.code, exitUsage, r.stderr)
		}
	}
}

func TestBenchParseLdd(t *testing.T) {
	out := "\tlinux-vdso.so.1 (0x00007ffd)\n" +
		"\tlibtinfo.so.6 => /lib/x86_64-linux-gnu/libtinfo.so.6 (0x00007f86)\n" +
		"\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f86)\n" +
		"\t/lib64/ld-linux-x86-64.so.2 (0x00007f86)\n" +
		"\tlibgone.so => not found\n"
	want := []string{"/lib/x86_64-linux-gnu/libtinfo.so.6", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"}
	if got := benchParseLdd(out); !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// TestBenchTar builds the docker part's image contents for /bin/true and
// checks that the program, its loader and every link on the way are in it.
func TestBenchTar(t *testing.T) {
	if _, err := os.Stat("/usr/bin/ldd"); err != nil {
		t.Skip("no ldd")
	}
	var buf bytes.Buffer
	bt := &benchTar{tw: tar.NewWriter(&buf), seen: map[string]bool{}}
	if err := bt.addHost([]string{"/bin/true"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := bt.tw.Close(); err != nil {
		t.Fatal(err)
	}
	entries := map[string]*tar.Header{}
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if entries[h.Name] != nil {
			t.Errorf("%s twice", h.Name)
		}
		entries[h.Name] = h
	}
	if len(entries) != bt.files {
		t.Errorf("%d entries, counted %d", len(entries), bt.files)
	}
	// Every path the program and its libraries are reached by resolves
	// inside the tar.
	libs, err := benchLibs("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range append(libs, "/bin/true") {
		name := resolveInTar(t, entries, strings.TrimPrefix(p, "/"))
		if h := entries[name]; h == nil || h.Typeflag != tar.TypeReg || h.Size == 0 {
			t.Errorf("%s (%s): not a regular file in the tar", p, name)
		}
	}
}

// resolveInTar follows the tar's symbolic links along name.
func resolveInTar(t *testing.T, entries map[string]*tar.Header, name string) string {
	parts := strings.Split(name, "/")
	for hops := 0; hops < 40; hops++ {
		cur := ""
		restarted := false
		for i, p := range parts {
			next := strings.TrimPrefix(cur+"/"+p, "/")
			h := entries[next]
			if h == nil {
				h = entries[next+"/"]
			}
			if h == nil {
				t.Fatalf("%s: %s is not in the tar", name, next)
			}
			if h.Typeflag == tar.TypeSymlink {
				target := h.Linkname
				if !strings.HasPrefix(target, "/") {
					target = cur + "/" + target
				}
				parts = append(strings.Split(strings.Trim(cleanPath(target), "/"), "/"), parts[i+1:]...)
				restarted = true
				break
			}
			cur = next
		}
		if !restarted {
			return cur
		}
	}
	t.Fatalf("%s: too many links", name)
	return ""
}

func cleanPath(p string) string {
	var out []string
	for _, s := range strings.Split(p, "/") {
		switch s {
		case "", ".":
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, s)
		}
	}
	return "/" + strings.Join(out, "/")
}

func TestBenchParseStatus(t *testing.T) {
	m := benchParseStatus("Name:\tsandbox-run\nVmHWM:\t   20480 kB\nVmRSS:\t   16384 kB\nRssAnon:\t    4096 kB\nRssFile:\t   12288 kB\nRssShmem:\t       0 kB\n")
	if m != (benchRSS{RSS: 16384, Anon: 4096, File: 12288, HWM: 20480}) {
		t.Fatalf("%+v", m)
	}
	if benchMB(m.RSS) != 16 {
		t.Fatalf("16384 KiB is %v MB", benchMB(m.RSS))
	}
}

func TestBenchParseAnswer(t *testing.T) {
	a, err := benchParseAnswer(200, []byte(`{"status":"completed","exit_code":0,"stdout":"hello\n","duration_ms":2.5,"compile":{"status":"completed","duration_ms":300,"cache_hit":true}}`), "hello\n")
	if err != nil {
		t.Fatal(err)
	}
	var c benchFlagCount
	c.add(a)
	if a.Compile == nil || a.Compile.DurationMs != 300 || c.True != 1 || a.prog().Milliseconds() != 2 {
		t.Fatalf("%+v %+v", a, c)
	}
	a, _ = benchParseAnswer(200, []byte(`{"status":"completed","exit_code":0,"stdout":"hello\n","compile":{"status":"completed"}}`), "hello\n")
	c.add(a)
	a, _ = benchParseAnswer(200, []byte(`{"status":"completed","exit_code":0,"stdout":"hello\n"}`), "hello\n")
	c.add(a)
	if c.String() != "1 true, 1 absent, 1 no compile step" {
		t.Fatalf("%q", c.String())
	}
	for _, bad := range []struct {
		code int
		body string
	}{
		{200, `{"status":"completed","exit_code":1,"stdout":"hello\n"}`},
		{200, `{"status":"completed","stdout":"hello\n"}`},
		{200, `{"status":"timeout","exit_code":0,"stdout":"hello\n"}`},
		{200, `{"status":"completed","exit_code":0,"stdout":"bye\n"}`},
		{503, `{"status":"completed","exit_code":0,"stdout":"hello\n"}`},
		{200, `not json`},
	} {
		if _, err := benchParseAnswer(bad.code, []byte(bad.body), "hello\n"); err == nil {
			t.Errorf("%d %s: accepted", bad.code, bad.body)
		}
	}
}

// TestBenchAPIShort runs bench --api briefly and checks its rows.
func TestBenchAPIShort(t *testing.T) {
	if testing.Short() {
		t.Skip("runs sandboxes for a few seconds")
	}
	r := cli(t, "", "bench", "--api", "-n", "3", "-warmup", "1", "-clients", "1,2", "-duration", "300ms", "-o", "json")
	var rep benchAPIReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 0 {
		t.Fatalf("exit %d (%v)\nstdout: %s\nstderr: %s", r.code, err, r.stdout, r.stderr)
	}
	var names []string
	for _, row := range rep.Sequential {
		names = append(names, row.Name)
		if row.Runs != 3 || row.Errors != 0 || row.VsFork <= 0 || row.VsTrue <= 0 || row.CPUms <= 0 {
			t.Errorf("sequential row %+v", row)
		}
	}
	for _, want := range []string{benchForkBash, benchForkTrue, benchForkEcho, benchEngine, benchLibrary, benchHandler, benchHTTP, benchHTTPEcho} {
		if !slices.Contains(names, want) {
			t.Errorf("no sequential row %q (have %q)", want, names)
		}
	}
	if len(rep.Load) != 10 {
		t.Fatalf("%d throughput rows, want 5 for each of 2 client counts", len(rep.Load))
	}
	for _, row := range rep.Load {
		if row.Runs == 0 || row.Errors != 0 || row.VsTrue <= 0 {
			t.Errorf("throughput row %+v", row)
		}
		if row.Name == benchHTTPEcho && row.VsFork <= 0 {
			t.Errorf("echo row without its ratio: %+v", row)
		}
	}
	for _, tg := range rep.Targets {
		if !tg.Known {
			t.Errorf("target %q not measured", tg.Target)
		}
	}
}

// TestBenchSuiteShort runs every part of bench --suite but the API's (that
// is TestBenchAPIShort) with few runs, docker off.
func TestBenchSuiteShort(t *testing.T) {
	if testing.Short() {
		t.Skip("runs sandboxes and a server for a few seconds")
	}
	r := cli(t, "", "bench", "--suite", "-parts", "interp,compile,docker,memory", "-interp-n", "2", "-warmup", "1",
		"-compile-rounds", "1", "-compile-repeats", "1", "-docker", "off", "-jobs", "30", "-o", "json")
	var rep benchSuiteReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("exit %d (%v)\nstdout: %s\nstderr: %s", r.code, err, r.stdout, r.stderr)
	}
	if r.code != 0 || rep.Errors != 0 {
		t.Errorf("exit %d, %d errors\nstdout: %s\nstderr: %s", r.code, rep.Errors, r.stdout, r.stderr)
	}
	if rep.API != nil || rep.Interp == nil || rep.Compile == nil || rep.Docker == nil || rep.Memory == nil {
		t.Fatalf("parts: %s", r.stdout)
	}
	if len(rep.Interp.Rows) != 4 {
		t.Errorf("interpreter rows: %+v", rep.Interp.Rows)
	}
	for _, row := range rep.Interp.Rows {
		if row.Runs != 2 || row.Errors != 0 {
			t.Errorf("interpreter row %+v", row)
		}
	}
	if len(rep.Compile.Rows) != len(benchCompiled) {
		t.Errorf("compile rows: %+v", rep.Compile.Rows)
	}
	for _, row := range rep.Compile.Rows {
		if row.Cold != 1 || row.Hits != 1 || row.Errors != 0 || row.Ratio <= 0 || row.ColdFlag.NoCompile != 0 || row.ColdFlag.True != 0 {
			t.Errorf("compile row %+v", row)
		}
	}
	if rep.Docker.Skipped != "skipped: -docker off" {
		t.Errorf("docker: %+v", rep.Docker)
	}
	m := rep.Memory
	if m.Error != "" || m.Accepted != 30 || m.Refused != 0 || m.Idle.RSS == 0 || m.PeakKiB < m.Queued.RSS || !strings.HasPrefix(m.LastStatus, "queued") {
		t.Errorf("memory: %+v", m)
	}
	known := 0
	for _, tg := range rep.Targets {
		if tg.Known {
			known++
		}
	}
	if want := 2 + len(benchCompiled) + 2; known != want {
		t.Errorf("%d targets measured, want %d: %+v", known, want, rep.Targets)
	}
	// The text form has every section.
	r = cli(t, "", "bench", "--suite", "-parts", "docker", "-docker", "off")
	if r.code != 0 || !strings.Contains(r.stdout, "=== 4. docker run") || !strings.Contains(r.stdout, "skipped: -docker off") {
		t.Errorf("text: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
