package gvisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/lib/linktree"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
	"golang.org/x/sys/unix"
)

// Live sandboxes: a spec whose program lives on its own (a live sandbox's
// agent, pkg/live), started detached in a directory of its own under the
// runner's (its runsc state, its bundle, its /work, /tmp and /dev/shm
// mounted there), so that it outlives this process; a Runner of a later
// process takes it over by its record (AdoptLive). Its processes are
// frozen and thawed (runsc pause and resume), its files copied out and in,
// and the whole sandbox, memory and running processes, cloned into new
// sandboxes (runsc checkpoint, then restore into each clone's bundle).
//
// Its program reaches the host through the Unix sockets of host
// directories mounted in it (runsc --host-uds=open): a checkpoint ends
// those connections, in the sandbox checkpointed and in its clones, and
// the program connects again (the agent does). In the sandbox
// checkpointed, a read blocked in epoll does not hear of that end: the
// program (its PID 1) gets SIGUSR1 after each checkpoint, which it must
// handle (gVisor ends a PID 1 that does not).

// Live is a live sandbox of this backend.
type Live struct {
	g   *Runner
	rec LiveRecord
	cg  *runCgroup
	// done is closed once the sandbox has ended (its runsc-sandbox
	// process is gone); err says how Wait reads it.
	done chan struct{}
	// handed is closed by Detach.
	handed chan struct{}
	detach sync.Once
	// mu orders pauses, resumes, copies and clones.
	mu     sync.Mutex
	paused bool
	// kick: a checkpoint ended its program's host connections while it
	// was paused; it is told when resumed.
	kick   bool
	killed sync.Once
	// netMu guards netDetach, what stops serving its network device
	// (AttachNetwork), while served.
	netMu     sync.Mutex
	netDetach func()
}

// LiveRecord is what a later process needs to take a Live over.
type LiveRecord struct {
	// ID is runsc's container id; Dir the sandbox's directory.
	ID  string `json:"id"`
	Dir string `json:"dir"`
	// WorkSize and TmpSize are the sizes of its /work and of its /tmp.
	WorkSize int64 `json:"work_size"`
	TmpSize  int64 `json:"tmp_size"`
	// Network: it runs in a network namespace of its own (kept in its
	// bundle), with tun0 kept there for the egress of whoever holds it.
	Network bool `json:"network,omitempty"`
}

// The parts of a live sandbox's directory.
func (r LiveRecord) root() string   { return filepath.Join(r.Dir, "state") }
func (r LiveRecord) bundle() string { return filepath.Join(r.Dir, "bundle") }
func (r LiveRecord) netns() string  { return filepath.Join(r.Dir, "bundle", "netns") }
func (r LiveRecord) tree(name string) string {
	return filepath.Join(r.Dir, name) // work, tmp, shm
}

// liveTrees are what a live sandbox's directory has mounted: its /work,
// /tmp and /dev/shm.
var liveTrees = []string{"work", "tmp", "shm"}

// StartLive starts spec's program as a live sandbox: runsc runs it
// detached, and it lives until it ends or Kill. Spec's Stdin, Stream and
// result pipe are not served (the program speaks through a socket of a
// mount); its WallTime and CPUTime are not watched (its holder ends it).
// Its /work and /tmp start from spec.FilesFrom's files, copy-on-write
// (cow), when it is set. A spec's Network is the sandbox's until this process lets it go
// (Detach); a later holder gives it one anew (AttachNetwork).
func (g *Runner) StartLive(ctx context.Context, spec *sandbox.Spec) (*Live, error) {
	if err := liveSpecOK(spec); err != nil {
		return nil, err
	}
	return g.startLive(ctx, spec, spec.FilesFrom, "run", "--detach")
}

// liveSpecOK says why spec cannot be a live sandbox's, if it cannot.
func liveSpecOK(spec *sandbox.Spec) error {
	switch {
	case spec.Stdin != nil || spec.ResultOut != nil:
		return errors.New("gvisor: a live sandbox's program speaks through a socket, not its stdio")
	case slices.ContainsFunc(spec.Mounts, func(m sandbox.Mount) bool { return m.Overlay }):
		return errors.New("gvisor: a live sandbox's mounts cannot be overlays (they would end with this process)")
	}
	return nil
}

