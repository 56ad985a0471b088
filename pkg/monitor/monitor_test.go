package monitor

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestCgroupV2(t *testing.T) {
	u, err := CgroupV2("testdata/v2")
	if err != nil {
		t.Fatal(err)
	}
	want := Usage{CPU: 1500 * time.Microsecond, User: time.Millisecond, Sys: 500 * time.Microsecond, PeakMemory: 4 << 20, OOMKills: 1, PidsMax: 2}
	if u != want {
		t.Fatalf("got %+v, want %+v", u, want)
	}
	cpu, err := CgroupV2CPU("testdata/v2")
	if err != nil || cpu != 1500*time.Microsecond {
		t.Fatalf("CgroupV2CPU = %v, %v", cpu, err)
	}
}

func TestCgroupV1(t *testing.T) {
	u, err := CgroupV1("testdata/v1/memory", "testdata/v1/cpuacct", "testdata/v1/pids")
	if err != nil {
		t.Fatal(err)
	}
	want := Usage{CPU: 2500 * time.Microsecond, User: 2 * time.Millisecond, Sys: 500 * time.Microsecond, PeakMemory: 8 << 20, OOMKills: 2, PidsMax: 5}
	if u != want {
		t.Fatalf("got %+v, want %+v", u, want)
	}
	if u, err := CgroupV1("", "testdata/v1/cpuacct", ""); err != nil || u.PeakMemory != 0 || u.CPU == 0 {
		t.Fatalf("partial: %+v %v", u, err)
	}
}

func TestErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := CgroupV2(dir); err == nil {
		t.Error("missing cpu.stat accepted")
	}
	os.WriteFile(filepath.Join(dir, "cpu.stat"), []byte("nr_periods 1\n"), 0o644)
	if _, err := CgroupV2CPU(dir); err == nil {
		t.Error("cpu.stat without usage_usec first accepted")
	}
	if _, err := CgroupV2(dir); err == nil {
		t.Error("missing memory.peak accepted")
	}
	os.WriteFile(filepath.Join(dir, "n"), []byte("max\n"), 0o644)
	if n, err := ReadInt(filepath.Join(dir, "n")); err != nil || n != -1 {
		t.Errorf("max reads as %d, %v", n, err)
	}
	os.WriteFile(filepath.Join(dir, "n"), []byte("12x\n"), 0o644)
	if _, err := ReadInt(filepath.Join(dir, "n")); err == nil {
		t.Error("garbage accepted")
	}
	os.WriteFile(filepath.Join(dir, "kv"), []byte("novalue\n"), 0o644)
	if _, err := keyValues(pathDir(dir), "kv"); err == nil {
		t.Error("file without values accepted")
	}
	// Through a descriptor, the same files read the same.
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	os.WriteFile(filepath.Join(dir, "big"), bytes.Repeat([]byte("k 1\n"), 1000), 0o644)
	if kv, err := keyValues(fdDir(dfd), "big"); err != nil || kv["k"] != 1 {
		t.Errorf("read through a descriptor: %v %v", kv, err)
	}
	if _, err := readInt(fdDir(dfd), "nope"); err == nil {
		t.Error("missing file read through a descriptor")
	}
	if _, err := CgroupV1(filepath.Join(dir, "nope"), "", ""); err == nil {
		t.Error("missing memory dir accepted")
	}
	if _, err := CgroupV1("", filepath.Join(dir, "nope"), ""); err == nil {
		t.Error("missing cpuacct dir accepted")
	}
}
