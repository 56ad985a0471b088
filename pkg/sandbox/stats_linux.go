package sandbox

import (
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/sandbox-run/sandbox-run/pkg/monitor"
)

// Stats reads what the run uses now; ErrRunEnded once it is over,
// ErrDetached once it is detached.
func (p *Process) Stats() (Stats, error) {
	p.killMu.Lock()
	defer p.killMu.Unlock()
	if p.detached {
		return Stats{}, ErrDetached
	}
	if p.over || p.ended.Load() {
		return Stats{}, ErrRunEnded
	}
	var s Stats
	u, err := p.cg.usage(true)
	if err != nil {
		return s, err
	}
	s.CPU, s.MemoryPeak = int64(u.CPU), u.PeakMemory
	// The peak was read first: memory that grew since is a peak too.
	s.Memory = p.cg.memoryNow()
	s.MemoryPeak = max(s.MemoryPeak, s.Memory)
	for _, w := range []*workFS{p.fs.work, p.fs.tmp} {
		s.addDisk(w.root)
	}
	return s, nil
}

// addDisk adds to s what the file system open as fd holds and its size.
func (s *Stats) addDisk(fd int) {
	var st unix.Statfs_t
	if unix.Fstatfs(fd, &st) == nil {
		s.DiskTotal += int64(st.Blocks) * st.Bsize
		s.Disk += int64(st.Blocks-st.Bfree) * st.Bsize
	}
}

// memoryNow is the cgroup's memory in use (0 when it cannot be read).
func (rc *runCgroup) memoryNow() int64 {
	var v int64
	var err error
	switch {
	case rc.v2 && rc.fd >= 0:
		v, err = monitor.ReadIntAt(rc.fd, "memory.current")
	case rc.v2:
		v, err = monitor.ReadInt(filepath.Join(rc.dir, "memory.current"))
	case rc.dfd != nil:
		v, err = monitor.ReadIntAt(rc.dfd["memory"], "memory.usage_in_bytes")
	default:
		v, err = monitor.ReadInt(filepath.Join(rc.dirs["memory"], "memory.usage_in_bytes"))
	}
	if err != nil {
		return 0
	}
	return v
}
