package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/sandbox-run/sandbox-run/internal/lib/records"
)

// Store keeps pulled images under a directory:
//
//	blobs/sha256/HEX   every layer as fetched (compressed), and each
//	                   image's config, verified against its digest
//	images/HEX.json    an image: its manifest digest, config, layers
//	refs.json          which image each reference names
//	chains/HEX/        the unpacked tree of a chain of layers (root.go)
//	used/HEX           an image's last use (its mtime) and its holds
//	                   (flock), for eviction (evict.go)
//
// A blob is written to a temporary file, hashed as it is written, and
// renamed into place only when its digest is the one the manifest names:
// a crash leaves at most a temporary file. Each process that opens the
// store has its own directory under tmp/ (named by its pid), and Open
// removes those of processes no longer running: a CLI and a server may
// share a store. An image's
// record is written (atomically) only once all its blobs are in, and a
// reference only after its image: nothing half-pulled is ever used.
type Store struct {
	// Registry fetches registry references; nil: only local sources
	// (oci:, docker-archive:) can be pulled. Set it before use.
	Registry Fetcher

	dir string
	tmp string // this process's part of tmp/

	// InUse, if set, says whether an image (by digest) is in use in a way
	// Hold does not know of (an interpreter session's sandbox): such an
	// image is never evicted. Evicting, if set, is called with the chain
	// directories an eviction is about to remove, before it removes any
	// (the executor drops the idle sandboxes built on them). Set them
	// before use.
	InUse    func(digest string) bool
	Evicting func(dirs []string)

	mu     sync.Mutex
	pulls  map[string]*pull         // by reference, while it is pulled
	chains map[string]chan struct{} // chain directories being made
	holds  map[string]int           // image digest → holds (Hold) in this process
	pins   map[string]int           // blob hex → pulls under way that need it

	trimMu sync.Mutex   // one Trim at a time
	bound  atomic.Int64 // the bound of the last Trim
	over   atomic.Bool  // the last Trim left the store above it (images held)
	log    atomic.Pointer[slog.Logger]
}

// pull is one pull under way; those who ask for the same reference
// meanwhile wait for it.
type pull struct {
	done    chan struct{}
	img     *Image
	err     error
	waiters int // callers waiting for it (under Store.mu)
}

// Image is a pulled image.
type Image struct {
	// Ref is the reference it was pulled by last; Digest its manifest's
	// digest ("sha256:...").
	Ref    string `json:"ref"`
	Digest string `json:"digest"`
	// Config is the digest of its config blob; Env, the environment it
	// sets.
	Config string   `json:"config"`
	Env    []string `json:"env,omitempty"`
	// Layers, base first.
	Layers []Layer `json:"layers"`
	// Size is the bytes of its layers as stored.
	Size   int64     `json:"size"`
	Pulled time.Time `json:"pulled"`
}

// Layer is one layer of an image.
type Layer struct {
	Digest string `json:"digest"`  // of the blob as stored (compressed)
	DiffID string `json:"diff_id"` // of the tar inside
	Size   int64  `json:"size"`
	// MediaType says how the blob is compressed.
	MediaType string `json:"media_type"`
}

// Progress reports a pull: Done of Total bytes of layers fetched so far
// (Total is 0 until the manifest is read).
type Progress struct {
	Ref         string
	Done, Total int64
}

// Caps bound what a pull accepts.
type Caps struct {
	Layers      int   // layers of one image (default 128)
	ConfigBytes int64 // an image's config (default 1 MiB)
	Bytes       int64 // all of an image's layers, as fetched (default 16 GiB)
	// StoreBytes bounds the whole store (default DefaultStoreBytes): after
	// Use or Fetch add to it, the least recently used images are evicted
	// until it holds no more (Trim).
	StoreBytes int64
}

func (c Caps) withDefaults() Caps {
	if c.Layers <= 0 {
		c.Layers = 128
	}
	if c.ConfigBytes <= 0 {
		c.ConfigBytes = 1 << 20
	}
	if c.Bytes <= 0 {
		c.Bytes = 16 << 30
	}
	if c.StoreBytes <= 0 {
		c.StoreBytes = DefaultStoreBytes
	}
	return c
}

