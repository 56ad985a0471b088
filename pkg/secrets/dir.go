package secrets

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sandbox-run/sandbox-run/internal/lib/records"
)

// Backend keeps each owner's sealed record: the file store of Dir, or a
// cluster's key-value store. Store serializes its calls for one owner.
type Backend interface {
	// Load returns owner's record, nil (and no error) when there is none.
	Load(owner string) ([]byte, error)
	// Save replaces owner's record by data, or removes it when data is empty.
	Save(owner string, data []byte) error
}

// Shared is a Backend that several servers write at once (a cluster's
// key-value store). LoadRev returns a record with its revision (0: none),
// and SaveRev saves one only if it is still at rev, else fails with an
// error wrapping ErrConflict: Store then reads it again and redoes its
// change.
type Shared interface {
	Backend
	LoadRev(owner string) (data []byte, rev uint64, err error)
	SaveRev(owner string, data []byte, rev uint64) error
}

// ErrConflict is a Shared backend's record changed by another server
// since it was read.
var ErrConflict = errors.New("secrets: the record changed meanwhile")

// Dir is the Backend of one file per owner in the directory path (made
// 0700 on the first Save), named by the hex SHA-256 of the owner, never
// the owner itself, and written atomically with mode 0600.
func Dir(path string) Backend { return dir(path) }

type dir string

func (d dir) file(owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return filepath.Join(string(d), hex.EncodeToString(sum[:])+".json")
}

// Load reads owner's file.
func (d dir) Load(owner string) ([]byte, error) {
	data, err := os.ReadFile(d.file(owner))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return data, err
}

// Save writes owner's file through a synced temporary file (mode 0600)
// renamed over it, then syncs the directory; empty data removes the file.
func (d dir) Save(owner string, data []byte) error {
	path := d.file(owner)
	if len(data) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return d.sync()
	}
	if err := os.MkdirAll(string(d), 0o700); err != nil {
		return err
	}
	if err := os.Chmod(string(d), 0o700); err != nil {
		return err
	}
	err := records.WriteAtomic(string(d), ".tmp-", path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
	if err != nil {
		return err
	}
	return d.sync()
}

// sync makes the directory's entries durable.
func (d dir) sync() error {
	f, err := os.Open(string(d))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
