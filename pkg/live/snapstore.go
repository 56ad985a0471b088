package live

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// SnapshotStore keeps snapshots where every Manager of a cluster finds
// them (the cluster's object store): a snapshot taken of a sandbox on one
// host starts sandboxes on any, its memory too. A Manager with one keeps
// its snapshots there as well as in its StateDir, which is then a cache.
type SnapshotStore interface {
	// Put keeps sn, its files (and memory) in dir.
	Put(ctx context.Context, sn *Snapshot, dir string) error
	// Stat is owner's snapshot id (ErrNoSuchSnapshot: none, or
	// another owner's).
	Stat(ctx context.Context, owner, id string) (*Snapshot, error)
	// Fetch writes what Put kept of sn into dir (made).
	Fetch(ctx context.Context, sn *Snapshot, dir string) error
	// List is owner's snapshots.
	List(ctx context.Context, owner string) ([]*Snapshot, error)
	// Delete deletes owner's snapshot id (ErrNoSuchSnapshot: none, or
	// another owner's).
	Delete(ctx context.Context, owner, id string) error
}

// storeTimeout bounds a SnapshotStore's answer (not a transfer).
const storeTimeout = 30 * time.Second

// stored is owner's snapshot id in the store, its copy made in the state
// directory when it has none yet.
func (m *Manager) stored(ctx context.Context, owner, id string) (*Snapshot, error) {
	sctx, cancel := context.WithTimeout(ctx, storeTimeout)
	sn, err := m.cfg.Snapshots.Stat(sctx, owner, id)
	cancel()
	dir := filepath.Join(m.snapshotsDir(), id)
	if err != nil {
		if errors.Is(err, ErrNoSuchSnapshot) {
			os.RemoveAll(dir) // deleted elsewhere: the copy here goes too
		}
		return nil, err
	}
	if local, err := m.readSnapshot(id); err == nil && local.Owner == owner {
		return local, nil
	}
	if err := os.MkdirAll(m.snapshotsDir(), 0o700); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(m.snapshotsDir(), ".fetch-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if err := m.cfg.Snapshots.Fetch(ctx, sn, tmp); err != nil {
		return nil, fmt.Errorf("live: fetching the snapshot: %w", err)
	}
	if err := writeRecord(tmp, sn); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if local, rerr := m.readSnapshot(id); rerr == nil && local.Owner == owner {
			return local, nil // fetched by another create meanwhile
		}
		return nil, err
	}
	return sn, nil
}

// PackDir writes the tree dir (a snapshot's: directories, regular files
// and symbolic links, which are kept as links) to w as a tar stream.
func PackDir(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		case !d.IsDir() && !d.Type().IsRegular():
			return nil
		}
		h, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		h.Name, h.Uid, h.Gid, h.Uname, h.Gname = filepath.ToSlash(rel), 0, 0, "", ""
		if d.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// UnpackDir makes the tree that PackDir wrote to r in dir (made already),
// every step inside dir (os.Root): a name that leads out of it, or through
// a link, fails; symbolic links are made as they are, never followed.
func UnpackDir(r io.Reader, dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := path.Clean(strings.TrimSuffix(h.Name, "/"))
		if name == "." || !fs.ValidPath(name) {
			return fmt.Errorf("live: a snapshot's entry %q is not a path inside it", h.Name)
		}
		mode := fs.FileMode(h.Mode).Perm()
		switch h.Typeflag {
		case tar.TypeDir:
			err = root.MkdirAll(name, mode|0o700)
		case tar.TypeSymlink:
			err = root.Symlink(h.Linkname, name)
		case tar.TypeReg:
			var f *os.File
			if f, err = root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode); err == nil {
				_, err = io.Copy(f, tr)
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
		default:
			continue // nothing else is a snapshot's
		}
		if err != nil {
			return fmt.Errorf("live: a snapshot's %s: %w", name, err)
		}
	}
}
