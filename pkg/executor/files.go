package executor

import (
	"context"
	"errors"
	"fmt"
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

// cacheSet prepares each toolchain cache once per process; one that
// failed is tried again by the next that needs it.
type cacheSet struct {
	mu   sync.Mutex
	done map[string]*cacheEntry
}

type cacheEntry struct {
	ready chan struct{} // closed once dir or err is set
	dir   string
	err   error
}

// prepareCache returns the host directory of lang's toolchain cache,
// filling it on first use by running the trusted prepare command in a
// sandbox with the directory mounted writable. No user code ever runs
// with it writable; compiles get an overlay of it. In the background
// (idle), the command runs only on CPU time nothing else wants; a request
// that comes to wait for it meanwhile waits for that (or until its ctx
// ends).
func (x *Executor) prepareCache(ctx context.Context, lang *Language, tc *Toolchain, vars map[string]string, idle bool) (string, error) {
	key := lang.Name + "-" + strings.NewReplacer("/", "_", " ", "_").Replace(tc.Version)
	if tc.ImageDigest != "" {
		key += "-image-" + strings.TrimPrefix(tc.ImageDigest, "sha256:")[:16]
	}
	x.caches.mu.Lock()
	if x.caches.done == nil {
		x.caches.done = map[string]*cacheEntry{}
	}
	ce, ok := x.caches.done[key]
	if ok {
		select {
		case <-ce.ready:
			ok = ce.err == nil // a failed fill is tried again
		default:
		}
	}
	fill := !ok
	if fill {
		ce = &cacheEntry{ready: make(chan struct{})}
		x.caches.done[key] = ce
	}
	x.caches.mu.Unlock()
	if fill {
		ce.dir, ce.err = x.fillCache(ctx, key, lang, tc, vars, idle)
		close(ce.ready)
	}
	select {
	case <-ce.ready:
		return ce.dir, ce.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// fillCache fills key's cache directory by running the language's
// prepare command, once per key at a time across processes (a CLI beside
// a server). What a fill that was cut short made (a server stopped after
// a few seconds, as the first minute of CI does many times) stays in the
// partial directory, and the next fill goes on from it instead of
// starting again: Go's build cache is content-addressed, and the others
// rewrite what they make. A fill whose command failed starts afresh.
func (x *Executor) fillCache(ctx context.Context, key string, lang *Language, tc *Toolchain, vars map[string]string, idle bool) (_ string, err error) {
	base := x.cacheDir
	dir := filepath.Join(base, key)
	complete := func() bool {
		_, err := os.Stat(filepath.Join(dir, ".complete"))
		return err == nil
	}
	if complete() {
		return dir, nil
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", err
	}
	unlock, err := lockPath(ctx, filepath.Join(base, "."+key+".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if complete() {
		return dir, nil // another process filled it meanwhile
	}
	partial := filepath.Join(base, "."+key+".partial")
	if err := os.Mkdir(partial, 0o777); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	// The sandbox's namespace root owns nothing on the host, and each run
	// has host uids of its own: let this one write, and change what an
	// earlier, cut fill made.
	if err := chmodTree(partial, 0o777, 0o666); err != nil {
		return "", err
	}
	if x.cacheProgress != nil {
		start := time.Now()
		x.cacheProgress(CacheEvent{Language: lang.Name, Dir: dir})
		defer func() {
			x.cacheProgress(CacheEvent{Language: lang.Name, Dir: dir, Done: true, Err: err, Elapsed: time.Since(start)})
		}()
	}
	spec := &sandbox.Spec{
		Args:   expandAll(lang.Cache.Prepare, vars),
		Env:    environment(lang, tc, vars, nil),
		Mounts: append(x.mounts(tc), sandbox.Mount{Source: partial, Target: lang.Cache.Dir, Writable: true}),
		Root:   tc.Root,
		Limits: sandbox.Limits{WallTime: 600e9, CPUTime: 1200e9, Memory: 2 << 30, Processes: 256, CPUs: 2,
			FileSize: 1 << 30, TmpSize: 2 << 30, Inodes: 1 << 20, Idle: idle},
	}
	res, err := x.engine.Run(ctx, spec)
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 || res.Limit != sandbox.LimitNone {
		if ctx.Err() == nil {
			os.RemoveAll(partial) // not cut short: failed; the next one starts afresh
		}
		return "", fmt.Errorf("prepare %q: exit %d %s %s: %s", spec.Args, res.ExitCode, res.Signal, res.Limit, lastLine(res.Stderr))
	}
	// Complete, it is read only, by everyone.
	if err := chmodTree(partial, 0, 0); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(partial, ".complete"), nil, 0o644); err != nil {
		return "", err
	}
	os.RemoveAll(dir) // an incomplete one (none is made so, but an older build's may be there)
	if err := os.Rename(partial, dir); err != nil {
		return "", err
	}
	return dir, nil
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
