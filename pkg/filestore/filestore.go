// Package filestore keeps uploaded files for the API (POST
// /api/sandbox/files) on disk, with quotas for the store and for each
// owner (API key), a lifetime per file, and recovery after a crash. It
// knows nothing of HTTP: the API and (next) the cluster's workers use it.
package filestore

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/lib/records"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// Store keeps uploaded files under <DataDir>/files: <id>.bin is the
// content and <id>.json its metadata (owner included). The metadata of
// every file is also held in memory; the store's total size and number of
// files are bounded by quotas, and so are each owner's (with API keys;
// without, every request is the one owner "" and the store's quotas are
// its own), and every file expires after its TTL.
type Store struct {
	dir      string
	maxBytes int64
	quotas   Quotas
	ttl      time.Duration
	log      *slog.Logger

	mu     sync.Mutex
	files  map[string]*File
	used   int64                  // bytes of the files in the map
	owners map[string]*ownerFiles // what each owner has in the map
}

// Quotas bound the store, and each owner when PerOwner.
type Quotas struct {
	Bytes, OwnerBytes int64
	Files, OwnerFiles int
	PerOwner          bool
}

// QuotasOf are the quotas of a store of bytes and files in all (each file
// at most maxFile bytes), of which one owner (when perOwner) may hold
// ownerBytes and ownerFiles, but never so much that no other could store a
// file of maxFile bytes: one key filling what it may store always leaves
// room for the others, whatever the store's own quota is set to.
func QuotasOf(bytes, maxFile int64, files int, perOwner bool, ownerBytes int64, ownerFiles int) Quotas {
	q := Quotas{Bytes: bytes, Files: files, PerOwner: perOwner, OwnerBytes: ownerBytes, OwnerFiles: ownerFiles}
	if perOwner {
		q.OwnerBytes = min(q.OwnerBytes, max(bytes-maxFile, 1))
		q.OwnerFiles = min(q.OwnerFiles, max(files-1, 1))
	}
	return q
}

// ownerFiles is what one owner stores.
type ownerFiles struct {
	bytes int64
	files int
}

// File is a file's metadata as kept on disk.
type File struct {
	ID          string    `json:"id"`
	Owner       string    `json:"owner"`
	Name        string    `json:"name,omitempty"`
	ContentType string    `json:"content_type,omitempty"`
	Size        int64     `json:"size"`
	SHA256      string    `json:"sha256"`
	Created     time.Time `json:"created"`
	Expires     time.Time `json:"expires"`
}

// RecordID is the file's id (records.Record).
func (f *File) RecordID() string { return f.ID }

// Info is the file as the API shows it.
func (f *File) Info() wire.FileInfo {
	return wire.FileInfo{FileID: f.ID, Name: f.Name, ContentType: f.ContentType, Size: f.Size, SHA256: f.SHA256,
		CreatedAt: f.Created.UTC(), ExpiresAt: f.Expires.UTC()}
}

// IDPattern is what a file id looks like.
var IDPattern = regexp.MustCompile(`^file_[0-9a-f]{24}$`)

// QuotaError is an upload the store, or its owner's quota, has no room
// for.
type QuotaError struct{ msg string }

func (e *QuotaError) Error() string { return e.msg }

// NewQuotaError is a QuotaError saying msg, for stores of other packages
// that share these quotas (pkg/cluster's FileStore).
func NewQuotaError(msg string) *QuotaError { return &QuotaError{msg} }

// ErrTooLarge is an upload above the per-file cap.
var ErrTooLarge = errors.New("file too large")

// New opens the store in dir (made at the first upload) and loads what a
// previous run left: files up to maxBytes each, living ttl at most.
func New(dir string, maxBytes int64, quotas Quotas, ttl time.Duration, log *slog.Logger) *Store {
	st := &Store{dir: dir, maxBytes: maxBytes, quotas: quotas, ttl: ttl, log: log, files: map[string]*File{},
		owners: map[string]*ownerFiles{}}
	st.load()
	return st
}

