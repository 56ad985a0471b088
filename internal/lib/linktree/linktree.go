// Package linktree copies a directory tree that nothing writes in place
// (a snapshot's, an evicted sandbox's) without copying its bytes: its
// regular files are hard-linked.
package linktree

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrTooLarge is a tree past the bound Link was given.
var ErrTooLarge = errors.New("linktree: the tree is larger than the bound")

// Link makes dst a copy of src, a tree this process wrote: directories
// made anew, regular files hard-linked (copied
// where a link cannot be made; nothing writes into them in place),
// symbolic links made as they are, anything else left out. Past max
// bytes of files (-1: no bound) it fails with an error that wraps
// ErrTooLarge; it returns the bytes of its files.
func Link(src, dst string, max int64) (int64, error) {
	var n int64
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(to, info.Mode().Perm()|0o700)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case !d.Type().IsRegular():
			return nil
		}
		if n += info.Size(); max >= 0 && n > max {
			return ErrTooLarge
		}
		if os.Link(p, to) == nil {
			return nil
		}
		return copyFile(p, to, info.Mode().Perm())
	})
	if err != nil {
		os.RemoveAll(dst)
		return 0, err
	}
	return n, nil
}

// copyFile copies the regular file src to dst, made with mode.
func copyFile(src, dst string, mode fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}