// startLive makes a live sandbox's box for spec, its trees overlays over
// files ("": none, cow), and starts it with runsc's args (run or restore,
// the bundle and id added): then it serves its network, if it has one.
func (g *Runner) startLive(ctx context.Context, spec *sandbox.Spec, files string, args ...string) (*Live, error) {
	l := spec.Limits.WithDefaults()
	b, err := g.makeBox(spec, l, nil, false, true)
	if err != nil {
		return nil, err
	}
	if b.tun != nil {
		// The device outlives our end of it, for runsc reads it by its
		// index: a later holder's egress takes it again (AttachNetwork).
		if err := sandbox.KeepTUN(b.tun); err != nil {
			b.close(g)
			return nil, &sandbox.SetupError{Step: "network", Err: err}
		}
	}
	lv := g.live(b, l)
	if err := lv.cow(files); err != nil {
		b.close(g)
		return nil, &sandbox.SetupError{Step: "overlay", Err: err}
	}
	if err := lv.runsc(ctx, append(args, "--bundle", b.bundle, b.id)...); err != nil {
		b.close(g)
		return nil, &sandbox.SetupError{Step: "runsc", Err: err}
	}
	if err := lv.watch(); err != nil {
		b.tun.Close()
		lv.Kill()
		return nil, &sandbox.SetupError{Step: "runsc", Err: err}
	}
	if b.tun != nil {
		err := lv.serveNetwork(b.tun, spec.Network)
		if err != nil {
			lv.Kill()
			return nil, &sandbox.SetupError{Step: "network", Err: err}
		}
	}
	return lv, nil
}

// live is the Live of b, a live sandbox's box: its /work, /tmp and
// /dev/shm stay mounted in its directory, this process's hold let go.
func (g *Runner) live(b *box, l sandbox.Limits) *Live {
	for _, w := range []*sandbox.Work{b.work, b.tmp, b.shm} {
		w.Release()
	}
	return &Live{g: g, cg: b.cg, done: make(chan struct{}), handed: make(chan struct{}),
		rec: LiveRecord{ID: b.id, Dir: b.live, WorkSize: l.WorkSize, TmpSize: l.TmpSize, Network: b.netns != ""}}
}

// AttachNetwork gives the sandbox, which has a network namespace
// (LiveRecord.Network) but no device served since it was let go (Detach)
// and taken over (AdoptLive), n's egress: its tun0 is the one it always
// had, so runsc goes on with it; connections open before are gone. One
// device at a time: a sandbox served already fails with an error.
func (lv *Live) AttachNetwork(n *sandbox.Network) error {
	if !lv.rec.Network {
		return errors.New("gvisor: the sandbox was made without a network")
	}
	tun, err := sandbox.ReopenTUN(lv.rec.netns())
	if err != nil {
		return fmt.Errorf("gvisor: the sandbox's network device: %w", err)
	}
	return lv.serveNetwork(tun, n)
}

// serveNetwork hands tun, the host's end of its tun0, to n's egress until
// the sandbox ends or is let go.
func (lv *Live) serveNetwork(tun *os.File, n *sandbox.Network) error {
	lv.netMu.Lock()
	defer lv.netMu.Unlock()
	if lv.netDetach != nil {
		tun.Close()
		return errors.New("gvisor: the sandbox's network is served already")
	}
	detach, err := n.Attach(tun)
	if err != nil {
		return err
	}
	select {
	case <-lv.done:
		detach()
		return errors.New("gvisor: the sandbox has ended")
	case <-lv.handed:
		detach()
		return ErrLiveDetached
	default:
	}
	lv.netDetach = detach
	return nil
}

// ErrLiveDetached: the sandbox was let go (Detach).
var ErrLiveDetached = errors.New("gvisor: the sandbox was let go")

// stopNetwork stops serving its network device, if it was served.
func (lv *Live) stopNetwork() {
	lv.netMu.Lock()
	detach := lv.netDetach
	lv.netDetach = nil
	lv.netMu.Unlock()
	if detach != nil {
		detach()
	}
}

