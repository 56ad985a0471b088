package sandbox

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// workFS is the run's /work: a tmpfs created on the host side as a detached
// mount (fsopen/fsmount), so it appears nowhere in the host's tree. The host
// fills it before the run and reads it after the run's processes are dead,
// always relative to the mount's root fd and never following a symlink.
type workFS struct {
	mnt  int // detached mount fd; the sandbox's init moves it to /work
	root int // O_PATH fd of the mount root, kept for reading after the run
}

// resolveIn is how every host-side path under /work is resolved: beneath
// the mount root, no symlinks, no magic links, no other filesystem.
var resolveIn = uint64(unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV)

// newWorkFS makes a detached tmpfs whose root belongs to the host uid and
// has the octal mode ("0755", "1777").
func newWorkFS(size int64, inodes int, uid int, mode string) (*workFS, error) {
	fsfd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("fsopen tmpfs: %w", err)
	}
	defer unix.Close(fsfd)
	opts := [][2]string{
		{"size", strconv.FormatInt(size, 10)},
		{"nr_inodes", strconv.Itoa(inodes)},
		{"mode", mode},
		{"uid", strconv.Itoa(uid)},
		{"gid", strconv.Itoa(uid)},
	}
	for _, o := range opts {
		if err := unix.FsconfigSetString(fsfd, o[0], o[1]); err != nil {
			return nil, fmt.Errorf("tmpfs %s=%s: %w", o[0], o[1], err)
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return nil, fmt.Errorf("tmpfs create: %w", err)
	}
	mnt, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return nil, fmt.Errorf("fsmount: %w", err)
	}
	root, err := unix.Openat(mnt, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(mnt)
		return nil, err
	}
	return &workFS{mnt: mnt, root: root}, nil
}

// runFS are the filesystems of one run: /work, /tmp and /dev/shm.
type runFS struct {
	work, tmp, shm *workFS
	// The limits they were made with.
	workSize, tmpSize int64
	inodes            int
	// cow: /work and /tmp are overlays (cowFrom), never kept for another
	// run.
	cow bool
}

// newRunFS makes a run's filesystems with the sizes of l: /work belongs
// to the program's host uid user, /tmp and /dev/shm (sticky, for all) to
// the sandbox's root, root.
func newRunFS(l Limits, root, user int) (_ *runFS, err error) {
	fs := &runFS{workSize: l.WorkSize, tmpSize: l.TmpSize, inodes: l.Inodes}
	defer func() {
		if err != nil {
			fs.close()
		}
	}()
	if fs.work, err = newWorkFS(l.WorkSize, l.Inodes, user, "0755"); err != nil {
		return nil, &SetupError{Step: "work dir", Err: err}
	}
	for _, scratch := range []**workFS{&fs.tmp, &fs.shm} {
		if *scratch, err = newWorkFS(l.TmpSize, l.Inodes, root, "1777"); err != nil {
			return nil, &SetupError{Step: "scratch dir", Err: err}
		}
	}
	return fs, nil
}

// fits says whether the filesystems have the sizes l asks for.
func (fs *runFS) fits(l Limits) bool {
	return fs.workSize == l.WorkSize && fs.tmpSize == l.TmpSize && fs.inodes == l.Inodes
}

// wipeBudget bounds the entries a run may leave in its filesystems for
// them to be emptied for the next run (runFS.wipe); more, and the sandbox
// retires with them.
const wipeBudget = 1000

// wipe empties the filesystems of a run whose processes are all gone, for
// the next run of the same tenant in the sandbox, and says whether they
// are now as newRunFS made them: every entry removed (at most wipeBudget
// in all), the roots with their modes and owners and no extended attribute
// (a program owns /work and may chmod it or set one). What it cannot undo
// tells only the tenant what its own runs did: inode numbers go on
// counting, the roots' times moved (another tenant gets new filesystems:
// container.takeFS).
func (fs *runFS) wipe(root, user int) bool {
	if fs.cow {
		return false
	}
	budget := wipeBudget
	return fs.work.wipe(user, 0o755, &budget) && fs.tmp.wipe(root, 0o1777, &budget) && fs.shm.wipe(root, 0o1777, &budget)
}