// Open opens (or creates) the store under dir, and removes what an
// interrupted pull left there.
func Open(dir string) (*Store, error) {
	for _, d := range []string{"blobs/sha256", "images", "tmp", "used"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.Chmod(filepath.Join(dir, "tmp"), 0o700); err != nil {
		return nil, err
	}
	removeStale(filepath.Join(dir, "tmp"))
	tmp, err := os.MkdirTemp(filepath.Join(dir, "tmp"), strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil, err
	}
	return &Store{dir: dir, tmp: tmp, pulls: map[string]*pull{}, holds: map[string]int{}, pins: map[string]int{}}, nil
}

// removeStale removes what processes that ended left in dir: the entries
// named "PID-..." of pids no longer running, and any other.
func removeStale(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		pidText, _, ok := strings.Cut(e.Name(), "-")
		pid, err := strconv.Atoi(pidText)
		if ok && err == nil && pid > 0 && !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			continue
		}
		os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}

// Pull fetches the image ref names into the store (only the blobs it does
// not have yet) and records it under ref. Pulls of one reference at once
// happen once: the others wait for it. progress, if not nil, hears how far
// it is.
func (s *Store) Pull(ctx context.Context, ref string, caps Caps, progress func(Progress)) (*Image, error) {
	r, err := ParseRef(ref)
	if err != nil {
		return nil, err
	}
	key := r.String()
	for {
		s.mu.Lock()
		p, waiting := s.pulls[key]
		if !waiting {
			p = &pull{done: make(chan struct{})}
			s.pulls[key] = p
		} else {
			p.waiters++
		}
		s.mu.Unlock()
		if !waiting {
			p.img, p.err = s.pull(ctx, r, caps.withDefaults(), progress)
			s.mu.Lock()
			delete(s.pulls, key)
			s.mu.Unlock()
			close(p.done)
		}
		select {
		case <-p.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		// The pull we waited for ended with its caller's context (a
		// client that went away): ours is still wanted, so pull again.
		if waiting && ctx.Err() == nil && (errors.Is(p.err, context.Canceled) || errors.Is(p.err, context.DeadlineExceeded)) {
			continue
		}
		return p.img, p.err
	}
}

func (s *Store) pull(ctx context.Context, r Ref, caps Caps, progress func(Progress)) (*Image, error) {
	stamp, local := sourceStamp(r)
	img, err := s.open(ctx, r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r, unknown(err))
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, fmt.Errorf("%s: manifest: %w", r, unknown(err))
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, fmt.Errorf("%s: manifest: %w", r, err)
	}
	if len(m.Layers) > caps.Layers {
		return nil, fmt.Errorf("%s: %d layers, over the %d allowed", r, len(m.Layers), caps.Layers)
	}
	if m.Config.Size > caps.ConfigBytes {
		return nil, fmt.Errorf("%s: a config of %d bytes, over the %d allowed", r, m.Config.Size, caps.ConfigBytes)
	}
	rec := &Image{Ref: r.String(), Digest: digest.String(), Config: m.Config.Digest.String()}
	// The blobs this pull may find in the store already are not evicted
	// until its record names them.
	blobs := []string{m.Config.Digest.Hex}
	for _, l := range m.Layers {
		blobs = append(blobs, l.Digest.Hex)
	}
	defer s.pin(blobs)()
	var total int64
	for _, l := range m.Layers {
		total += l.Size
	}
	if total > caps.Bytes {
		return nil, fmt.Errorf("%s: layers of %d bytes, over the %d allowed", r, total, caps.Bytes)
	}
	raw, err := img.RawConfigFile()
	if err != nil {
		return nil, fmt.Errorf("%s: config: %w", r, err)
	}
	if int64(len(raw)) > caps.ConfigBytes {
		return nil, fmt.Errorf("%s: a config of %d bytes, over the %d allowed", r, len(raw), caps.ConfigBytes)
	}
	if err := s.putBlob(m.Config.Digest, strings.NewReader(string(raw)), caps.ConfigBytes); err != nil {
		return nil, fmt.Errorf("%s: config: %w", r, err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("%s: config: %w", r, err)
	}
	rec.Env = cfg.Config.Env
	if len(cfg.RootFS.DiffIDs) != len(m.Layers) {
		return nil, fmt.Errorf("%s: %d layers but %d diff ids in the config", r, len(m.Layers), len(cfg.RootFS.DiffIDs))
	}
	var done int64
	report := func() {
		if progress != nil {
			progress(Progress{Ref: rec.Ref, Done: done, Total: total})
		}
	}
	report()
	for i, desc := range m.Layers {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !s.has(desc.Digest) {
			layer, err := img.LayerByDigest(desc.Digest)
			if err != nil {
				return nil, fmt.Errorf("%s: layer %s: %w", r, desc.Digest, err)
			}
			rc, err := layer.Compressed()
			if err != nil {
				return nil, fmt.Errorf("%s: layer %s: %w", r, desc.Digest, err)
			}
			err = s.putBlob(desc.Digest, &counting{r: rc, n: &done, report: report}, desc.Size)
			rc.Close()
			if err != nil {
				return nil, fmt.Errorf("%s: layer %s: %w", r, desc.Digest, err)
			}
		} else {
			done += desc.Size
			report()
		}
		rec.Layers = append(rec.Layers, Layer{Digest: desc.Digest.String(), DiffID: cfg.RootFS.DiffIDs[i].String(),
			Size: desc.Size, MediaType: string(desc.MediaType)})
		rec.Size += desc.Size
	}
	rec.Pulled = time.Now().UTC().Truncate(time.Second)
	if err := s.writeJSON(filepath.Join("images", digest.Hex+".json"), rec); err != nil {
		return nil, err
	}
	s.touch(digest.Hex) // a pull is a use
	if err := s.setRef(rec.Ref, rec.Digest); err != nil {
		return nil, err
	}
	if local {
		if err := s.writeStamp(r, stamp); err != nil {
			return nil, err
		}
	}
	return rec, nil
}

// counting passes reads on, adding their size to n.
type counting struct {
	r      io.Reader
	n      *int64
	report func()
}

func (c *counting) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	*c.n += int64(n)
	if n > 0 {
		c.report()
	}
	return n, err
}

