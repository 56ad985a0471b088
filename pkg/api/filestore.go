package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
)

// fileStore keeps uploaded files under <DataDir>/files: <id>.bin is the
// content and <id>.json its metadata (owner included). The metadata of
// every file is also held in memory; the store's total size and number of
// files are bounded by quotas, and so are each owner's (with API keys;
// without, every request is the one owner "" and the store's quotas are
// its own), and every file expires after its TTL.
type fileStore struct {
	dir      string
	maxBytes int64
	quotas   fileQuotas
	ttl      time.Duration
	log      *slog.Logger

	mu     sync.Mutex
	files  map[string]*storedFile
	used   int64                  // bytes of the files in the map
	owners map[string]*ownerFiles // what each owner has in the map
}

// fileQuotas bounds the store, and each owner when perOwner.
type fileQuotas struct {
	bytes, ownerBytes int64
	files, ownerFiles int
	perOwner          bool
}

// ownerFiles is what one owner stores.
type ownerFiles struct {
	bytes int64
	files int
}

// storedFile is a file's metadata as kept on disk.
type storedFile struct {
	ID          string    `json:"id"`
	Owner       string    `json:"owner"`
	Name        string    `json:"name,omitempty"`
	ContentType string    `json:"content_type,omitempty"`
	Size        int64     `json:"size"`
	SHA256      string    `json:"sha256"`
	Created     time.Time `json:"created"`
	Expires     time.Time `json:"expires"`
}

func (f *storedFile) recordID() string { return f.ID }

func (f *storedFile) info() FileInfo {
	return FileInfo{FileID: f.ID, Name: f.Name, ContentType: f.ContentType, Size: f.Size, SHA256: f.SHA256,
		CreatedAt: f.Created.UTC(), ExpiresAt: f.Expires.UTC()}
}

var fileIDPattern = regexp.MustCompile(`^file_[0-9a-f]{24}$`)

// errFileQuota is an upload the store, or its owner's quota, has no room
// for (507).
type errFileQuota struct{ msg string }

func (e *errFileQuota) Error() string { return e.msg }

// errFileTooLarge is an upload above the per-file cap.
var errFileTooLarge = errors.New("file too large")

func newFileStore(dir string, maxBytes int64, quotas fileQuotas, ttl time.Duration, log *slog.Logger) *fileStore {
	st := &fileStore{dir: dir, maxBytes: maxBytes, quotas: quotas, ttl: ttl, log: log, files: map[string]*storedFile{},
		owners: map[string]*ownerFiles{}}
	st.load()
	return st
}

// count adds (n = 1) or removes (n = -1) f to the usage. s.mu is held.
func (s *fileStore) count(f *storedFile, n int) {
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
func (s *fileStore) fitsLocked(n int64, owner string) error {
	q := s.quotas
	o := s.owners[owner]
	if o == nil {
		o = &ownerFiles{}
	}
	const hint = "delete files or wait for them to expire"
	switch {
	case q.perOwner && o.files+1 > q.ownerFiles:
		return &errFileQuota{fmt.Sprintf("key %s has %d stored files, at its limit of %d (file_quota_files_per_key); %s", owner, o.files, q.ownerFiles, hint)}
	case q.perOwner && o.bytes+n > q.ownerBytes:
		return &errFileQuota{fmt.Sprintf("key %s's files use %d bytes of its %d-byte quota (file_quota_bytes_per_key), no room for %d more; %s", owner, o.bytes, q.ownerBytes, n, hint)}
	case len(s.files)+1 > q.files:
		return &errFileQuota{fmt.Sprintf("the file store is full: %d files stored, at its limit of %d (file_quota_files); %s", len(s.files), q.files, hint)}
	case s.used+n > q.bytes:
		return &errFileQuota{fmt.Sprintf("the file store is full: %d bytes stored of a %d-byte quota (file_quota_bytes), no room for %d more; %s", s.used, q.bytes, n, hint)}
	}
	return nil
}

// room says whether a file of n bytes of owner's fits in the quotas now,
// once the files that expired (and that the janitor may not have removed
// yet) are gone.
func (s *fileStore) room(n int64, owner string) error {
	fits := func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.fitsLocked(n, owner)
	}
	if fits() == nil {
		return nil
	}
	s.expire(time.Now())
	return fits()
}

// load reads the metadata of the files a previous run left, removing
// expired files, unfinished uploads and halves of files.
func (s *fileStore) load() {
	entries := readStoreDir(s.dir, s.log, "file store: cannot read its directory")
	now := time.Now()
	have := map[string]bool{}
	for _, e := range entries {
		id, ok := recordFileID(e.Name(), fileIDPattern)
		if !ok {
			continue
		}
		var f storedFile
		err := readRecord(s.metaPath(id), id, &f)
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
		} else if id, ok := strings.CutSuffix(name, ".bin"); ok && fileIDPattern.MatchString(id) && !have[id] {
			os.Remove(filepath.Join(s.dir, name))
		}
	}
}

