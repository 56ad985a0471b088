package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sandbox-run/sandbox-run/internal/lib/records"
	"github.com/sandbox-run/sandbox-run/pkg/filestore"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// FilesBucket is the object store of uploaded files.
const FilesBucket = "SR_FILES"

const (
	// fileOpTimeout bounds each JetStream request of the file store
	// (Get, List, Remove, a quota check, a commit).
	fileOpTimeout = 10 * time.Second
	// fileUploadTimeout bounds the upload of a file's content.
	fileUploadTimeout = 15 * time.Minute
	// fileReadTimeout bounds the reading of a file Open returned.
	fileReadTimeout = 10 * time.Minute
	// filePendingMax is how old an object still waiting for its commit
	// must be for Expire to take it for the remains of a node that
	// crashed between the upload and the commit (which are seconds apart).
	filePendingMax = 10 * time.Minute
	// fileUsageFresh is how long Room trusts the last listing.
	fileUsageFresh = 2 * time.Second

	// Keys of an object's metadata: a committed file carries its
	// filestore.File as JSON under metaFile; an upload waiting for its
	// quota check carries its owner under metaPending instead.
	metaFile    = "sr-file"
	metaPending = "sr-pending"
)

// FileStore keeps uploaded files in the object store SR_FILES, so that
// every API node of the cluster sees the same files. It has the methods,
// and the behaviour, of filestore.Store.
//
// Each file is one object named by its id; its metadata (the
// filestore.File, owner included) travels in the object's own meta
// message. A Put uploads the content as an object marked pending, which
// no reader sees; checks the quotas against a fresh listing of the
// bucket; and commits the file by replacing the object's meta message
// (one message, a rollup: the file appears whole or not at all). A node
// that crashes mid-upload leaves chunks without a meta message, one that
// crashes before the commit a pending object: neither is ever visible;
// Expire removes old pending objects, and the bucket's max age (the TTL
// plus a margin) removes stray chunks. The quotas hold for the whole
// cluster, but two nodes committing at the same instant may pass them
// together by one file.
type FileStore struct {
	obs      jetstream.ObjectStore
	maxBytes int64
	quotas   filestore.Quotas
	ttl      time.Duration
	log      *slog.Logger

	commit sync.Mutex // one quota check and commit at a time on this node

	mu   sync.Mutex
	snap *fileSnapshot // the last listing, for Room
}

// fileSnapshot is a listing of the committed files; never changed once
// made.
type fileSnapshot struct {
	at    time.Time
	files []*filestore.File
}

// FileStore makes (or updates) the object store SR_FILES, retrying while
// the cluster elects a leader, and returns a store of files up to
// maxBytes each, living ttl at most. The bucket's max age follows ttl
// (like AckWait, the last node to make it sets it, so every node should
// use the same ttl).
func (c *Conn) FileStore(ctx context.Context, maxBytes int64, quotas filestore.Quotas, ttl time.Duration, log *slog.Logger) (*FileStore, error) {
	replicas := 0
	if c.stream != nil {
		if info := c.stream.CachedInfo(); info != nil {
			replicas = info.Config.Replicas
		}
	}
	if replicas <= 0 {
		replicas = min(3, max(1, len(c.nc.Servers())))
	}
	// Everything a live file is made of was published at most an upload
	// before its creation; the margin covers the commit and clock skew.
	maxAge := ttl + fileUploadTimeout + filePendingMax
	if ttl <= 0 || maxAge < ttl {
		maxAge = 0 // no limit
	}
	s := &FileStore{maxBytes: maxBytes, quotas: quotas, ttl: ttl, log: log}
	err := retry(ctx, func(ctx context.Context) (err error) {
		s.obs, err = c.objectBucket(ctx, jetstream.ObjectStoreConfig{
			Bucket:      FilesBucket,
			Description: "sandbox-run: uploaded files",
			TTL:         maxAge,
			Storage:     jetstream.FileStorage,
			Replicas:    replicas,
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: object store %s: %w", FilesBucket, err)
	}
	return s, nil
}

func opContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), fileOpTimeout)
}

// errPending is an object whose upload is not committed (yet).
var errPending = errors.New("upload not committed")