// count adds (n = 1) or removes (n = -1) f to the usage. s.mu is held.
func (s *Store) count(f *File, n int) {
	o := s.owners[f.Owner]
	if o == nil {
		o = &ownerFiles{}
		s.owners[f.Owner] = o
	}
	o.bytes += int64(n) * f.Size
	o.files += n
	s.used += int64(n) * f.Size
	if o.files == 0 {
		delete(s.owners, f.Owner)
	}
}

// fitsLocked refuses one more file of n bytes of owner's past a quota:
// the owner's first (with API keys), then the store's. s.mu is held.
func (s *Store) fitsLocked(n int64, owner string) error {
	q := s.quotas
	o := s.owners[owner]
	if o == nil {
		o = &ownerFiles{}
	}
	const hint = "delete files or wait for them to expire"
	switch {
	case q.PerOwner && o.files+1 > q.OwnerFiles:
		return &QuotaError{fmt.Sprintf("key %s has %d stored files, at its limit of %d (file_quota_files_per_key); %s", owner, o.files, q.OwnerFiles, hint)}
	case q.PerOwner && o.bytes+n > q.OwnerBytes:
		return &QuotaError{fmt.Sprintf("key %s's files use %d bytes of its %d-byte quota (file_quota_bytes_per_key), no room for %d more; %s", owner, o.bytes, q.OwnerBytes, n, hint)}
	case len(s.files)+1 > q.Files:
		return &QuotaError{fmt.Sprintf("the file store is full: %d files stored, at its limit of %d (file_quota_files); %s", len(s.files), q.Files, hint)}
	case s.used+n > q.Bytes:
		return &QuotaError{fmt.Sprintf("the file store is full: %d bytes stored of a %d-byte quota (file_quota_bytes), no room for %d more; %s", s.used, q.Bytes, n, hint)}
	}
	return nil
}

// Room says whether a file of n bytes of owner's fits in the quotas now,
// once the files that expired (and that the janitor may not have removed
// yet) are gone.
func (s *Store) Room(n int64, owner string) error {
	fits := func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.fitsLocked(n, owner)
	}
	if fits() == nil {
		return nil
	}
	s.Expire(time.Now())
	return fits()
}

// load reads the metadata of the files a previous run left, removing
// expired files, unfinished uploads and halves of files.
func (s *Store) load() {
	entries := records.ReadDir(s.dir, s.log, "file store: cannot read its directory")
	now := time.Now()
	have := map[string]bool{}
	for _, e := range entries {
		id, ok := records.FileID(e.Name(), IDPattern)
		if !ok {
			continue
		}
		var f File
		err := records.Read(s.metaPath(id), id, &f)
		if err == nil {
			var st os.FileInfo
			if st, err = os.Lstat(s.contentPath(id)); err == nil && (!st.Mode().IsRegular() || st.Size() != f.Size) {
				err = errors.New("content does not match the metadata")
			}
		}
		if err != nil || !now.Before(f.Expires) {
			if err != nil {
				s.log.Warn("file store: dropping a damaged file", "file_id", id, "error", err)
			}
			s.removeFiles(id)
			continue
		}
		s.files[id] = &f
		s.count(&f, 1)
		have[id] = true
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".upload-") || strings.HasPrefix(name, ".meta-") {
			os.Remove(filepath.Join(s.dir, name))
		} else if id, ok := strings.CutSuffix(name, ".bin"); ok && IDPattern.MatchString(id) && !have[id] {
			os.Remove(filepath.Join(s.dir, name))
		}
	}
}

func (s *Store) contentPath(id string) string { return filepath.Join(s.dir, id+".bin") }
func (s *Store) metaPath(id string) string    { return filepath.Join(s.dir, id+".json") }

// removeFiles deletes a file's metadata first (a file without it is
// garbage at the next start), then its content.
func (s *Store) removeFiles(id string) {
	if err := os.Remove(s.metaPath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Error("file store: cannot remove metadata", "file_id", id, "error", err)
	}
	if err := os.Remove(s.contentPath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Error("file store: cannot remove content", "file_id", id, "error", err)
	}
}

