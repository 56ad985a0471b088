package agent

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// watcher watches a directory, and when recursive the directories under
// it, through inotify.
type watcher struct {
	f         *os.File // the inotify instance: closing it stops run
	rc        syscall.RawConn
	root      string
	recursive bool
	// dirs are the watched directories, relative to root ("" for root),
	// by their watch descriptor, and wds the other way round. Only run
	// uses them once it started.
	dirs map[int]string
	wds  map[string]int
}

// watchMask is what a watch reports.
const watchMask = unix.IN_CREATE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_MODIFY |
	unix.IN_DELETE | unix.IN_DELETE_SELF | unix.IN_ATTRIB

// newWatcher watches directory path, and when recursive the directories
// under it.
func newWatcher(path string, recursive bool) (*watcher, error) {
	root, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(root); err != nil {
		return nil, err
	} else if !fi.IsDir() {
		return nil, invalid("%s is not a directory", path)
	}
	// Non-blocking, so that its reads wait in Go's poller, and closing
	// it ends a read under way.
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, os.NewSyscallError("inotify_init1", err)
	}
	w := &watcher{f: os.NewFile(uintptr(fd), "inotify"), root: root, recursive: recursive, dirs: map[int]string{}, wds: map[string]int{}}
	if w.rc, err = w.f.SyscallConn(); err == nil {
		if recursive {
			err = w.addTree("", nil)
		} else {
			err = w.addDir("")
		}
	}
	if err != nil {
		w.f.Close()
		return nil, err
	}
	return w, nil
}

// close stops the watcher (run returns).
func (w *watcher) close() { w.f.Close() }

// run reports the watcher's events to emit (name relative to the root,
// and an FSOp) until it is closed (nil) or ends on its own (an error
// that says why).
func (w *watcher) run(emit func(name, op string)) error {
	err := w.read(emit)
	if errors.Is(err, os.ErrClosed) {
		return nil
	}
	return err
}

// read reads and reports the watcher's events until a read fails.
func (w *watcher) read(emit func(name, op string)) error {
	buf := make([]byte, 64<<10)
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			return err
		}
		// struct inotify_event: wd, mask, cookie, len, then len bytes
		// of name padded with NULs.
		for b := buf[:n]; len(b) >= unix.SizeofInotifyEvent; {
			wd := int(int32(binary.NativeEndian.Uint32(b[0:])))
			mask := binary.NativeEndian.Uint32(b[4:])
			end := unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(b[12:]))
			name := strings.TrimRight(string(b[unix.SizeofInotifyEvent:end]), "\x00")
			b = b[end:]
			if err := w.event(wd, mask, name, emit); err != nil {
				return err
			}
		}
	}
}

// event reports one inotify event, and keeps the watches of a recursive
// watcher on the directories under the root.
func (w *watcher) event(wd int, mask uint32, name string, emit func(name, op string)) error {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		return errors.New("events lost: too many at once")
	}
	dir, ok := w.dirs[wd]
	if !ok {
		return nil // a watch removed meanwhile
	}
	if mask&unix.IN_IGNORED != 0 {
		w.drop(wd)
		if dir == "" {
			return errors.New("the watched directory is gone")
		}
		return nil
	}
	if name == "" {
		// The watched directory itself; a directory under it is
		// reported by its parent's watch.
		if dir == "" && mask&unix.IN_DELETE_SELF != 0 {
			emit(".", FSRemove)
		}
		return nil
	}
	name = filepath.Join(dir, name)
	isDir := w.recursive && mask&unix.IN_ISDIR != 0
	switch {
	case mask&unix.IN_CREATE != 0:
		return w.arrived(name, FSCreate, isDir, emit)
	case mask&unix.IN_MOVED_TO != 0:
		return w.arrived(name, FSRename, isDir, emit)
	case mask&unix.IN_MOVED_FROM != 0:
		emit(name, FSRename)
		if isDir {
			w.forget(name) // its watches would report under its old name
		}
	case mask&unix.IN_MODIFY != 0:
		emit(name, FSWrite)
	case mask&unix.IN_DELETE != 0:
		emit(name, FSRemove)
		if isDir {
			w.forget(name) // its own end may come late (held open)
		}
	case mask&unix.IN_ATTRIB != 0:
		emit(name, FSChmod)
	}
	return nil
}

// arrived reports name, made (FSCreate) or moved (FSRename) into a
// watched directory. A directory of a recursive watcher is reported
// once it is watched, so that what is done in it from then on is
// reported too; then the directories under it are watched and, when it
// was made, what was made in it before its watch was is reported as
// created.
func (w *watcher) arrived(name, op string, isDir bool, emit func(name, op string)) error {
	if _, watched := w.wds[name]; !isDir || watched {
		emit(name, op) // watched: found by the look through its parent
		return nil
	}
	if err := w.addDir(name); err != nil && !skippable(err) {
		return err
	}
	emit(name, op)
	if op != FSCreate {
		emit = nil
	}
	return w.addTree(name, emit)
}

// addTree watches directory rel (relative to the root), unless it is,
// and the directories under it that are not; with emit, it reports what
// it finds under it as created. A directory gone or unreadable meanwhile
// is left out, but the root.
func (w *watcher) addTree(rel string, emit func(name, op string)) error {
	top := filepath.Join(w.root, rel)
	return filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		root := rel == "" && p == top
		if err != nil {
			if root {
				return err
			}
			return nil
		}
		name, _ := filepath.Rel(w.root, p)
		if name == "." {
			name = ""
		}
		if p != top && emit != nil {
			emit(name, FSCreate)
		}
		if !d.IsDir() {
			return nil
		}
		if _, watched := w.wds[name]; watched {
			if p == top {
				return nil
			}
			return filepath.SkipDir // looked through when it was watched
		}
		if err := w.addDir(name); err != nil {
			if root || !skippable(err) {
				return err
			}
			return filepath.SkipDir
		}
		return nil
	})
}

// skippable says whether err, of a directory under the root, is that it
// went or cannot be watched.
func skippable(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.ENOTDIR)
}

// addDir watches directory rel (relative to the root).
func (w *watcher) addDir(rel string) error {
	p := filepath.Join(w.root, rel)
	var wd int
	var err error
	if cerr := w.rc.Control(func(fd uintptr) {
		wd, err = unix.InotifyAddWatch(int(fd), p, watchMask|unix.IN_ONLYDIR|unix.IN_DONT_FOLLOW)
	}); cerr != nil {
		return os.ErrClosed // its only failure
	}
	if errors.Is(err, unix.ENOSPC) {
		return fmt.Errorf("watch %s: too many watches (fs.inotify.max_user_watches)", p)
	}
	if err != nil {
		return &os.PathError{Op: "watch", Path: p, Err: err}
	}
	if old, ok := w.wds[rel]; ok && old != wd {
		delete(w.dirs, old)
	}
	w.dirs[wd], w.wds[rel] = rel, wd
	return nil
}

// drop forgets watch descriptor wd.
func (w *watcher) drop(wd int) {
	if rel, ok := w.dirs[wd]; ok && w.wds[rel] == wd {
		delete(w.wds, rel)
	}
	delete(w.dirs, wd)
}

// forget stops watching directory rel and those under it.
func (w *watcher) forget(rel string) {
	for wd, dir := range w.dirs {
		if dir == rel || strings.HasPrefix(dir, rel+"/") {
			_ = w.rc.Control(func(fd uintptr) { _, _ = unix.InotifyRmWatch(int(fd), uint32(wd)) })
			w.drop(wd)
		}
	}
}