// decode returns the file an object holds: errPending for an upload not
// committed, another error for an object that is not a file of this
// store (damaged metadata).
func decode(info *jetstream.ObjectInfo) (*filestore.File, error) {
	raw, ok := info.Metadata[metaFile]
	if !ok {
		if _, ok := info.Metadata[metaPending]; ok {
			return nil, errPending
		}
		return nil, errors.New("no file metadata")
	}
	var f filestore.File
	if err := json.Unmarshal([]byte(raw), &f); err != nil {
		return nil, fmt.Errorf("file metadata: %w", err)
	}
	if f.ID != info.Name || !filestore.IDPattern.MatchString(f.ID) {
		return nil, fmt.Errorf("file metadata names %q", f.ID)
	}
	if f.Size != int64(info.Size) {
		return nil, fmt.Errorf("content of %d bytes, %d in the metadata", info.Size, f.Size)
	}
	if sum, err := jetstream.DecodeObjectDigest(info.Digest); err != nil || hex.EncodeToString(sum) != f.SHA256 {
		return nil, errors.New("content digest does not match the metadata")
	}
	return &f, nil
}

// visible returns the file info holds when it is owner's and alive at
// now, or nil.
func (s *FileStore) visible(info *jetstream.ObjectInfo, owner string, now time.Time) *filestore.File {
	f, err := decode(info)
	if err != nil {
		if err != errPending {
			s.log.Warn("file store: ignoring a damaged object", "bucket", FilesBucket, "object", info.Name, "error", err)
		}
		return nil
	}
	if f.Owner != owner || !now.Before(f.Expires) {
		return nil
	}
	return f
}

// list returns the bucket's objects (none is no error).
func (s *FileStore) list(ctx context.Context) ([]*jetstream.ObjectInfo, error) {
	infos, err := s.obs.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, nil
	}
	return infos, err
}

// listFiles returns the committed files (expired ones included).
func (s *FileStore) listFiles() ([]*filestore.File, error) {
	ctx, cancel := opContext()
	defer cancel()
	infos, err := s.list(ctx)
	if err != nil {
		return nil, err
	}
	files := make([]*filestore.File, 0, len(infos))
	for _, info := range infos {
		if f, err := decode(info); err == nil {
			files = append(files, f)
		}
	}
	return files, nil
}

// fits refuses one more file of n bytes of owner's past a quota, the
// owner's first (with API keys), then the store's, counting the files of
// files alive at now. The messages are filestore.Store's.
func (s *FileStore) fits(files []*filestore.File, n int64, owner string, now time.Time) error {
	var used, ownerBytes int64
	var count, ownerFiles int
	for _, f := range files {
		if !now.Before(f.Expires) {
			continue // invisible, and gone at the next Expire
		}
		used += f.Size
		count++
		if f.Owner == owner {
			ownerBytes += f.Size
			ownerFiles++
		}
	}
	q := s.quotas
	const hint = "delete files or wait for them to expire"
	switch {
	case q.PerOwner && ownerFiles+1 > q.OwnerFiles:
		return filestore.NewQuotaError(fmt.Sprintf("key %s has %d stored files, at its limit of %d (file_quota_files_per_key); %s", owner, ownerFiles, q.OwnerFiles, hint))
	case q.PerOwner && ownerBytes+n > q.OwnerBytes:
		return filestore.NewQuotaError(fmt.Sprintf("key %s's files use %d bytes of its %d-byte quota (file_quota_bytes_per_key), no room for %d more; %s", owner, ownerBytes, q.OwnerBytes, n, hint))
	case count+1 > q.Files:
		return filestore.NewQuotaError(fmt.Sprintf("the file store is full: %d files stored, at its limit of %d (file_quota_files); %s", count, q.Files, hint))
	case used+n > q.Bytes:
		return filestore.NewQuotaError(fmt.Sprintf("the file store is full: %d bytes stored of a %d-byte quota (file_quota_bytes), no room for %d more; %s", used, q.Bytes, n, hint))
	}
	return nil
}

// snapshot returns a listing of the committed files at most maxAge old
// (a new one when maxAge is 0), and whether it is new.
func (s *FileStore) snapshot(maxAge time.Duration) (*fileSnapshot, bool, error) {
	s.mu.Lock()
	snap := s.snap
	s.mu.Unlock()
	if snap != nil && maxAge > 0 && time.Since(snap.at) < maxAge {
		return snap, false, nil
	}
	at := time.Now()
	files, err := s.listFiles()
	if err != nil {
		return nil, false, err
	}
	snap = &fileSnapshot{at: at, files: files}
	s.setSnapshot(snap)
	return snap, true, nil
}

func (s *FileStore) setSnapshot(snap *fileSnapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.snap == nil || !snap.at.Before(s.snap.at) {
		s.snap = snap
	}
}

// Room says whether a file of n bytes of owner's fits in the quotas now
// (expired files do not count). It trusts a listing of the last
// moments, and checks a refusal against a new one; when the bucket
// cannot be listed it says yes (Put checks again).
func (s *FileStore) Room(n int64, owner string) error {
	snap, listed, err := s.snapshot(fileUsageFresh)
	if err == nil {
		if err = s.fits(snap.files, n, owner, time.Now()); err == nil || listed {
			return err
		}
		if snap, _, err = s.snapshot(0); err == nil {
			return s.fits(snap.files, n, owner, time.Now())
		}
	}
	s.log.Warn("file store: cannot list the bucket to check the quotas", "bucket", FilesBucket, "error", err)
	return nil
}