// Put stores what r yields, up to maxBytes (ErrTooLarge above), for
// owner. ttl, when positive, shortens the store's TTL.
func (s *Store) Put(r io.Reader, owner, name, contentType string, ttl time.Duration) (*File, error) {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(s.dir, ".upload-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if tmp != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), io.LimitReader(r, s.maxBytes+1))
	if err != nil {
		return nil, err
	}
	if n > s.maxBytes {
		return nil, ErrTooLarge
	}
	if err := tmp.Sync(); err != nil {
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	if ttl <= 0 || ttl > s.ttl {
		ttl = s.ttl
	}
	s.Room(n, owner) // removes expired files if it must; checked again below
	now := time.Now()
	f := &File{ID: records.NewID("file_"), Owner: owner, Name: name, ContentType: contentType, Size: n,
		SHA256: hex.EncodeToString(h.Sum(nil)), Created: now, Expires: now.Add(ttl)}

	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.fitsLocked(n, owner); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp.Name(), s.contentPath(f.ID)); err != nil {
		return nil, err
	}
	tmp = nil
	if err := records.WriteJSON(s.dir, ".meta-", s.metaPath(f.ID), f); err != nil {
		os.Remove(s.contentPath(f.ID))
		return nil, err
	}
	s.files[f.ID] = f
	s.count(f, 1)
	return f, nil
}

// Get returns owner's live file id, or nil.
func (s *Store) Get(id, owner string) *File {
	if !IDPattern.MatchString(id) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.files[id]
	if f == nil || f.Owner != owner || !time.Now().Before(f.Expires) {
		return nil
	}
	return f
}

// List returns owner's live files, oldest first.
func (s *Store) List(owner string) []wire.FileInfo {
	now := time.Now()
	s.mu.Lock()
	out := []wire.FileInfo{}
	for _, f := range s.files {
		if f.Owner == owner && now.Before(f.Expires) {
			out = append(out, f.Info())
		}
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].FileID < out[j].FileID
	})
	return out
}

// Open opens owner's file id for reading: a file removed later stays
// readable through the descriptor. The caller closes it.
func (s *Store) Open(id, owner string) (*File, io.ReadCloser, error) {
	f := s.Get(id, owner)
	if f == nil {
		return nil, nil, fs.ErrNotExist
	}
	fh, err := os.Open(s.contentPath(id))
	if err != nil {
		return nil, nil, fs.ErrNotExist
	}
	return f, fh, nil
}

// Read returns the content of owner's file id.
func (s *Store) Read(id, owner string) (*File, []byte, error) {
	f, fh, err := s.Open(id, owner)
	if err != nil {
		return nil, nil, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, f.Size+1))
	if err != nil {
		return nil, nil, err
	}
	if int64(len(data)) != f.Size {
		return nil, nil, fmt.Errorf("file %s: %d bytes on disk, %d in its metadata", id, len(data), f.Size)
	}
	return f, data, nil
}

// Remove deletes owner's file id; false when there is none.
func (s *Store) Remove(id, owner string) bool {
	if !IDPattern.MatchString(id) {
		return false
	}
	s.mu.Lock()
	f := s.files[id]
	if f == nil || f.Owner != owner || !time.Now().Before(f.Expires) {
		s.mu.Unlock()
		return false
	}
	delete(s.files, id)
	s.count(f, -1)
	s.mu.Unlock()
	s.removeFiles(id)
	return true
}

// Expire removes the files whose time is up; it returns how many.
func (s *Store) Expire(now time.Time) int {
	s.mu.Lock()
	var gone []string
	for id, f := range s.files {
		if !now.Before(f.Expires) {
			gone = append(gone, id)
			delete(s.files, id)
			s.count(f, -1)
		}
	}
	s.mu.Unlock()
	for _, id := range gone {
		s.removeFiles(id)
	}
	return len(gone)
}