// wipe empties w, whose root must have the mode and belong to uid.
func (w *workFS) wipe(uid int, mode uint32, budget *int) bool {
	fd, err := unix.Openat(w.root, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&0o7777 != mode || int(st.Uid) != uid || int(st.Gid) != uid {
		return false
	}
	if n, err := unix.Flistxattr(fd, nil); n != 0 || err != nil && err != unix.ENOTSUP {
		return false
	}
	return removeAllAt(fd, budget) == nil
}

var errWipeBudget = errors.New("too many entries")

// removeAllAt removes everything in the directory dfd, never following a
// link, taking one from budget per entry.
func removeAllAt(dfd int, budget *int) error {
	names, err := readDirNames(dfd)
	if err != nil {
		return err
	}
	for _, name := range names {
		if *budget--; *budget < 0 {
			return errWipeBudget
		}
		err := unix.Unlinkat(dfd, name, 0)
		if err == unix.EISDIR {
			err = removeDirAt(dfd, name, budget)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// removeDirAt removes the directory name in dfd and everything in it.
func removeDirAt(dfd int, name string, budget *int) error {
	sub, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	err = removeAllAt(sub, budget)
	unix.Close(sub)
	if err != nil {
		return err
	}
	return unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR)
}

// cowFrom makes /work and /tmp overlays over dir/work and dir/tmp (as
// Spec.FilesFrom says), seen through the user namespace of the sandbox
// whose PID 1 is pid: every file of dir is made its user's (innerUser)
// first.
func (fs *runFS) cowFrom(dir string, pid int) error {
	if err := ownAll(dir, innerUser); err != nil {
		return fmt.Errorf("files from %s: %w", dir, err)
	}
	ns, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/ns/user", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(ns)
	fs.cow = true
	for i, w := range []*workFS{fs.work, fs.tmp} {
		lower := path.Join(dir, fileTrees[i])
		if _, err := os.Lstat(lower); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := w.overlay(lower, ns); err != nil {
			return fmt.Errorf("/%s over %s: %w", fileTrees[i], lower, err)
		}
	}
	return nil
}

// ownAll makes uid own dir and everything in it (never following a link).
func ownAll(dir string, uid int) error {
	return filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
}

// overlay makes w an overlay, copy-on-write: its lower layer lower (a host
// directory) as the user namespace userns sees it, read-only (an idmapped
// mount: what innerUser owns on disk is the sandbox's user's); its upper
// layer w's tmpfs, whose root's mode and owner the overlay's root takes,
// and whose size bounds the changes. None of lower's bytes are copied.
func (w *workFS) overlay(lower string, userns int) error {
	var st unix.Stat_t
	if err := unix.Fstat(w.root, &st); err != nil {
		return err
	}
	if err := unix.Mkdirat(w.root, "upper", 0o700); err != nil {
		return err
	}
	if err := unix.Fchownat(w.root, "upper", int(st.Uid), int(st.Gid), unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if err := unix.Fchmodat(w.root, "upper", st.Mode&0o7777, 0); err != nil {
		return err
	}
	if err := unix.Mkdirat(w.root, "work", 0o700); err != nil {
		return err
	}
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	open := func(name string) (int, error) {
		fd, err := unix.Openat(w.root, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == nil {
			fds = append(fds, fd)
		}
		return fd, err
	}
	upper, err := open("upper")
	if err != nil {
		return err
	}
	work, err := open("work")
	if err != nil {
		return err
	}
	tree, err := unix.OpenTree(unix.AT_FDCWD, lower, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("open_tree: %w", err)
	}
	fds = append(fds, tree)
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV,
		Userns_fd: uint64(userns)}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, attr); err != nil {
		return fmt.Errorf("%w: idmapped lower layer: %w", ErrNoCopyOnWrite, err)
	}
	ov, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("fsopen overlay: %w", err)
	}
	fds = append(fds, ov)
	for _, l := range []struct {
		key string
		fd  int
	}{{"lowerdir+", tree}, {"upperdir", upper}, {"workdir", work}} {
		if err := unix.FsconfigSetFd(ov, l.key, l.fd); err != nil {
			return fmt.Errorf("%w: overlay %s by descriptor: %w", ErrNoCopyOnWrite, l.key, err)
		}
	}
	if err := unix.FsconfigCreate(ov); err != nil {
		return fmt.Errorf("overlay: %w", err)
	}
	mnt, err := unix.Fsmount(ov, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return fmt.Errorf("fsmount overlay: %w", err)
	}
	root, err := unix.Openat(mnt, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(mnt)
		return err
	}
	// The overlay is what the sandbox mounts and what the host reads.
	w.close()
	w.mnt, w.root = mnt, root
	return nil
}

func (fs *runFS) close() {
	for _, w := range []*workFS{fs.work, fs.tmp, fs.shm} {
		if w != nil {
			w.close()
		}
	}
}

func (w *workFS) close() {
	if w.mnt >= 0 {
		unix.Close(w.mnt)
		w.mnt = -1
	}
	if w.root >= 0 {
		unix.Close(w.root)
		w.root = -1
	}
}

// writeFiles places the input files. It runs before any untrusted code has
// touched the filesystem, and still resolves beneath the root.
func (w *workFS) writeFiles(files []File, uid int) error {
	for _, f := range files {
		p, err := ValidatePath(f.Path)
		if err != nil {
			return err
		}
		dir, base := path.Split(p)
		dfd, err := w.mkdirAll(strings.TrimSuffix(dir, "/"), uid)
		if err != nil {
			return fmt.Errorf("input %s: %w", p, err)
		}
		mode := f.Mode.Perm()
		if mode == 0 {
			mode = 0o644
		}
		fd, err := unix.Openat2(dfd, base, &unix.OpenHow{
			Flags:   unix.O_WRONLY | unix.O_CREAT | unix.O_TRUNC | unix.O_CLOEXEC | unix.O_NOFOLLOW,
			Mode:    uint64(mode),
			Resolve: resolveIn,
		})
		unix.Close(dfd)
		if err != nil {
			return fmt.Errorf("input %s: %w", p, err)
		}
		file := os.NewFile(uintptr(fd), p)
		_, err = file.Write(f.Data)
		if err == nil {
			err = unix.Fchown(fd, uid, uid)
		}
		if err == nil {
			err = unix.Fchmod(fd, uint32(mode))
		}
		file.Close()
		if err != nil {
			if errors.Is(err, unix.ENOSPC) {
				return fmt.Errorf("input files exceed the work dir size: %w", err)
			}
			return fmt.Errorf("input %s: %w", p, err)
		}
	}
	return nil
}

// mkdirAll creates dir (relative to the root) and returns an fd for it.
func (w *workFS) mkdirAll(dir string, uid int) (int, error) {
	fd, err := unix.Openat(w.root, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil || dir == "" {
		return fd, err
	}
	for _, name := range strings.Split(dir, "/") {
		err := unix.Mkdirat(fd, name, 0o755)
		if err == nil {
			if cfd, err := unix.Openat2(fd, name, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: resolveIn}); err == nil {
				unix.Fchown(cfd, uid, uid)
				unix.Close(cfd)
			}
		} else if !errors.Is(err, unix.EEXIST) {
			unix.Close(fd)
			return -1, err
		}
		next, err := unix.Openat2(fd, name, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: resolveIn})
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

// full reports whether the work tmpfs ran out of blocks or inodes.
func (w *workFS) full() bool {
	var st unix.Statfs_t
	if unix.Fstatfs(w.root, &st) != nil {
		return false
	}
	return st.Bfree == 0 || st.Ffree == 0
}

// largest returns the size of the largest regular file under /work.
func (w *workFS) largest() int64 {
	var biggest int64
	var walk func(dfd, depth int)
	walk = func(dfd, depth int) {
		names, _ := readDirNames(dfd)
		for _, name := range names {
			var st unix.Stat_t
			if unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
				continue
			}
			switch st.Mode & unix.S_IFMT {
			case unix.S_IFREG:
				biggest = max(biggest, st.Size)
			case unix.S_IFDIR:
				if depth < 16 {
					if sub, err := unix.Openat2(dfd, name, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: resolveIn}); err == nil {
						walk(sub, depth+1)
						unix.Close(sub)
					}
				}
			}
		}
	}
	walk(w.root, 0)
	return biggest
}

// collect reads the files selected by c, within budget if not nil. Only call it once every process
// of the run is dead: nothing can change the tree while it is walked, and
// even so every step resolves beneath the root without following links.
func (w *workFS) collect(c Collect, budget *Budget) ([]OutputFile, []SkippedFile) {
	if !c.All && len(c.Patterns) == 0 {
		return nil, nil
	}
	if c.MaxFileBytes <= 0 {
		c.MaxFileBytes = 8 << 20
	}
	if c.MaxTotalBytes <= 0 {
		c.MaxTotalBytes = 32 << 20
	}
	if c.MaxFiles <= 0 {
		c.MaxFiles = 1000
	}
	var out []OutputFile
	var skipped []SkippedFile
	var total int64
	matched := make(map[string]bool)
	seen := 0
	var walk func(dfd int, rel string, depth int)
	walk = func(dfd int, rel string, depth int) {
		names, err := readDirNames(dfd)
		if err != nil {
			return
		}
		for _, name := range names {
			p := path.Join(rel, name)
			var st unix.Stat_t
			if unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
				continue
			}
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				if depth < 16 {
					if sub, err := unix.Openat2(dfd, name, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: resolveIn}); err == nil {
						walk(sub, p, depth+1)
						unix.Close(sub)
					}
				}
				continue
			}
			if !c.All && !matchAny(c.Patterns, p, matched) {
				continue
			}
			seen++
			if st.Mode&unix.S_IFMT != unix.S_IFREG {
				skipped = append(skipped, SkippedFile{p, "not a regular file"})
				continue
			}
			if len(out) >= c.MaxFiles {
				skipped = append(skipped, SkippedFile{p, "too many output files"})
				continue
			}
			data, mode, err := readRegular(dfd, name, c.MaxFileBytes)
			if err != nil {
				skipped = append(skipped, SkippedFile{p, err.Error()})
				continue
			}
			if total+int64(len(data)) > c.MaxTotalBytes {
				skipped = append(skipped, SkippedFile{p, "output files exceed the total size cap"})
				continue
			}
			if budget != nil && !budget.TakeAll(int64(len(data))) {
				skipped = append(skipped, SkippedFile{p, "output exceeds the response budget"})
				continue
			}
			total += int64(len(data))
			out = append(out, OutputFile{Path: p, Data: data, Mode: mode})
		}
	}
	fd, err := unix.Openat(w.root, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil
	}
	walk(fd, "", 0)
	unix.Close(fd)
	for _, pat := range c.Patterns {
		if !matched[pat] && !strings.ContainsAny(pat, "*?[") {
			skipped = append(skipped, SkippedFile{pat, "not found"})
		}
	}
	return out, skipped
}

