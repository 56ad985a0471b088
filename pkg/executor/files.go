package executor

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

var sessionIDPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$`)

func validSessionID(id string) bool { return sessionIDPattern.MatchString(id) }

func (x *Executor) sessionDir(id string) string {
	return filepath.Join(x.dataDir, "sessions", id)
}

// sessionLocks serialises executions of one session.
var sessionLocks sync.Map

func lockSession(id string) func() {
	m, _ := sessionLocks.LoadOrStore(id, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// loadSession reads a session's saved files; a new session has none.
func (x *Executor) loadSession(id string) ([]sandbox.File, error) {
	dir := x.sessionDir(id)
	root, err := os.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer root.Close()
	var files []sandbox.File
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := root.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		files = append(files, sandbox.File{Path: p, Data: data, Mode: info.Mode().Perm()})
		return nil
	})
	return files, err
}

// saveSession replaces a session's files with those the run left in /work.
// The files come from the safe collector (regular files, read after the
// run's processes died); they are written into a fresh directory that is
// swapped in, so a crash leaves either the old or the new state.
func (x *Executor) saveSession(id string, files []sandbox.OutputFile) error {
	base := filepath.Join(x.dataDir, "sessions")
	if err := os.MkdirAll(base, 0o700); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(base, "."+id+".new-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	root, err := os.OpenRoot(tmp)
	if err != nil {
		return err
	}
	defer root.Close()
	for _, f := range files {
		if _, err := sandbox.ValidatePath(f.Path); err != nil {
			continue
		}
		if dir := filepath.Dir(f.Path); dir != "." {
			if err := root.MkdirAll(dir, 0o700); err != nil {
				return err
			}
		}
		if err := root.WriteFile(f.Path, f.Data, f.Mode.Perm()|0o600); err != nil {
			return err
		}
	}
	dir := x.sessionDir(id)
	old := tmp + ".old"
	if err := os.Rename(dir, old); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return err
	}
	return os.RemoveAll(old)
}

// DeleteSession removes a session's saved files.
func (x *Executor) DeleteSession(id string) error {
	if !validSessionID(id) {
		return invalid("invalid session id %q", id)
	}
	x.EndInterpreter(id)
	unlock := lockSession(id)
	defer unlock()
	dir := x.sessionDir(id)
	if _, err := os.Stat(dir); err != nil {
		return ErrNoSession
	}
	return os.RemoveAll(dir)
}

// chmodTree adds dirBits to the mode of every directory of the tree at
// root and fileBits to every file's, and with zero bits takes the write
// permission of group and others away instead. Links are left alone.
func chmodTree(root string, dirBits, fileBits fs.FileMode) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		mode, add := info.Mode().Perm(), fileBits
		if d.IsDir() {
			add = dirBits
		}
		want := mode | add
		if add == 0 {
			want = mode &^ 0o022
		}
		if want == mode {
			return nil
		}
		return os.Chmod(path, want)
	})
}

// lockPath takes an exclusive lock on the file path (made if missing),
// waiting until it is free or ctx ends; unlock releases it.
func lockPath(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing releases it
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, err
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func lastLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}
