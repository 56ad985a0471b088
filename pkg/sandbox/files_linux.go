package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// fileTrees are a live run's files: its /work (its home) and its /tmp.
var fileTrees = []string{"work", "tmp"}

// sandboxFiles is what the copies of a sandbox's files need: its PID 1,
// whose root they are reached through, its user, and its freezer.
type sandboxFiles struct {
	pid    int
	user   int
	freeze freezer
}

// openTree opens tree (work or tmp) of the sandbox's root as an os.Root:
// each step resolved inside the sandbox's root (openat2 RESOLVE_IN_ROOT,
// magic links refused), and every later step of the copy inside the tree
// (os.Root), so that no link the sandbox made leads the host elsewhere.
func (s sandboxFiles) openTree(tree string) (*os.Root, error) {
	root, err := unix.Open("/proc/"+strconv.Itoa(s.pid)+"/root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox: its root: %w", err)
	}
	defer unix.Close(root)
	fd, err := unix.Openat2(root, tree, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_SYMLINKS})
	if err != nil {
		return nil, fmt.Errorf("sandbox: its /%s: %w", tree, err)
	}
	defer unix.Close(fd)
	return os.OpenRoot("/proc/self/fd/" + strconv.Itoa(fd))
}

// save copies the sandbox's files into dir (made): dir/work and dir/tmp,
// modes kept, symbolic links as they are, other kinds of files (FIFOs,
// sockets, devices) left out. Past max bytes it fails with ErrTooLarge.
// The sandbox is frozen meanwhile, unless it was, so that the copy is of
// one moment; it returns the bytes copied.
func (s sandboxFiles) save(ctx context.Context, dir string, max int64) (int64, error) {
	if !s.freeze.frozen.Load() && s.freeze.dir != "" {
		if err := s.freeze.set(ctx, true); err != nil {
			return 0, err
		}
		defer s.freeze.set(context.WithoutCancel(ctx), false)
	}
	return saveTrees(fileTrees, s.openTree, dir, max)
}

// load copies dir/work and dir/tmp (as save made them) into the
// sandbox's /work and /tmp, owned by its user; what is there already
// with the same name is replaced.
func (s sandboxFiles) load(dir string) error {
	return loadTrees(fileTrees, s.openTree, dir, s.user)
}

// SaveDirs copies the host directories trees (by name: another backend's
// sandbox's /work and /tmp, frozen by the caller) into dir/NAME each, as
// SaveFiles does: modes kept, symbolic links as they are, other kinds of
// files left out, no link followed out of a tree. Past max bytes (-1: no
// bound) it fails with ErrTooLarge; it returns the bytes copied.
func SaveDirs(trees map[string]string, dir string, max int64) (int64, error) {
	return saveTrees(slices.Sorted(maps.Keys(trees)), func(name string) (*os.Root, error) { return os.OpenRoot(trees[name]) }, dir, max)
}

// LoadDirs copies dir/NAME (as SaveDirs made them; a missing one is
// nothing) into the host directory trees[NAME], each file owned by uid.
func LoadDirs(dir string, trees map[string]string, uid int) error {
	return loadTrees(slices.Sorted(maps.Keys(trees)), func(name string) (*os.Root, error) { return os.OpenRoot(trees[name]) }, dir, uid)
}