// BlobPath is where the blob with digest d is stored.
func (s *Store) BlobPath(d string) (string, error) {
	hexPart, err := parseDigest(d)
	if err != nil {
		return "", err
	}
	return filepath.Join(s.dir, "blobs", "sha256", hexPart), nil
}

func (s *Store) has(d v1.Hash) bool {
	p, err := s.BlobPath(d.String())
	if err != nil {
		return false
	}
	_, err = os.Stat(p)
	return err == nil
}

// putBlob stores what r yields as the blob d, if its digest is d and it
// has at most max bytes.
func (s *Store) putBlob(d v1.Hash, r io.Reader, max int64) error {
	path, err := s.BlobPath(d.String())
	if err != nil {
		return err
	}
	return records.WriteAtomic(s.tmp, "blob-", path, func(w io.Writer) error {
		h := sha256.New()
		n, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(r, max+1))
		switch {
		case err != nil:
			return err
		case n > max:
			return fmt.Errorf("larger than the %d bytes its manifest says", max)
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != d.Hex {
			return fmt.Errorf("content does not match its digest (got sha256:%s)", got)
		}
		return nil
	})
}

// writeJSON writes v to name (relative to the store) atomically.
func (s *Store) writeJSON(name string, v any) error {
	return records.WriteJSON(s.tmp, "json-", filepath.Join(s.dir, name), v)
}

// refs reads refs.json: reference → image digest.
func (s *Store) refs() (map[string]string, error) {
	b, err := os.ReadFile(filepath.Join(s.dir, "refs.json"))
	if errors.Is(err, os.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("refs.json: %w", err)
	}
	return m, nil
}

func (s *Store) setRef(ref, digest string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Other processes (a CLI beside a server) may share the store.
	unlock, err := s.lockFile()
	if err != nil {
		return err
	}
	defer unlock()
	m, err := s.refs()
	if err != nil {
		return err
	}
	if digest == "" {
		delete(m, ref)
	} else {
		m[ref] = digest
	}
	return s.writeJSON("refs.json", m)
}

