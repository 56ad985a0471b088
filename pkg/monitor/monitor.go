// Package monitor reads resource accounting of sandboxed runs from the
// kernel: CPU time, peak memory and limit events from cgroup v1 or v2 files.
//
// It only reads; creating cgroups and setting limits is pkg/sandbox's job.
package monitor

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Usage is what a cgroup accounted for its processes.
type Usage struct {
	CPU        time.Duration // user + sys
	User, Sys  time.Duration
	PeakMemory int64 // bytes
	OOMKills   int64 // processes the OOM killer ended
	PidsMax    int64 // forks refused by the pids limit
}

// CgroupV2 reads usage from one cgroup v2 directory.
func CgroupV2(dir string) (Usage, error) {
	var u Usage
	stat, err := keyValues(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return u, err
	}
	u.CPU = time.Duration(stat["usage_usec"]) * time.Microsecond
	u.User = time.Duration(stat["user_usec"]) * time.Microsecond
	u.Sys = time.Duration(stat["system_usec"]) * time.Microsecond
	if u.PeakMemory, err = ReadInt(filepath.Join(dir, "memory.peak")); err != nil {
		return u, err
	}
	if ev, err := keyValues(filepath.Join(dir, "memory.events")); err == nil {
		u.OOMKills = ev["oom_kill"]
	}
	if ev, err := keyValues(filepath.Join(dir, "pids.events")); err == nil {
		u.PidsMax = ev["max"]
	}
	return u, nil
}

// CgroupV2CPU reads only the CPU time of a v2 cgroup: the cheap read the
// CPU-limit watchdog does while a run is live.
func CgroupV2CPU(dir string) (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return 0, err
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	v, ok := bytes.CutPrefix(line, []byte("usage_usec "))
	if !ok {
		return 0, fmt.Errorf("%s/cpu.stat: no usage_usec first", dir)
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	return time.Duration(n) * time.Microsecond, err
}

// CgroupV1 reads usage from the v1 hierarchies of one run: the memory,
// cpuacct and pids directories (a directory may be "" when the controller
// is not used).
func CgroupV1(memory, cpuacct, pids string) (Usage, error) {
	var u Usage
	var err error
	if cpuacct != "" {
		if u.CPU, err = CgroupV1CPU(cpuacct); err != nil {
			return u, err
		}
		user, errU := ReadInt(filepath.Join(cpuacct, "cpuacct.usage_user"))
		sys, errS := ReadInt(filepath.Join(cpuacct, "cpuacct.usage_sys"))
		if errU == nil && errS == nil {
			u.User, u.Sys = time.Duration(user), time.Duration(sys)
		}
	}
	if memory != "" {
		if u.PeakMemory, err = ReadInt(filepath.Join(memory, "memory.max_usage_in_bytes")); err != nil {
			return u, err
		}
		if oc, err := keyValues(filepath.Join(memory, "memory.oom_control")); err == nil {
			u.OOMKills = oc["oom_kill"]
		}
	}
	if pids != "" {
		if ev, err := keyValues(filepath.Join(pids, "pids.events")); err == nil {
			u.PidsMax = ev["max"]
		}
	}
	return u, nil
}

// CgroupV1CPU reads the CPU time of a v1 cpuacct cgroup in nanoseconds.
func CgroupV1CPU(cpuacct string) (time.Duration, error) {
	n, err := ReadInt(filepath.Join(cpuacct, "cpuacct.usage"))
	return time.Duration(n), err
}

// ReadInt reads a file holding one decimal integer ("max" reads as -1).
func ReadInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return -1, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

// keyValues parses "key value" lines, the format of cpu.stat, memory.events,
// pids.events and memory.oom_control.
func keyValues(path string) (map[string]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := make(map[string]int64)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			m[k] = n
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(m) == 0 {
		return nil, errors.New(path + ": no values")
	}
	return m, nil
}