// cappedReader reads at most max+1 bytes of r, hashing them, and fails
// with filestore.ErrTooLarge past max.
type cappedReader struct {
	r      io.Reader
	n, max int64
	h      hash.Hash
	err    error // the error it returned, io.EOF aside
}

func (c *cappedReader) Read(p []byte) (int, error) {
	if c.n > c.max {
		return 0, c.err
	}
	if rest := c.max + 1 - c.n; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	c.h.Write(p[:n])
	if c.n > c.max {
		err = filestore.ErrTooLarge
	}
	if err != nil && err != io.EOF {
		c.err = err
	}
	return n, err
}

// Put stores what r yields, up to maxBytes (filestore.ErrTooLarge
// above), for owner. ttl, when positive, shortens the store's TTL. An
// error of r's is returned as is.
func (s *FileStore) Put(r io.Reader, owner, name, contentType string, ttl time.Duration) (*filestore.File, error) {
	id := records.NewID("file_")
	cr := &cappedReader{r: r, max: s.maxBytes, h: sha256.New()}
	ctx, cancel := context.WithTimeout(context.Background(), fileUploadTimeout)
	info, err := s.obs.Put(ctx, jetstream.ObjectMeta{Name: id, Metadata: map[string]string{metaPending: owner}}, cr)
	cancel()
	if err != nil {
		if cr.err != nil {
			// The object store removed the chunks, and sent no meta
			// message: the upload failed or was too large.
			return nil, cr.err
		}
		// The meta message may have been stored although waiting for
		// its acknowledgement failed.
		s.discard(id)
		return nil, fmt.Errorf("cluster: file store: storing the upload: %w", err)
	}
	sum := hex.EncodeToString(cr.h.Sum(nil))
	if digest, derr := jetstream.DecodeObjectDigest(info.Digest); derr != nil || int64(info.Size) != cr.n || hex.EncodeToString(digest) != sum {
		s.discard(id)
		return nil, fmt.Errorf("cluster: file store: the stored object (%d bytes, %s) differs from the upload (%d bytes)", info.Size, info.Digest, cr.n)
	}
	if ttl <= 0 || ttl > s.ttl {
		ttl = s.ttl
	}

	s.commit.Lock()
	defer s.commit.Unlock()
	snap, _, err := s.snapshot(0)
	if err != nil {
		s.discard(id)
		return nil, fmt.Errorf("cluster: file store: listing the files: %w", err)
	}
	now := time.Now()
	if err := s.fits(snap.files, cr.n, owner, now); err != nil {
		s.discard(id)
		return nil, err
	}
	f := &filestore.File{ID: id, Owner: owner, Name: name, ContentType: contentType, Size: cr.n, SHA256: sum,
		Created: now, Expires: now.Add(ttl)}
	meta, err := json.Marshal(f)
	if err != nil {
		s.discard(id)
		return nil, err
	}
	ctx, cancel = opContext()
	err = s.obs.UpdateMeta(ctx, id, jetstream.ObjectMeta{Name: id, Metadata: map[string]string{metaFile: string(meta)}})
	cancel()
	if err != nil {
		s.discard(id)
		return nil, fmt.Errorf("cluster: file store: committing the file: %w", err)
	}
	s.setSnapshot(&fileSnapshot{at: snap.at, files: append(snap.files[:len(snap.files):len(snap.files)], f)})
	return f, nil
}

// discard deletes the object id, an upload that is not to be a file.
func (s *FileStore) discard(id string) {
	ctx, cancel := opContext()
	defer cancel()
	if err := s.obs.Delete(ctx, id); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		s.log.Warn("file store: cannot delete a refused upload (Expire will)", "bucket", FilesBucket, "object", id, "error", err)
	}
}

// Get returns owner's live file id, or nil (also when JetStream fails:
// logged).
func (s *FileStore) Get(id, owner string) *filestore.File {
	if !filestore.IDPattern.MatchString(id) {
		return nil
	}
	ctx, cancel := opContext()
	defer cancel()
	info, err := s.obs.GetInfo(ctx, id)
	if err != nil {
		if !errors.Is(err, jetstream.ErrObjectNotFound) {
			s.log.Warn("file store: cannot get a file", "file_id", id, "error", err)
		}
		return nil
	}
	return s.visible(info, owner, time.Now())
}