// lockFile takes the store's lock across processes (refs.lock), for a
// read-modify-write of refs.json.
func (s *Store) lockFile() (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(s.dir, "refs.lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}

// ErrNotFound says the store has no image by that reference.
var ErrNotFound = errors.New("no such image in the store")

// Get returns the image the store has under ref (as ParseRef reads it).
func (s *Store) Get(ref string) (*Image, error) {
	r, err := ParseRef(ref)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	m, err := s.refs()
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	d, ok := m[r.String()]
	if !ok {
		return nil, fmt.Errorf("%s: %w", r, ErrNotFound)
	}
	return s.image(d)
}

func (s *Store) image(digest string) (*Image, error) {
	hexPart, err := parseDigest(digest)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(s.dir, "images", hexPart+".json"))
	if err != nil {
		return nil, err
	}
	var img Image
	if err := json.Unmarshal(b, &img); err != nil {
		return nil, fmt.Errorf("image %s: %w", digest, err)
	}
	return &img, nil
}

// List returns the images by reference, sorted.
func (s *Store) List() ([]*Image, error) {
	s.mu.Lock()
	m, err := s.refs()
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	var out []*Image
	for ref, d := range m {
		img, err := s.image(d)
		if errors.Is(err, os.ErrNotExist) {
			continue // evicted meanwhile
		}
		if err != nil {
			return nil, err
		}
		img.Ref = ref
		out = append(out, img)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Ref < out[j].Ref })
	return out, nil
}

// Remove forgets the reference; Prune frees what no reference needs.
func (s *Store) Remove(ref string) error {
	r, err := ParseRef(ref)
	if err != nil {
		return err
	}
	if _, err := s.Get(ref); err != nil {
		return err
	}
	return s.setRef(r.String(), "")
}

// Prune removes the images no reference names, the blobs and unpacked
// chains no image has, and returns the bytes of blobs freed.
func (s *Store) Prune() (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pulls) > 0 {
		return 0, errors.New("a pull is under way: prune after it")
	}
	unlock, err := s.lockFile()
	if err != nil {
		return 0, err
	}
	defer unlock()
	m, err := s.refs()
	if err != nil {
		return 0, err
	}
	// Images in use are kept too, their references removed or not.
	keep, named := map[string]bool{}, map[string]bool{}
	for _, d := range m {
		keep[d], named[d] = true, true
	}
	for d := range s.holds {
		keep[d] = true
	}
	for _, d := range s.recordDigests() {
		if !keep[d] && s.inUse(d) {
			keep[d] = true
		}
	}
	keepImages, keepBlobs, keepChains, keepUsed := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	for d := range keep {
		img, err := s.image(d)
		if !named[d] && errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, err
		}
		if h, err := parseDigest(img.Digest); err == nil {
			keepImages[h+".json"] = true
			keepUsed[h] = true
		}
		if h, err := parseDigest(img.Config); err == nil {
			keepBlobs[h] = true
		}
		chain := ""
		for _, l := range img.Layers {
			if h, err := parseDigest(l.Digest); err == nil {
				keepBlobs[h] = true
			}
			if chain, err = chainID(chain, l.DiffID); err != nil {
				break
			}
			keepChains[chain] = true
			keepChains[chain+".json"] = true
		}
	}
	var freed int64
	if entries, err := os.ReadDir(filepath.Join(s.dir, "chains")); err == nil {
		for _, e := range entries {
			if !keepChains[e.Name()] {
				if err := os.RemoveAll(filepath.Join(s.dir, "chains", e.Name())); err != nil {
					return freed, err
				}
			}
		}
	}
	for _, dir := range []struct {
		path string
		keep map[string]bool
	}{{"images", keepImages}, {"blobs/sha256", keepBlobs}, {"used", keepUsed}} {
		entries, err := os.ReadDir(filepath.Join(s.dir, dir.path))
		if err != nil {
			return freed, err
		}
		for _, e := range entries {
			if dir.keep[e.Name()] {
				continue
			}
			if info, err := e.Info(); err == nil {
				freed += info.Size()
			}
			if err := os.Remove(filepath.Join(s.dir, dir.path, e.Name())); err != nil {
				return freed, err
			}
		}
	}
	return freed, nil
}