// AdoptLive takes over the live sandbox of r, which a Runner of this or an
// earlier process started: it must be running.
func (g *Runner) AdoptLive(r LiveRecord) (*Live, error) {
	if !strings.HasPrefix(r.ID, "srl-") || filepath.Dir(r.Dir) != g.liveDir() || filepath.Base(r.Dir) != r.ID {
		return nil, fmt.Errorf("gvisor: %q is not a live sandbox of this runner's", r.ID)
	}
	lv := &Live{g: g, rec: r, cg: &runCgroup{c: g.cg, rel: g.cg.path(r.ID)}, done: make(chan struct{}), handed: make(chan struct{})}
	if r.Network {
		if fi, err := os.Lstat(r.netns()); err != nil || !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("gvisor: live sandbox %s has no network namespace kept", r.ID)
		}
	}
	if err := lv.watch(); err != nil {
		lv.Kill()
		return nil, err
	}
	if st, _ := lv.state(); st == "paused" {
		lv.paused = true
	}
	return lv, nil
}

// Record is what a later process needs to take it over.
func (lv *Live) Record() LiveRecord { return lv.rec }

// runsc runs runsc on it.
func (lv *Live) runsc(ctx context.Context, args ...string) error {
	network := "none"
	if lv.rec.Network {
		network = "sandbox" // the namespace of its bundle's config
	}
	all := append([]string{"--root", lv.rec.root(), "--platform", lv.g.cfg.Platform, "--network", network, "--host-uds", "open"}, args...)
	cmd := exec.CommandContext(ctx, lv.g.cfg.Runsc, all...)
	cmd.Dir = lv.rec.Dir
	// runsc run --detach leaves the sandbox's processes running with its
	// stdio: a file, not a pipe of ours that would never close (its
	// stdin is /dev/null).
	out, err := os.CreateTemp(lv.rec.Dir, ".runsc-")
	if err != nil {
		return err
	}
	defer os.Remove(out.Name())
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		b, _ := os.ReadFile(out.Name())
		return fmt.Errorf("runsc %s: %v: %s", args[0], err, lastLine(string(b)))
	}
	return nil
}

// state is runsc's status of it (running, paused, stopped) and its
// runsc-sandbox process.
func (lv *Live) state() (string, int) {
	out, err := exec.Command(lv.g.cfg.Runsc, "--root", lv.rec.root(), "state", lv.rec.ID).Output()
	if err != nil {
		return "", 0
	}
	var st struct {
		Status string `json:"status"`
		Pid    int    `json:"pid"`
	}
	if json.Unmarshal(out, &st) != nil {
		return "", 0
	}
	return st.Status, st.Pid
}

// watch closes done once the sandbox's runsc-sandbox process ends (it
// ends with the sandbox's first program): through a pidfd, no polling.
func (lv *Live) watch() error {
	status, pid := lv.state()
	if status != "running" && status != "paused" || pid <= 0 {
		return fmt.Errorf("gvisor: live sandbox %s is not running (%q)", lv.rec.ID, status)
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return fmt.Errorf("gvisor: live sandbox %s: %w", lv.rec.ID, err)
	}
	go func() {
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, -1); err == nil || !errors.Is(err, unix.EINTR) {
				break
			}
		}
		close(lv.done)
		lv.stopNetwork()
	}()
	return nil
}

// Wait waits until the sandbox has ended, or Detach.
func (lv *Live) Wait() error {
	select {
	case <-lv.done:
	case <-lv.handed:
	}
	return nil
}

// Detach lets the sandbox go for a later process to take over
// (AdoptLive): it runs on, and Wait returns.
// Its network device stays, unserved until the next holder's egress
// takes it (AttachNetwork).
func (lv *Live) Detach() error {
	lv.detach.Do(func() {
		lv.netMu.Lock()
		close(lv.handed)
		lv.netMu.Unlock()
		lv.stopNetwork()
	})
	return nil
}

// Done is closed once the sandbox has ended.
func (lv *Live) Done() <-chan struct{} { return lv.done }

// Kill ends the sandbox and removes what it held: its container, cgroup,
// mounts and directory.
func (lv *Live) Kill() {
	lv.killed.Do(func() {
		root := lv.rec.root()
		lv.mu.Lock()
		paused := lv.paused
		lv.mu.Unlock()
		if paused {
			// A paused sandbox takes no signal: it is ended from the
			// host, and nothing in it runs again.
			exec.Command(lv.g.cfg.Runsc, "--root", root, "delete", "--force", lv.rec.ID).Run()
		} else {
			exec.Command(lv.g.cfg.Runsc, "--root", root, "kill", "--all", lv.rec.ID, "KILL").Run()
		}
		select {
		case <-lv.done:
		case <-time.After(10 * time.Second):
		}
		exec.Command(lv.g.cfg.Runsc, "--root", root, "delete", "--force", lv.rec.ID).Run()
		lv.stopNetwork()
		lv.cg.remove()
		removeLiveDir(lv.rec.Dir)
	})
}