// matchAny reports whether p matches one of patterns (MatchPattern: "**"
// spans directories) and records which one in matched.
func matchAny(patterns []string, p string, matched map[string]bool) bool {
	for _, pat := range patterns {
		if MatchPattern(pat, p) {
			matched[pat] = true
			return true
		}
	}
	return false
}

// readRegular opens name without following links and reads it only if it
// is a regular file of at most limit bytes.
func readRegular(dfd int, name string, limit int64) ([]byte, fs.FileMode, error) {
	fd, err := unix.Openat2(dfd, name, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC | unix.O_NOCTTY,
		Resolve: resolveIn,
	})
	if err != nil {
		return nil, 0, fmt.Errorf("open: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, 0, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, 0, errors.New("not a regular file")
	}
	if st.Size > limit {
		return nil, 0, fmt.Errorf("larger than the %d-byte cap", limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, 0, err
	}
	if int64(len(data)) > limit {
		return nil, 0, fmt.Errorf("larger than the %d-byte cap", limit)
	}
	return data, fs.FileMode(st.Mode & 0o777), nil
}

// readDirNames lists a directory fd without following anything.
func readDirNames(dfd int) ([]string, error) {
	fd, err := unix.Openat(dfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), ".")
	defer f.Close()
	names, err := f.Readdirnames(-1)
	sort.Strings(names)
	return names, err
}
