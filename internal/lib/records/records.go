// Package records keeps a store's records as files: one JSON file per
// record, named after its id, written atomically; and the ids, listings
// and expiry cadence the stores (files, sessions) share.
package records

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"time"
)

// NewID is prefix and 24 random hex digits: an id nobody can guess.
func NewID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// ReadDir lists a store's directory. One that does not exist yet
// holds nothing; one that cannot be read is logged as msg and treated as
// empty, so that the server still starts.
func ReadDir(dir string, log *slog.Logger, msg string) []os.DirEntry {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			log.Error(msg, "dir", dir, "error", err)
		}
		return nil
	}
	return entries
}

// FileID is the id of a store's record file, named <id>.json with
// an id that pattern accepts.
func FileID(name string, pattern *regexp.Regexp) (string, bool) {
	id, ok := strings.CutSuffix(name, ".json")
	return id, ok && pattern.MatchString(id)
}

// Record is a record that a store keeps in a file named after its id.
type Record interface{ RecordID() string }

// Read decodes the record file path into rec and checks that it
// holds id's record.
func Read(path, id string, rec Record) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, rec); err != nil {
		return err
	}
	if rec.RecordID() != id {
		return errors.New("id mismatch")
	}
	return nil
}

// WriteJSON writes v to path atomically (see WriteAtomic).
func WriteJSON(dir, prefix, path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return WriteAtomic(dir, prefix, path, func(w io.Writer) error {
		_, err := w.Write(append(data, '\n'))
		return err
	})
}

// WriteAtomic writes path with write, atomically: into a temporary file
// in dir (named prefix...), synced, then renamed over path. When write
// fails (it may refuse what it wrote), path is left as it was.
func WriteAtomic(dir, prefix, path string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(dir, prefix)
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	err = write(tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// JanitorInterval is how often a janitor looks for what expired: a
// quarter of the shortest lifetime, between 50 ms and a minute.
func JanitorInterval(lifetimes ...time.Duration) time.Duration {
	d := time.Minute
	for _, l := range lifetimes {
		if l > 0 {
			d = min(d, l/4)
		}
	}
	return max(d, 50*time.Millisecond)
}
