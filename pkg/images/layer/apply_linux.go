package layer

import (
	"archive/tar"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// resolve is how every path beneath the directory is looked up: beneath
// its descriptor, through no symlink or magic link, onto no other mount.
const resolve = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// Apply applies the layer read from r, an uncompressed tar stream, onto
// the directory dir, which holds the layers below it, already applied, or
// is empty. It returns what it did, up to the first error: a *LimitError
// if the layer exceeds lim, an *EntryError naming the entry that could not
// be applied, or an error reading the stream. On an error dir is left
// partly written (never anything outside it): the caller removes it.
func Apply(dir string, r io.Reader, lim Limits) (Stats, error) {
	root, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return Stats{}, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(root)
	a := &applier{
		root:    root,
		lim:     lim.withDefaults(),
		seed:    maphash.MakeSeed(),
		keep:    make(map[uint64]struct{}),
		skipped: make(map[uint64]struct{}),
	}
	tr := tar.NewReader(r)
	entries := 0
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return a.stats, nil
		}
		// With GODEBUG=tarinsecurepath=0 the reader flags absolute and
		// ".." names; they are checked here either way.
		if err != nil && (hdr == nil || !errors.Is(err, tar.ErrInsecurePath)) {
			return a.stats, fmt.Errorf("layer: reading the tar stream: %w", err)
		}
		if entries++; entries > a.lim.MaxEntries {
			return a.stats, &LimitError{Entries: true, Limit: int64(a.lim.MaxEntries)}
		}
		if err := a.entry(hdr, tr); err != nil {
			if le, ok := errors.AsType[*LimitError](err); ok {
				return a.stats, le
			}
			return a.stats, &EntryError{Name: hdr.Name, Err: err}
		}
	}
}

// applier is the state of one Apply.
type applier struct {
	root  int // O_PATH descriptor of the directory
	lim   Limits
	stats Stats
	buf   []byte // copy buffer

	// keep holds (hashes of) the paths this layer wrote and their
	// ancestors: whiteouts remove only what lower layers wrote. skipped
	// holds the paths of entries this layer skipped, so that hard links
	// to them are skipped too. The hashes are keyed with a random seed,
	// so a layer cannot aim for a collision.
	seed    maphash.Seed
	keep    map[uint64]struct{}
	skipped map[uint64]struct{}
}

// entry applies one tar entry.
func (a *applier) entry(hdr *tar.Header, r io.Reader) error {
	comps, err := splitPath(hdr.Name)
	if err != nil {
		return err
	}
	if len(comps) == 0 {
		// The root itself: its mode is the caller's.
		switch hdr.Typeflag {
		case tar.TypeDir:
			a.stats.Dirs++
			return nil
		case tar.TypeReg, tar.TypeGNUSparse, tar.TypeSymlink, tar.TypeLink:
			return fmt.Errorf("%w: a non-directory entry names the root", ErrBadEntry)
		}
		a.stats.Skipped++
		return nil
	}
	if strings.HasPrefix(comps[len(comps)-1], whiteoutPrefix) {
		return a.whiteout(comps)
	}
	p := strings.Join(comps, "/")
	switch hdr.Typeflag {
	case tar.TypeReg, tar.TypeGNUSparse:
		err = a.file(comps, hdr, r)
	case tar.TypeDir:
		err = a.dir(comps, hdr)
	case tar.TypeSymlink:
		err = a.symlink(comps, hdr)
	case tar.TypeLink:
		var skip bool
		if skip, err = a.hardlink(comps, p, hdr); skip {
			a.skip(p)
			return nil
		}
	default:
		// Devices, FIFOs, TypeCont and anything unknown.
		a.skip(p)
		return nil
	}
	if err == nil {
		a.record(p)
	}
	return err
}

