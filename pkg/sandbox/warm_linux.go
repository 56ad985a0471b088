package sandbox

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// warmPool keeps fresh sandboxes for Detachable specs (Engine.Prewarm),
// built as Start builds one for such a spec: no parent-death signal, a
// detachable cgroup name. A detachable sandbox serves one run and is
// never given back, so the pool holds only sandboxes no run has used;
// Start takes one whose configuration matches (configKey) and the pool
// builds a replacement in the background.
//
// A ready sandbox does not outlive the engine's process: its PID 1, idle,
// exits when its control socket closes (sandboxInit), and its empty
// cgroup is left to the next engine's cleanStale. Close destroys the
// ready ones. They do not expire (Config.PoolIdle): a fresh sandbox holds
// nothing of a run to let go, and the next Start of its spec wants it.
// They count against Config.PoolSize, and take at most half of it (max).
type warmPool struct {
	e        *Engine
	mu       sync.Mutex
	ready    map[string][]*container // by configKey, oldest first
	n        int                     // ready sandboxes, every key
	starting map[string]int          // sandboxes being built, by key
	targets  map[string]warmTarget
	max      int
	closed   bool
	// builds are the refills going on in the background, which Close
	// waits for: the sandbox of one that ends after it is destroyed.
	builds sync.WaitGroup
}

// warmTarget is how many ready sandboxes a key should have, and what to
// build them from: their configuration, and the limits their first run's
// cgroups and filesystems are made ahead with.
type warmTarget struct {
	cfg    *initConfig
	limits Limits
	n      int
}

func newWarmPool(e *Engine, max int) *warmPool {
	return &warmPool{e: e, ready: make(map[string][]*container), starting: make(map[string]int), targets: make(map[string]warmTarget), max: max}
}

// prewarm has cfg's key keep n ready sandboxes from now on, and builds
// those it lacks before it returns.
func (w *warmPool) prewarm(cfg *initConfig, l Limits, n int) error {
	if n <= 0 {
		return nil
	}
	key := configKey(cfg)
	w.mu.Lock()
	w.targets[key] = warmTarget{cfg: cfg, limits: l, n: n}
	w.mu.Unlock()
	return w.fill(key)
}

// len is how many sandboxes are ready.
func (w *warmPool) len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// take takes a ready sandbox for key, or returns nil. The caller then
// calls refill.
func (w *warmPool) take(key string) *container {
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		list := w.ready[key]
		if len(list) == 0 {
			return nil
		}
		c := list[0]
		if len(list) == 1 {
			delete(w.ready, key)
		} else {
			w.ready[key] = list[1:]
		}
		w.n--
		if c.alive() {
			return c
		}
		w.e.destroyLater(c) // killed from outside while it waited
	}
}

// refill builds, in the background, what key lacks of its target.
func (w *warmPool) refill(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.targets[key]
	if !ok || w.closed || len(w.ready[key])+w.starting[key] >= t.n {
		return
	}
	w.builds.Add(1)
	go func() {
		defer w.builds.Done()
		w.fill(key)
	}()
}

// fill builds sandboxes for key until it has its target ready or being
// built, or the pool is full or closed.
func (w *warmPool) fill(key string) error {
	for {
		w.mu.Lock()
		t, ok := w.targets[key]
		building := 0
		for _, s := range w.starting {
			building += s
		}
		full := !ok || w.closed || w.n+building >= w.max || len(w.ready[key])+w.starting[key] >= t.n
		if !full {
			w.starting[key]++
		}
		w.mu.Unlock()
		if full {
			return nil
		}
		c, err := w.build(t)
		w.mu.Lock()
		w.starting[key]--
		keep := err == nil && !w.closed
		if keep {
			c.idle = time.Now()
			w.ready[key] = append(w.ready[key], c)
			w.n++
		}
		w.mu.Unlock()
		switch {
		case err != nil:
			return err
		case !keep:
			c.destroy()
			return nil
		}
		// Ready ones count against the pool's size: an idle sandbox of
		// the pool makes room.
		if w.e.pool.len()+w.len() > w.e.cfg.PoolSize {
			w.e.pool.evict()
		}
	}
}

// build builds a sandbox for t, as Start builds one for a Detachable
// spec, with the cgroups and filesystems of its run made ahead.
func (w *warmPool) build(t warmTarget) (*container, error) {
	c, err := w.e.buildContainer(t.cfg, "", false)
	if err != nil {
		return nil, err
	}
	c.cg.prepareNext(t.limits)
	c.prepareFS(t.limits)
	return c, nil
}

// evict destroys the ready sandbox waiting the longest, to free its uids;
// false when there is none.
func (w *warmPool) evict() bool {
	w.mu.Lock()
	var oldest *container
	var key string
	for k, list := range w.ready {
		if oldest == nil || list[0].idle.Before(oldest.idle) {
			oldest, key = list[0], k
		}
	}
	if oldest != nil {
		if list := w.ready[key][1:]; len(list) == 0 {
			delete(w.ready, key)
		} else {
			w.ready[key] = list
		}
		w.n--
	}
	w.mu.Unlock()
	if oldest == nil {
		return false
	}
	oldest.destroy()
	return true
}

// drain destroys every ready sandbox; with close, the pool builds no more
// (and those being built are destroyed once they are).
func (w *warmPool) drain(close bool) {
	w.mu.Lock()
	var all []*container
	for _, list := range w.ready {
		all = append(all, list...)
	}
	w.ready = make(map[string][]*container)
	w.n = 0
	if close {
		w.closed = true
	}
	w.mu.Unlock()
	destroyAll(all)
	if close {
		w.builds.Wait()
	}
}

// cloneLate clones, for a run, the trees of the Late mounts among mounts,
// which PID 1 binds at their targets (initSandbox.mountLate): read-only,
// without setuid or devices, and private (nothing mounted on the host
// below the source shows in the sandbox, nor the other way).
func cloneLate(mounts []mountConfig) (fds []int, err error) {
	defer func() {
		if err != nil {
			closeFDs(fds)
			fds = nil
		}
	}()
	for _, m := range mounts {
		if !m.Late {
			continue
		}
		fd, err := unix.OpenTree(unix.AT_FDCWD, m.Source, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			return fds, fmt.Errorf("%s: %w", m.Source, err)
		}
		fds = append(fds, fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return fds, fmt.Errorf("%s: %w", m.Source, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return fds, fmt.Errorf("%s: not a directory, as a Late mount must be", m.Source)
		}
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV, Propagation: unix.MS_PRIVATE}
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
			return fds, fmt.Errorf("%s: protect: %w", m.Source, err)
		}
	}
	return fds, nil
}
