// Package monitor reads resource accounting of sandboxed runs from the
// kernel: CPU time, peak memory and limit events from cgroup v1 or v2 files.
//
// It only reads; creating cgroups and setting limits is pkg/sandbox's job.
package monitor

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Usage is what a cgroup accounted for its processes.
type Usage struct {
	CPU        time.Duration // user + sys
	User, Sys  time.Duration
	PeakMemory int64 // bytes
	OOMKills   int64 // processes the OOM killer ended
	PidsMax    int64 // forks refused by the pids limit
}

// dir reads the files of one cgroup directory: by path, or (cheaper, the
// kernel walking one name instead of the whole path) through an open
// descriptor of the directory.
type dir interface {
	read(name string) ([]byte, error)
}

type pathDir string

func (d pathDir) read(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join(string(d), name))
}

type fdDir int

func (d fdDir) read(name string) ([]byte, error) {
	fd, err := unix.Openat(int(d), name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	defer unix.Close(fd)
	buf := make([]byte, 0, 512)
	for {
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: name, Err: err}
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
	}
}

// CgroupV2 reads usage from one cgroup v2 directory.
func CgroupV2(dir string) (Usage, error) { return cgroupV2(pathDir(dir)) }

// CgroupV2At is CgroupV2 through an open descriptor of the directory.
func CgroupV2At(dirfd int) (Usage, error) { return cgroupV2(fdDir(dirfd)) }

func cgroupV2(d dir) (Usage, error) {
	var u Usage
	stat, err := keyValues(d, "cpu.stat")
	if err != nil {
		return u, err
	}
	u.CPU = time.Duration(stat["usage_usec"]) * time.Microsecond
	u.User = time.Duration(stat["user_usec"]) * time.Microsecond
	u.Sys = time.Duration(stat["system_usec"]) * time.Microsecond
	if u.PeakMemory, err = readInt(d, "memory.peak"); err != nil {
		return u, err
	}
	if ev, err := keyValues(d, "memory.events"); err == nil {
		u.OOMKills = ev["oom_kill"]
	}
	if ev, err := keyValues(d, "pids.events"); err == nil {
		u.PidsMax = ev["max"]
	}
	return u, nil
}

// CgroupV2CPU reads only the CPU time of a v2 cgroup: the cheap read the
// CPU-limit watchdog does while a run is live.
func CgroupV2CPU(dir string) (time.Duration, error) { return cgroupV2CPU(pathDir(dir)) }

// CgroupV2CPUAt is CgroupV2CPU through an open descriptor of the directory.
func CgroupV2CPUAt(dirfd int) (time.Duration, error) { return cgroupV2CPU(fdDir(dirfd)) }

func cgroupV2CPU(d dir) (time.Duration, error) {
	b, err := d.read("cpu.stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	v, ok := bytes.CutPrefix(line, []byte("usage_usec "))
	if !ok {
		return 0, errors.New("cpu.stat: no usage_usec")
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	return time.Duration(n) * time.Microsecond, err
}

// CgroupV1 reads usage from the v1 memory, cpuacct and pids cgroups of a run
// (an empty path skips that controller).
func CgroupV1(memory, cpuacct, pids string) (Usage, error) {
	var m, c, p dir
	if memory != "" {
		m = pathDir(memory)
	}
	if cpuacct != "" {
		c = pathDir(cpuacct)
	}
	if pids != "" {
		p = pathDir(pids)
	}
	return cgroupV1(m, c, p)
}

// CgroupV1At is CgroupV1 through open descriptors of the directories (a
// negative one skips that controller).
func CgroupV1At(memory, cpuacct, pids int) (Usage, error) {
	at := func(fd int) dir {
		if fd < 0 {
			return nil
		}
		return fdDir(fd)
	}
	return cgroupV1(at(memory), at(cpuacct), at(pids))
}

func cgroupV1(memory, cpuacct, pids dir) (Usage, error) {
	var u Usage
	if cpuacct != nil {
		// cpuacct.usage is exact; its user/system split comes from the
		// scheduler tick, so it does not add up to it.
		cpu, err := readInt(cpuacct, "cpuacct.usage")
		if err != nil {
			return u, err
		}
		u.CPU = time.Duration(cpu)
		user, errU := readInt(cpuacct, "cpuacct.usage_user")
		sys, errS := readInt(cpuacct, "cpuacct.usage_sys")
		if errU == nil && errS == nil {
			u.User, u.Sys = time.Duration(user), time.Duration(sys)
		}
	}
	if memory != nil {
		var err error
		if u.PeakMemory, err = readInt(memory, "memory.max_usage_in_bytes"); err != nil {
			return u, err
		}
		if oc, err := keyValues(memory, "memory.oom_control"); err == nil {
			u.OOMKills = oc["oom_kill"]
		}
	}
	if pids != nil {
		if ev, err := keyValues(pids, "pids.events"); err == nil {
			u.PidsMax = ev["max"]
		}
	}
	return u, nil
}

// CgroupV1CPU reads the CPU time of a v1 cpuacct cgroup in nanoseconds.
func CgroupV1CPU(cpuacct string) (time.Duration, error) {
	n, err := readInt(pathDir(cpuacct), "cpuacct.usage")
	return time.Duration(n), err
}

// CgroupV1CPUAt is CgroupV1CPU through an open descriptor of the directory.
func CgroupV1CPUAt(cpuacct int) (time.Duration, error) {
	n, err := readInt(fdDir(cpuacct), "cpuacct.usage")
	return time.Duration(n), err
}

// ReadInt reads a file holding one decimal integer ("max" reads as -1).
func ReadInt(path string) (int64, error) {
	return readInt(pathDir(filepath.Dir(path)), filepath.Base(path))
}

// ReadIntAt is ReadInt of the file name in the directory open as dirfd.
func ReadIntAt(dirfd int, name string) (int64, error) {
	return readInt(fdDir(dirfd), name)
}

func readInt(d dir, name string) (int64, error) {
	b, err := d.read(name)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return -1, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return n, nil
}

// keyValues parses "key value" lines, the format of cpu.stat, memory.events,
// pids.events and memory.oom_control.
func keyValues(d dir, name string) (map[string]int64, error) {
	b, err := d.read(name)
	if err != nil {
		return nil, err
	}
	m := make(map[string]int64)
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			m[k] = n
		}
	}
	if len(m) == 0 {
		return nil, errors.New(name + ": no values")
	}
	return m, nil
}