func (s *fileStore) contentPath(id string) string { return filepath.Join(s.dir, id+".bin") }
func (s *fileStore) metaPath(id string) string    { return filepath.Join(s.dir, id+".json") }

// removeFiles deletes a file's metadata first (a file without it is
// garbage at the next start), then its content.
func (s *fileStore) removeFiles(id string) {
	if err := os.Remove(s.metaPath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Error("file store: cannot remove metadata", "file_id", id, "error", err)
	}
	if err := os.Remove(s.contentPath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Error("file store: cannot remove content", "file_id", id, "error", err)
	}
}

// put stores what r yields, up to maxBytes (errFileTooLarge above), for
// owner. ttl, when positive, shortens the store's TTL.
func (s *fileStore) put(r io.Reader, owner, name, contentType string, ttl time.Duration) (*storedFile, error) {
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
		return nil, errFileTooLarge
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
	s.room(n, owner) // removes expired files if it must; checked again below
	now := time.Now()
	f := &storedFile{ID: newID("file_"), Owner: owner, Name: name, ContentType: contentType, Size: n,
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
	if err := writeJSONFile(s.dir, ".meta-", s.metaPath(f.ID), f); err != nil {
		os.Remove(s.contentPath(f.ID))
		return nil, err
	}
	s.files[f.ID] = f
	s.count(f, 1)
	return f, nil
}

// get returns owner's live file id, or nil.
func (s *fileStore) get(id, owner string) *storedFile {
	if !fileIDPattern.MatchString(id) {
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

// list returns owner's live files, oldest first.
func (s *fileStore) list(owner string) []FileInfo {
	now := time.Now()
	s.mu.Lock()
	out := []FileInfo{}
	for _, f := range s.files {
		if f.Owner == owner && now.Before(f.Expires) {
			out = append(out, f.info())
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

// open opens owner's file id for reading: a file removed later stays
// readable through the descriptor.
func (s *fileStore) open(id, owner string) (*storedFile, *os.File, error) {
	f := s.get(id, owner)
	if f == nil {
		return nil, nil, fs.ErrNotExist
	}
	fh, err := os.Open(s.contentPath(id))
	if err != nil {
		return nil, nil, fs.ErrNotExist
	}
	return f, fh, nil
}

// read returns the content of owner's file id.
func (s *fileStore) read(id, owner string) (*storedFile, []byte, error) {
	f, fh, err := s.open(id, owner)
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

// remove deletes owner's file id; false when there is none.
func (s *fileStore) remove(id, owner string) bool {
	if !fileIDPattern.MatchString(id) {
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

// expire removes the files whose time is up; it returns how many.
func (s *fileStore) expire(now time.Time) int {
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

// newID is prefix and 24 random hex digits: an id nobody can guess.
func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// readStoreDir lists a store's directory. One that does not exist yet
// holds nothing; one that cannot be read is logged as msg and treated as
// empty, so that the server still starts.
func readStoreDir(dir string, log *slog.Logger, msg string) []os.DirEntry {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			log.Error(msg, "dir", dir, "error", err)
		}
		return nil
	}
	return entries
}

// recordFileID is the id of a store's record file, named <id>.json with
// an id that pattern accepts.
func recordFileID(name string, pattern *regexp.Regexp) (string, bool) {
	id, ok := strings.CutSuffix(name, ".json")
	return id, ok && pattern.MatchString(id)
}

// idRecord is a record that a store keeps in a file named after its id.
type idRecord interface{ recordID() string }

// readRecord decodes the record file path into rec and checks that it
// holds id's record.
func readRecord(path, id string, rec idRecord) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, rec); err != nil {
		return err
	}
	if rec.recordID() != id {
		return errors.New("id mismatch")
	}
	return nil
}

// writeJSONFile writes v to path atomically (a temporary file in dir,
// synced, renamed over path).
func writeJSONFile(dir, prefix, path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, prefix)
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// janitorInterval is how often a janitor looks for what expired: a
// quarter of the shortest lifetime, between 50 ms and a minute.
func janitorInterval(lifetimes ...time.Duration) time.Duration {
	d := time.Minute
	for _, l := range lifetimes {
		if l > 0 {
			d = min(d, l/4)
		}
	}
	return max(d, 50*time.Millisecond)
}

// janitor runs sweep every janitorInterval(lifetime) while the server runs.
func (s *Server) janitor(lifetime time.Duration, sweep func(now time.Time)) {
	s.background = append(s.background, func(ctx context.Context) {
		t := time.NewTicker(janitorInterval(lifetime))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				sweep(now)
			}
		}
	})
}