// removeLiveDir unmounts what a live sandbox's directory has mounted and
// removes it.
func removeLiveDir(dir string) {
	unmountNetns(filepath.Join(dir, "state"))
	if ns := (LiveRecord{Dir: dir}).netns(); exists(ns) {
		sandbox.RemoveNetns(ns)
	}
	for _, t := range liveTrees {
		// Its tmpfs, and over it the overlay of a clone's files (cow).
		for syscall.Unmount(filepath.Join(dir, t), syscall.MNT_DETACH) == nil {
		}
	}
	os.RemoveAll(dir)
}

// Pause freezes its processes (runsc pause).
func (lv *Live) Pause(ctx context.Context) error {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	if err := lv.runsc(ctx, "pause", lv.rec.ID); err != nil {
		return err
	}
	lv.paused = true
	return nil
}

// Resume thaws them.
func (lv *Live) Resume() error {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	return lv.resume()
}

func (lv *Live) resume() error {
	if st, _ := lv.state(); st != "running" {
		if err := lv.runsc(context.Background(), "resume", lv.rec.ID); err != nil {
			return err
		}
	}
	lv.paused = false
	if lv.kick {
		lv.kick = false
		return lv.runsc(context.Background(), "kill", lv.rec.ID, "USR1")
	}
	return nil
}

// Stats reads what it uses now: its cgroup's CPU time and memory (gVisor's
// own included), and what its /work and /tmp hold.
func (lv *Live) Stats() (sandbox.Stats, error) {
	select {
	case <-lv.done:
		return sandbox.Stats{}, errors.New("gvisor: the sandbox has ended")
	default:
	}
	st := sandbox.Stats{CPU: int64(lv.cg.cpu()), Memory: lv.cg.memory(), MemoryPeak: lv.cg.peak()}
	st.MemoryPeak = max(st.MemoryPeak, st.Memory)
	for _, t := range []string{"work", "tmp"} {
		var fs unix.Statfs_t
		if unix.Statfs(lv.rec.tree(t), &fs) == nil {
			st.Disk += int64(fs.Blocks-fs.Bfree) * fs.Bsize
			st.DiskTotal += int64(fs.Blocks) * fs.Bsize
		}
	}
	return st, nil
}

// SaveFiles copies its /work and /tmp into dir (dir/work, dir/tmp), frozen
// meanwhile unless it is paused, as sandbox.SaveDirs does (ErrTooLarge
// past max bytes).
func (lv *Live) SaveFiles(ctx context.Context, dir string, max int64) (int64, error) {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	if !lv.paused {
		if err := lv.runsc(ctx, "pause", lv.rec.ID); err != nil {
			return 0, err
		}
		defer lv.resume()
	}
	n, err := sandbox.SaveDirs(map[string]string{"work": lv.rec.tree("work"), "tmp": lv.rec.tree("tmp")}, dir, max)
	if ctx.Err() != nil && err == nil {
		err = ctx.Err()
	}
	return n, err
}

// LoadFiles copies what SaveFiles saved in dir into its /work and /tmp.
func (lv *Live) LoadFiles(dir string) error {
	return sandbox.LoadDirs(dir, map[string]string{"work": lv.rec.tree("work"), "tmp": lv.rec.tree("tmp")}, uid)
}

// Checkpoint writes the sandbox's whole state into dir (made): its memory
// and running processes (dir/image) and its /work, /tmp and /dev/shm
// (dir/files, bounded by max bytes, -1 none: past it, ErrTooLarge). It is
// frozen meanwhile and goes on after as it was. It returns the bytes
// written.
func (lv *Live) Checkpoint(ctx context.Context, dir string, max int64) (int64, error) {
	if err := lv.checkpoint(ctx, filepath.Join(dir, "image"), filepath.Join(dir, "files"), max); err != nil {
		return 0, err
	}
	var size int64
	err := filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			size += fi.Size()
		}
		return err
	})
	return size, err
}