// file writes a regular file, replacing what was at its path.
func (a *applier) file(comps []string, hdr *tar.Header, r io.Reader) error {
	if hdr.Size > a.lim.MaxBytes-a.stats.Bytes {
		return a.limitError()
	}
	pfd, base, err := a.parent(comps, true)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	if err := removeAll(pfd, base); err != nil {
		return err
	}
	fd, err := openat2(pfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	f := os.NewFile(uintptr(fd), base)
	if a.buf == nil {
		a.buf = make([]byte, 128<<10)
	}
	n, err := io.CopyBuffer(budgetWriter{f, a}, r, a.buf)
	if err == nil && n != hdr.Size {
		err = fmt.Errorf("wrote %d bytes of %d", n, hdr.Size)
	}
	if err == nil {
		err = unix.Fchmod(fd, uint32(hdr.Mode)&0o777)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	setTimes(pfd, base, hdr)
	a.stats.Files++
	return nil
}

// budgetWriter counts the bytes written against the limit, and refuses a
// write that would exceed it.
type budgetWriter struct {
	w io.Writer
	a *applier
}

func (b budgetWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > b.a.lim.MaxBytes-b.a.stats.Bytes {
		return 0, b.a.limitError()
	}
	n, err := b.w.Write(p)
	b.a.stats.Bytes += int64(n)
	return n, err
}

func (a *applier) limitError() error {
	return &LimitError{Limit: a.lim.MaxBytes}
}

// dir creates a directory, or sets the mode of the one already there.
func (a *applier) dir(comps []string, hdr *tar.Header) error {
	pfd, base, err := a.parent(comps, true)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	perm := dirPerm(hdr.Mode)
	var st unix.Stat_t
	err = unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR:
		err = chmodDir(pfd, base, perm)
	case err == nil || errors.Is(err, unix.ENOENT):
		if err = removeAll(pfd, base); err == nil {
			err = mkdir(pfd, base, perm)
		}
	}
	if err != nil {
		return err
	}
	a.stats.Dirs++
	return nil
}

// dirPerm is a directory's mode from the tar mode: the permission bits
// and sticky, never setuid or setgid, and always u+rwx.
func dirPerm(mode int64) uint32 {
	return uint32(mode)&0o1777 | 0o700
}

// symlink creates a symlink with the target as given, replacing what was
// at its path.
func (a *applier) symlink(comps []string, hdr *tar.Header) error {
	if hdr.Linkname == "" {
		return fmt.Errorf("%w: empty symlink target", ErrBadEntry)
	}
	if len(hdr.Linkname) > MaxPathLen {
		return fmt.Errorf("symlink target: %w", ErrPathTooLong)
	}
	pfd, base, err := a.parent(comps, true)
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	if err := removeAll(pfd, base); err != nil {
		return err
	}
	if err := unix.Symlinkat(hdr.Linkname, pfd, base); err != nil {
		return fmt.Errorf("symlink: %w", err)
	}
	setTimes(pfd, base, hdr)
	a.stats.Symlinks++
	return nil
}

// hardlink links the path p (split in comps) to the existing regular file
// hdr.Linkname, or reports skip if this layer skipped that path.
func (a *applier) hardlink(comps []string, p string, hdr *tar.Header) (skip bool, err error) {
	tcomps, err := splitPath(hdr.Linkname)
	if err != nil {
		return false, fmt.Errorf("hard link target %q: %w", hdr.Linkname, err)
	}
	if len(tcomps) == 0 {
		return false, fmt.Errorf("%w: %q is the root", ErrBadLink, hdr.Linkname)
	}
	tp := strings.Join(tcomps, "/")
	if _, ok := a.skipped[a.hash(tp)]; ok {
		return true, nil
	}
	tpfd, tbase, err := a.parent(tcomps, false)
	if err != nil {
		return false, fmt.Errorf("%w: %q: %w", ErrBadLink, hdr.Linkname, err)
	}
	defer unix.Close(tpfd)
	var st unix.Stat_t
	if err := unix.Fstatat(tpfd, tbase, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return false, fmt.Errorf("%w: %q: %w", ErrBadLink, hdr.Linkname, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return false, fmt.Errorf("%w: %q is not a regular file", ErrBadLink, hdr.Linkname)
	}
	if tp != p {
		pfd, base, err := a.parent(comps, true)
		if err != nil {
			return false, err
		}
		defer unix.Close(pfd)
		if err := removeAll(pfd, base); err != nil {
			return false, err
		}
		// Flags 0: linkat does not follow the target if it is a symlink.
		if err := unix.Linkat(tpfd, tbase, pfd, base, 0); err != nil {
			return false, fmt.Errorf("link to %q: %w", hdr.Linkname, err)
		}
	}
	a.stats.Hardlinks++
	return false, nil
}

// whiteout applies a whiteout entry (comps is its path).
func (a *applier) whiteout(comps []string) error {
	dirs, base := comps[:len(comps)-1], comps[len(comps)-1]
	dir := strings.Join(dirs, "/")
	if base == whiteoutOpaque {
		// The directory is this layer's: make it if it is missing.
		pfd, err := a.openDir(dirs, true)
		if err != nil {
			return err
		}
		defer unix.Close(pfd)
		dfd, err := openat2(pfd, ".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return err
		}
		defer unix.Close(dfd)
		if err := a.removeLowerIn(dfd, dir); err != nil {
			return err
		}
		a.record(dir)
		a.stats.Whiteouts++
		return nil
	}
	if strings.HasPrefix(base, whiteoutMeta) {
		a.stats.Skipped++ // AUFS metadata (.wh..wh.plnk and the like)
		return nil
	}
	name := base[len(whiteoutPrefix):]
	switch name {
	case "", ".":
		return fmt.Errorf("%w: whiteout of %q", ErrBadEntry, name)
	case "..":
		return ErrEscape
	}
	pfd, err := a.openDir(dirs, false)
	if errors.Is(err, unix.ENOENT) {
		a.stats.Whiteouts++ // nothing below to remove
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(pfd)
	if err := a.removeLower(pfd, name, join(dir, name)); err != nil {
		return err
	}
	a.stats.Whiteouts++
	return nil
}

// removeLower removes name in the directory pfd (at path p) as far as
// lower layers put it there: wholly unless this layer wrote p or beneath
// it; else, if p is a directory, whatever in it this layer did not write.
func (a *applier) removeLower(pfd int, name, p string) error {
	if _, ok := a.keep[a.hash(p)]; !ok {
		return removeAll(pfd, name)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil
	}
	dfd, err := openat2(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	return a.removeLowerIn(dfd, p)
}

// removeLowerIn calls removeLower for every entry of the directory dfd
// (at path dir).
func (a *applier) removeLowerIn(dfd int, dir string) error {
	names, err := readDirNames(dfd)
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := a.removeLower(dfd, name, join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// record notes that this layer wrote p: p and its ancestors are kept by
// whiteouts, and p is no longer skipped.
func (a *applier) record(p string) {
	delete(a.skipped, a.hash(p))
	for cut := len(p); cut > 0; cut = strings.LastIndexByte(p[:cut], '/') {
		h := a.hash(p[:cut])
		if _, ok := a.keep[h]; ok {
			return // and so are its ancestors
		}
		a.keep[h] = struct{}{}
	}
}

// skip counts an entry that is not created and notes its path.
func (a *applier) skip(p string) {
	a.stats.Skipped++
	a.skipped[a.hash(p)] = struct{}{}
}

func (a *applier) hash(p string) uint64 {
	return maphash.String(a.seed, p)
}

// parent returns an O_PATH descriptor of the directory that holds the
// path comps, and the path's last component. With create, missing
// directories are made (mode 0755).
func (a *applier) parent(comps []string, create bool) (int, string, error) {
	fd, err := a.openDir(comps[:len(comps)-1], create)
	return fd, comps[len(comps)-1], err
}

// openDir returns an O_PATH descriptor of the directory dirs (the root if
// empty), reached through no symlink; with create, missing directories
// are made with mode 0755.
func (a *applier) openDir(dirs []string, create bool) (int, error) {
	p := "."
	if len(dirs) > 0 {
		p = strings.Join(dirs, "/")
	}
	fd, err := openat2(a.root, p, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err == nil {
		return fd, nil
	}
	if !create || !errors.Is(err, unix.ENOENT) {
		return -1, resolveError(err)
	}
	// Walk down, making what is missing.
	if fd, err = openat2(a.root, ".", unix.O_PATH|unix.O_DIRECTORY, 0); err != nil {
		return -1, err
	}
	for _, name := range dirs {
		next, err := openat2(fd, name, unix.O_PATH|unix.O_DIRECTORY, 0)
		if errors.Is(err, unix.ENOENT) {
			if err = mkdir(fd, name, 0o755); err == nil {
				next, err = openat2(fd, name, unix.O_PATH|unix.O_DIRECTORY, 0)
			}
		}
		unix.Close(fd)
		if err != nil {
			return -1, resolveError(err)
		}
		fd = next
	}
	return fd, nil
}

// resolveError names the errors of a lookup that met a symlink, a
// non-directory or a way out.
func resolveError(err error) error {
	switch {
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
		return fmt.Errorf("%w (%w)", ErrSymlinkParent, err)
	case errors.Is(err, unix.EXDEV):
		return fmt.Errorf("%w (%w)", ErrEscape, err)
	}
	return err
}

// openat2 opens name beneath dirfd with the resolve rules, retrying when
// the kernel asks to.
func openat2(dirfd int, name string, flags int, mode uint32) (int, error) {
	how := &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode), Resolve: resolve}
	for range 64 {
		fd, err := unix.Openat2(dirfd, name, how)
		if err != unix.EAGAIN && err != unix.EINTR {
			return fd, err
		}
	}
	return -1, unix.EAGAIN
}

// mkdir makes the directory name in pfd with the mode perm (whatever the
// umask).
func mkdir(pfd int, name string, perm uint32) error {
	if err := unix.Mkdirat(pfd, name, 0o700); err != nil {
		return fmt.Errorf("mkdir: %w", err)
	}
	return chmodDir(pfd, name, perm)
}

// chmodDir sets the mode of the directory name in pfd, without following
// a symlink.
func chmodDir(pfd int, name string, perm uint32) error {
	fd, err := openat2(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return resolveError(err)
	}
	defer unix.Close(fd)
	return unix.Fchmod(fd, perm)
}

// removeAll removes name in the directory pfd, and everything beneath it
// if it is a directory, without following any symlink; a missing name is
// not an error.
func removeAll(pfd int, name string) error {
	err := unix.Unlinkat(pfd, name, 0)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return nil
	}
	if !errors.Is(err, unix.EISDIR) {
		return fmt.Errorf("remove: %w", err)
	}
	dfd, err := openat2(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("remove: %w", err)
	}
	names, err := readDirNames(dfd)
	for _, n := range names {
		if err == nil {
			err = removeAll(dfd, n)
		}
	}
	unix.Close(dfd)
	if err != nil {
		return err
	}
	if err := unix.Unlinkat(pfd, name, unix.AT_REMOVEDIR); err != nil {
		return fmt.Errorf("remove: %w", err)
	}
	return nil
}

// readDirNames lists the directory fd (an O_RDONLY descriptor read from
// its start), without "." and "..".
func readDirNames(fd int) ([]string, error) {
	buf := make([]byte, 16<<10)
	var names []string
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return names, fmt.Errorf("read dir: %w", err)
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}

// setTimes sets the modification (and access) time of name in pfd from
// hdr, without following a symlink. It is best effort: a time the
// filesystem refuses is left.
func setTimes(pfd int, name string, hdr *tar.Header) {
	if hdr.ModTime.IsZero() {
		return
	}
	ts, err := unix.TimeToTimespec(hdr.ModTime)
	if err != nil {
		return
	}
	_ = unix.UtimesNanoAt(pfd, name, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
}

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}