// saveTrees copies the trees names, each opened by open, into dir/NAME.
func saveTrees(names []string, open func(string) (*os.Root, error), dir string, max int64) (int64, error) {
	var total int64
	for _, name := range names {
		src, err := open(name)
		if err != nil {
			return total, err
		}
		dst := filepath.Join(dir, name)
		err = os.MkdirAll(dst, 0o700)
		if err == nil {
			err = copyTree(src, dst, max, &total, -1)
		}
		src.Close()
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// loadTrees copies dir/NAME (a missing one is nothing) into the trees
// names, each opened by open, each file owned by uid.
func loadTrees(names []string, open func(string) (*os.Root, error), dir string, uid int) error {
	for _, name := range names {
		src, err := os.OpenRoot(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		dst, err := open(name)
		if err == nil {
			var n int64
			err = copyTree(src, "", -1, &n, uid, dst)
			dst.Close()
		}
		src.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// copyTree copies the tree of src into the directory dst (a host path;
// or, with into, that os.Root, each file then owned by uid), adding the
// bytes of its files to total, failing past max (-1: no bound).
func copyTree(src *os.Root, dst string, max int64, total *int64, uid int, into ...*os.Root) error {
	var out *os.Root
	if len(into) > 0 {
		out = into[0]
	} else {
		var err error
		if out, err = os.OpenRoot(dst); err != nil {
			return err
		}
		defer out.Close()
	}
	own := func(name string) error {
		if uid < 0 {
			return nil
		}
		return out.Lchown(name, uid, uid)
	}
	return fs.WalkDir(src.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch mode := info.Mode(); {
		case mode.IsDir():
			if err := out.Mkdir(p, mode.Perm()|0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			if err := out.Chmod(p, mode.Perm()); err != nil {
				return err
			}
			return own(p)
		case mode&fs.ModeSymlink != 0:
			target, err := src.Readlink(p)
			if err != nil {
				return err
			}
			out.Remove(p)
			if err := out.Symlink(target, p); err != nil {
				return err
			}
			return own(p)
		case mode.IsRegular():
			*total += info.Size()
			if max >= 0 && *total > max {
				return fmt.Errorf("%w (%d bytes)", ErrTooLarge, max)
			}
			return copyFile(src, out, p, mode.Perm(), own)
		}
		return nil // a FIFO, a socket, a device: not copied
	})
}

// copyFile copies the regular file p of src to out.
func copyFile(src, out *os.Root, p string, perm fs.FileMode, own func(string) error) error {
	in, err := src.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	out.Remove(p)
	f, err := out.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, in)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = out.Chmod(p, perm) // past the umask
	}
	if err == nil {
		err = own(p)
	}
	return err
}

// files is the run's sandboxFiles, once its program has started (its
// /work and /tmp are mounted then).
func (p *Process) files() (sandboxFiles, error) {
	if ev, ok := p.awaitStart(); !ok || ev.Event != "started" {
		return sandboxFiles{}, fmt.Errorf("%w: the program did not start (Wait says why)", ErrRunEnded)
	}
	if err := p.detachable(); err != nil {
		return sandboxFiles{}, err
	}
	return sandboxFiles{pid: p.c.cmd.Process.Pid, user: p.c.hostUser, freeze: p.freezer()}, nil
}

// SaveFiles copies the files of a live run (a Detachable spec's: its
// /work and its /tmp) into dir, which it makes (dir/work, dir/tmp), at
// most max bytes of them (else ErrTooLarge); the run is frozen while they
// are copied, so that they are those of one moment. It returns the bytes
// copied. Symbolic links are copied as they are; FIFOs, sockets and
// devices are left out.
func (p *Process) SaveFiles(ctx context.Context, dir string, max int64) (int64, error) {
	if !p.spec.Detachable {
		return 0, errors.New("sandbox: only a run of a Detachable spec has its files saved")
	}
	f, err := p.files()
	if err != nil {
		return 0, err
	}
	return f.save(ctx, dir, max)
}

// LoadFiles copies what SaveFiles saved in dir into the run's /work and
// /tmp, as its user's.
func (p *Process) LoadFiles(dir string) error {
	f, err := p.files()
	if err != nil {
		return err
	}
	return f.load(dir)
}

// SaveFiles copies the adopted run's files, as Process.SaveFiles does.
func (a *Adopted) SaveFiles(ctx context.Context, dir string, max int64) (int64, error) {
	if err := a.usable(); err != nil {
		return 0, err
	}
	return sandboxFiles{pid: a.d.Pid, user: a.d.UID + 1, freeze: a.freezer()}.save(ctx, dir, max)
}

// LoadFiles copies saved files into the adopted run, as Process.LoadFiles
// does.
func (a *Adopted) LoadFiles(dir string) error {
	if err := a.usable(); err != nil {
		return err
	}
	return sandboxFiles{pid: a.d.Pid, user: a.d.UID + 1, freeze: a.freezer()}.load(dir)
}