// RestoreLive makes a live sandbox of spec from what Checkpoint wrote in
// dir: it goes on from there.
func (g *Runner) RestoreLive(ctx context.Context, spec *sandbox.Spec, dir string) (*Live, error) {
	return g.restore(ctx, spec, filepath.Join(dir, "image"), filepath.Join(dir, "files"))
}

// checkpoint writes its memory into image and copies its /work, /tmp and
// /dev/shm into files (at most max bytes), frozen meanwhile.
func (lv *Live) checkpoint(ctx context.Context, image, files string, max int64) (err error) {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	if !lv.paused {
		if err := lv.runsc(ctx, "pause", lv.rec.ID); err != nil {
			return err
		}
		defer func() {
			if rerr := lv.resume(); err == nil {
				err = rerr
			}
		}()
	}
	trees := map[string]string{}
	for _, t := range liveTrees {
		trees[t] = lv.rec.tree(t)
	}
	if _, err := sandbox.SaveDirs(trees, files, max); err != nil {
		return fmt.Errorf("gvisor: copying the sandbox's files: %w", err)
	}
	// A paused sandbox is checkpointed as it is, and stays paused.
	if err := lv.runsc(ctx, "checkpoint", "--leave-running", "--image-path", image, lv.rec.ID); err != nil {
		return err
	}
	// The checkpoint ended its host connections, and its program's
	// reads may not hear of it: SIGUSR1 tells it once it runs (resume).
	lv.kick = true
	return nil
}

// restore makes a live sandbox of spec from a checkpoint's image and the
// files copied with it.
func (g *Runner) restore(ctx context.Context, spec *sandbox.Spec, image, files string) (*Live, error) {
	if err := liveSpecOK(spec); err != nil {
		return nil, err
	}
	if spec.FilesFrom != "" {
		return nil, errors.New("gvisor: a restored sandbox's files are its checkpoint's")
	}
	return g.startLive(ctx, spec, files, "restore", "--detach", "--image-path", image)
}

// cow makes each of lv's trees (its tmpfs) an overlay over what files has
// of it ("": nothing), copy-on-write: the lower layer is files' tree
// hard-linked into lv's own directory (.lower: it lives and goes with the
// sandbox, and nothing writes it), owned by the sandbox's user; what the
// sandbox writes goes to its tree's tmpfs (its size bounds the sandbox's
// changes). None of the files' bytes are copied. Every live sandbox's
// trees are overlays, a clone's and the first: runsc marks a mount whose
// source is an overlay, and a restore's mounts must be the checkpoint's.
func (lv *Live) cow(files string) error {
	for _, t := range liveTrees {
		lower := filepath.Join(lv.rec.Dir, ".lower", t)
		src := filepath.Join(files, t)
		if _, err := os.Lstat(src); files == "" || errors.Is(err, fs.ErrNotExist) {
			if err := os.MkdirAll(lower, 0o755); err != nil {
				return err
			}
		} else if _, err := linktree.Link(src, lower, -1); err != nil {
			return err
		}
		err := filepath.WalkDir(lower, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, uid, uid)
		})
		if err != nil {
			return err
		}
		tree := lv.rec.tree(t)
		st, err := os.Stat(tree) // its tmpfs's root, whose mode and owner the overlay's root takes
		if err != nil {
			return err
		}
		upper, work := filepath.Join(tree, ".cow", "upper"), filepath.Join(tree, ".cow", "work")
		for _, d := range []string{upper, work} {
			if err := os.MkdirAll(d, 0o700); err != nil {
				return err
			}
		}
		if err := os.Chmod(upper, st.Mode()&(fs.ModePerm|fs.ModeSticky)); err != nil {
			return err
		}
		sys := st.Sys().(*syscall.Stat_t)
		if err := os.Chown(upper, int(sys.Uid), int(sys.Gid)); err != nil {
			return err
		}
		opts := "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work
		if err := syscall.Mount("overlay", tree, "overlay", syscall.MS_NOSUID|syscall.MS_NODEV, opts); err != nil {
			return fmt.Errorf("overlay at %s: %w", tree, err)
		}
	}
	return nil
}

// liveDir is where live sandboxes have their directories: shared by the
// runners of every process on the same directory (not cleared as stale).
func (g *Runner) liveDir() string { return filepath.Join(g.cfg.Dir, "live") }

// exists says whether path names a file.
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// lastLine is the last line of s that says something.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
