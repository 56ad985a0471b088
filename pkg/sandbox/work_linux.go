package sandbox

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Work is a run's /work for another isolation backend (gVisor): the
// engine's size-bounded tmpfs, filled before the run and read after it as
// the engine does (beneath its root, never through a link), and mounted at
// a host directory while the backend's sandbox uses it.
type Work struct {
	fs      *workFS
	dir     string
	mounted bool
}

// NewWork makes a /work of l's size (WorkSize, Inodes; zero fields take
// DefaultLimits'), owned by uid, holding files, and mounts it at dir (an
// empty directory, made if missing). Close unmounts it.
func NewWork(dir string, l Limits, uid int, files []File) (_ *Work, err error) {
	l = l.WithDefaults()
	fs, err := newWorkFS(l.WorkSize, l.Inodes, uid, "0755")
	if err != nil {
		return nil, &SetupError{Step: "work dir", Err: err}
	}
	defer func() {
		if err != nil {
			fs.close()
		}
	}()
	if err := fs.writeFiles(files, uid); err != nil {
		return nil, &SetupError{Step: "input files", Err: err}
	}
	if dir == "" {
		// Mounted nowhere: reached through this process's descriptor of
		// it (a magic link to its root, for another process of root's).
		return &Work{fs: fs, dir: fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), fs.mnt)}, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, &SetupError{Step: "work dir", Err: err}
	}
	if err := unix.MoveMount(fs.mnt, "", unix.AT_FDCWD, dir, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return nil, &SetupError{Step: "work dir", Err: fmt.Errorf("mount at %s: %w", dir, err)}
	}
	w := &Work{fs: fs, dir: dir}
	w.mounted = true
	return w, nil
}

// Dir is where it is mounted.
func (w *Work) Dir() string { return w.dir }

// Collect reads the files c selects, within budget if not nil. Call it
// once every process of the run is gone.
func (w *Work) Collect(c Collect, budget *Budget) ([]OutputFile, []SkippedFile) {
	return w.fs.collect(c, budget)
}

// Close unmounts it (lazily: what still holds it lets go on its own) and
// frees it.
func (w *Work) Close() error {
	var err error
	if w.mounted {
		err = unix.Unmount(w.dir, unix.MNT_DETACH)
	}
	w.fs.close()
	return err
}

// Release lets go of this process's hold of a Work mounted at a directory
// and leaves it mounted there (a live sandbox's, which outlives the
// process): whoever ends the sandbox unmounts it by its path.
func (w *Work) Release() {
	w.fs.close()
	w.mounted = false
}

// WriteFiles places files in it, owned by uid (before the run starts).
func (w *Work) WriteFiles(files []File, uid int) error {
	if err := w.fs.writeFiles(files, uid); err != nil {
		return &SetupError{Step: "input files", Err: err}
	}
	return nil
}

// Overlay is a private writable view of a read-only host directory for
// another isolation backend (gVisor), as a Mount's Overlay is for the
// engine: an overlay filesystem mounted nowhere (reached, as a detached
// Work, through this process's descriptor of it), whose writes go to a
// tmpfs of its own, size-bounded, and end with it.
type Overlay struct {
	upper *workFS
	mnt   int
	dir   string
}

// NewOverlay makes an overlay of lower (a host directory, never written)
// whose writes go to a tmpfs of size bytes; its root is owned by uid, as
// the engine's overlays are by the program's user.
func NewOverlay(lower string, size int64, uid int) (_ *Overlay, err error) {
	upper, err := newWorkFS(size, DefaultLimits.Inodes, uid, "0755")
	if err != nil {
		return nil, &SetupError{Step: "overlay", Err: err}
	}
	defer func() {
		if err != nil {
			upper.close()
		}
	}()
	for _, d := range []string{"upper", "work"} {
		if err := unix.Mkdirat(upper.root, d, 0o755); err != nil {
			return nil, &SetupError{Step: "overlay", Err: err}
		}
		if err := unix.Fchownat(upper.root, d, uid, uid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return nil, &SetupError{Step: "overlay", Err: err}
		}
	}
	fsfd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, &SetupError{Step: "overlay", Err: fmt.Errorf("fsopen overlay: %w", err)}
	}
	defer unix.Close(fsfd)
	in := func(d string) string { return fmt.Sprintf("/proc/self/fd/%d/%s", upper.root, d) }
	for _, o := range [][2]string{{"lowerdir", lower}, {"upperdir", in("upper")}, {"workdir", in("work")}} {
		if err := unix.FsconfigSetString(fsfd, o[0], o[1]); err != nil {
			return nil, &SetupError{Step: "overlay", Err: fmt.Errorf("overlay %s=%s: %w", o[0], o[1], err)}
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return nil, &SetupError{Step: "overlay", Err: fmt.Errorf("overlay of %s: %w", lower, err)}
	}
	mnt, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return nil, &SetupError{Step: "overlay", Err: fmt.Errorf("fsmount overlay: %w", err)}
	}
	if err := unix.Fchownat(mnt, "", uid, uid, unix.AT_EMPTY_PATH); err != nil {
		unix.Close(mnt)
		return nil, &SetupError{Step: "overlay", Err: err}
	}
	return &Overlay{upper: upper, mnt: mnt, dir: fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), mnt)}, nil
}

// Dir is where another process of root's reaches it.
func (o *Overlay) Dir() string { return o.dir }

// Close frees it (what still holds it lets go on its own).
func (o *Overlay) Close() error {
	if o.mnt >= 0 {
		unix.Close(o.mnt)
		o.mnt = -1
	}
	o.upper.close()
	return nil
}

// Full says whether it has no room left, in bytes or inodes.
func (w *Work) Full() bool { return w.fs.full() }

// Largest is the size of its largest regular file.
func (w *Work) Largest() int64 { return w.fs.largest() }

// WriteEtc writes into etc (another backend's root) the user database and
// hosts file the engine gives its sandboxes: programs that look their user
// up find it there, as natively.
func WriteEtc(etc string) error { return writeEtc(etc) }