// List returns owner's live files, oldest first (none when JetStream
// fails: logged).
func (s *FileStore) List(owner string) []wire.FileInfo {
	ctx, cancel := opContext()
	defer cancel()
	out := []wire.FileInfo{}
	infos, err := s.list(ctx)
	if err != nil {
		s.log.Warn("file store: cannot list the files", "bucket", FilesBucket, "error", err)
		return out
	}
	now := time.Now()
	for _, info := range infos {
		if f := s.visible(info, owner, now); f != nil {
			out = append(out, f.Info())
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].FileID < out[j].FileID
	})
	return out
}

// objectReader is an object being read; closing it ends its context.
type objectReader struct {
	jetstream.ObjectResult
	cancel context.CancelFunc
}

func (o *objectReader) Close() error {
	err := o.ObjectResult.Close()
	o.cancel()
	return err
}

// Open opens owner's file id for reading (fs.ErrNotExist when it is not
// there); the reader, which the caller closes, checks the content's
// digest at its end and lasts fileReadTimeout at most.
func (s *FileStore) Open(id, owner string) (*filestore.File, io.ReadCloser, error) {
	if !filestore.IDPattern.MatchString(id) {
		return nil, nil, fs.ErrNotExist
	}
	ctx, cancel := context.WithTimeout(context.Background(), fileReadTimeout)
	res, err := s.obs.Get(ctx, id)
	if err != nil {
		cancel()
		if !errors.Is(err, jetstream.ErrObjectNotFound) {
			s.log.Warn("file store: cannot open a file", "file_id", id, "error", err)
		}
		return nil, nil, fs.ErrNotExist
	}
	var f *filestore.File
	if info, err := res.Info(); err == nil {
		f = s.visible(info, owner, time.Now())
	}
	if f == nil {
		res.Close()
		cancel()
		return nil, nil, fs.ErrNotExist
	}
	return f, &objectReader{ObjectResult: res, cancel: cancel}, nil
}

// Read returns the content of owner's file id, read again when it came
// back corrupt (see getBytes).
func (s *FileStore) Read(id, owner string) (*filestore.File, []byte, error) {
	for try := 1; ; try++ {
		f, data, err := s.read(id, owner)
		if !errors.Is(err, jetstream.ErrDigestMismatch) || try == 3 {
			return f, data, err
		}
		time.Sleep(time.Duration(try) * 100 * time.Millisecond)
	}
}

func (s *FileStore) read(id, owner string) (*filestore.File, []byte, error) {
	f, rc, err := s.Open(id, owner)
	if err != nil {
		return nil, nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, f.Size+1))
	if err != nil {
		return nil, nil, fmt.Errorf("file %s: %w", id, err)
	}
	if int64(len(data)) != f.Size {
		return nil, nil, fmt.Errorf("file %s: %d bytes stored, %d in its metadata", id, len(data), f.Size)
	}
	return f, data, nil
}

// Remove deletes owner's file id; false when there is none (or JetStream
// fails: logged).
func (s *FileStore) Remove(id, owner string) bool {
	if !filestore.IDPattern.MatchString(id) {
		return false
	}
	ctx, cancel := opContext()
	defer cancel()
	info, err := s.obs.GetInfo(ctx, id)
	if err != nil {
		if !errors.Is(err, jetstream.ErrObjectNotFound) {
			s.log.Warn("file store: cannot get a file to remove", "file_id", id, "error", err)
		}
		return false
	}
	if s.visible(info, owner, time.Now()) == nil {
		return false
	}
	if err := s.obs.Delete(ctx, id); err != nil {
		s.log.Error("file store: cannot remove a file", "file_id", id, "error", err)
		return false
	}
	return true
}

// Expire removes the files whose time is up, and what crashed uploads
// left; it returns how many files it removed.
func (s *FileStore) Expire(now time.Time) int {
	ctx, cancel := opContext()
	infos, err := s.list(ctx)
	cancel()
	if err != nil {
		s.log.Warn("file store: cannot list the files to expire", "bucket", FilesBucket, "error", err)
		return 0
	}
	n := 0
	for _, info := range infos {
		f, err := decode(info)
		switch {
		case err == nil && now.Before(f.Expires):
			continue
		case err != nil && now.Sub(info.ModTime) < filePendingMax:
			continue // an upload being committed, or (damaged) left for now
		case err != nil:
			s.log.Warn("file store: removing an uncommitted or damaged object", "bucket", FilesBucket, "object", info.Name,
				"age", now.Sub(info.ModTime).Round(time.Second), "error", err)
		}
		ctx, cancel := opContext()
		err = s.obs.Delete(ctx, info.Name)
		cancel()
		if err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			s.log.Error("file store: cannot remove an expired file", "object", info.Name, "error", err)
			continue
		}
		if f != nil && err == nil {
			n++
		}
	}
	return n
}
