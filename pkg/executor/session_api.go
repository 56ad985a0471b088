package executor

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
	"github.com/sandbox-run/sandbox-run/pkg/sessions"
)

// What a server needs to manage sessions from outside an execution: list,
// read and remove a session's saved files without following links out of
// its directory, and end sessions that are not running.

// MaxSessionBytes is the most a session keeps between executions: the
// files of /work are collected up to this total after each run, and the
// rest are dropped.
const MaxSessionBytes = maxSessionBytes

// ErrSessionBusy means an execution of the session is running.
var ErrSessionBusy = sessions.ErrBusy

func sessionMutex(id string) *sync.Mutex {
	m, _ := sessionLocks.LoadOrStore(id, &sync.Mutex{})
	return m.(*sync.Mutex)
}

// SessionManager returns an Executor that only manages the sessions kept
// under dataDir (default DefaultDataDir), for tools that list or remove
// them without running anything (`sandbox-run sessions`): it builds no
// sandbox engine, reads no language table and writes nothing. Call only
// the session methods on it (SessionIDs, SessionFiles, SessionDir,
// SessionLastUsed, OpenSessionFile, RemoveSessionFile, TryDeleteSession,
// DeleteSession); Execute and the others need New.
func SessionManager(dataDir string) *Executor {
	if dataDir == "" {
		dataDir = DefaultDataDir
	}
	return &Executor{dataDir: dataDir}
}

// SessionLastUsed is when a session's files were last saved (the end of
// its last execution); fs.ErrNotExist for a session without files.
func (x *Executor) SessionLastUsed(id string) (time.Time, error) {
	if !validSessionID(id) {
		return time.Time{}, invalid("invalid session id %q", id)
	}
	// Each execution saves a fresh directory and renames it into place.
	info, err := os.Stat(x.sessionDir(id))
	if err != nil {
		return time.Time{}, err
	}
	return info.ModTime(), nil
}

// SessionDir is the host directory that holds a session's files.
func (x *Executor) SessionDir(id string) (string, error) {
	if !validSessionID(id) {
		return "", invalid("invalid session id %q", id)
	}
	return x.sessionDir(id), nil
}

// SessionFiles lists the regular files a session keeps, by path, and their
// total size. A session that never ran has none (ErrNoSession is not an
// error here). The listing is of one saved state: if an execution swaps in
// a new state during the walk, the walk starts over.
func (x *Executor) SessionFiles(id string) ([]SessionFile, int64, error) {
	if !validSessionID(id) {
		return nil, 0, invalid("invalid session id %q", id)
	}
	dir := x.sessionDir(id)
	var lastErr error
	for range 5 {
		files, total, err := listSession(dir)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			if err != nil {
				return []SessionFile{}, 0, nil
			}
			return files, total, nil
		}
		lastErr = err
		if !errors.Is(err, errStateSwapped) {
			return nil, 0, err
		}
	}
	return nil, 0, lastErr
}

var errStateSwapped = errors.New("session state changed during the listing")

func listSession(dir string) ([]SessionFile, int64, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, 0, err
	}
	defer root.Close()
	before, err := root.Stat(".")
	if err != nil {
		return nil, 0, err
	}
	files := []SessionFile{}
	var total int64
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		files = append(files, SessionFile{Path: p, Size: info.Size()})
		total += info.Size()
		return nil
	})
	// saveSession renames a fresh directory into place: if the path no
	// longer names the directory walked, a new state came in meanwhile.
	now, statErr := os.Stat(dir)
	if statErr != nil || !os.SameFile(before, now) {
		return nil, 0, errStateSwapped
	}
	if err != nil {
		return nil, 0, err
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, total, nil
}

// OpenSessionFile opens one regular file of a session for reading. p is
// relative to /work; nothing outside the session's directory is reachable.
// Files are never changed in place (a run's state replaces the directory),
// so what is read is one consistent version.
func (x *Executor) OpenSessionFile(id, p string) (*os.File, error) {
	if !validSessionID(id) {
		return nil, invalid("invalid session id %q", id)
	}
	clean, err := sandbox.ValidatePath(p)
	if err != nil {
		return nil, invalid("%v", err)
	}
	root, err := os.OpenRoot(x.sessionDir(id))
	if err != nil {
		return nil, fs.ErrNotExist
	}
	defer root.Close()
	info, err := root.Lstat(clean)
	if err != nil || !info.Mode().IsRegular() {
		return nil, fs.ErrNotExist
	}
	f, err := root.Open(clean)
	if err != nil {
		return nil, fs.ErrNotExist
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fs.ErrNotExist
	}
	return f, nil
}

// RemoveSessionFile deletes one regular file of a session. It fails with
// ErrSessionBusy while an execution of the session runs, and with
// fs.ErrNotExist when there is no such file.
func (x *Executor) RemoveSessionFile(id, p string) error {
	if !validSessionID(id) {
		return invalid("invalid session id %q", id)
	}
	clean, err := sandbox.ValidatePath(p)
	if err != nil {
		return invalid("%v", err)
	}
	mu := sessionMutex(id)
	if !mu.TryLock() {
		return ErrSessionBusy
	}
	defer mu.Unlock()
	root, err := os.OpenRoot(x.sessionDir(id))
	if err != nil {
		return fs.ErrNotExist
	}
	defer root.Close()
	info, err := root.Lstat(clean)
	if err != nil || !info.Mode().IsRegular() {
		return fs.ErrNotExist
	}
	return root.Remove(clean)
}

// SessionBusy says whether an execution of the session is running.
func (x *Executor) SessionBusy(id string) bool {
	mu := sessionMutex(id)
	if mu.TryLock() {
		mu.Unlock()
		return false
	}
	return true
}

// TryDeleteSession removes a session's files unless an execution of it is
// running (ErrSessionBusy). A session without files is not an error.
func (x *Executor) TryDeleteSession(id string) error {
	if !validSessionID(id) {
		return invalid("invalid session id %q", id)
	}
	mu := sessionMutex(id)
	if !mu.TryLock() {
		return ErrSessionBusy
	}
	defer mu.Unlock()
	return removeSessionDir(x.sessionDir(id))
}

func removeSessionDir(dir string) error {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	// Move it aside first so that nobody sees a half-removed state.
	gone := filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+".gone")
	if err := os.RemoveAll(gone); err != nil {
		return err
	}
	if err := os.Rename(dir, gone); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	return os.RemoveAll(gone)
}

// SessionIDs lists the sessions that have saved files.
func (x *Executor) SessionIDs() ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(x.dataDir, "sessions"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && validSessionID(e.Name()) {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// SessionSnapshot is the files session id keeps, read whole (a session
// that never ran has none), for a copy elsewhere (a cluster keeps one, so
// that a session outlives its worker).
func (x *Executor) SessionSnapshot(id string) ([]sandbox.File, error) {
	if !validSessionID(id) {
		return nil, invalid("invalid session id %q", id)
	}
	unlock := lockSession(id)
	defer unlock()
	return x.loadSession(id)
}

// RestoreSession replaces the files of session id with files (paths
// checked, written inside the session's directory only).
func (x *Executor) RestoreSession(id string, files []sandbox.File) error {
	if !validSessionID(id) {
		return invalid("invalid session id %q", id)
	}
	out := make([]sandbox.OutputFile, len(files))
	for i, f := range files {
		out[i] = sandbox.OutputFile{Path: f.Path, Data: f.Data, Mode: f.Mode}
	}
	unlock := lockSession(id)
	defer unlock()
	return x.saveSession(id, out)
}
