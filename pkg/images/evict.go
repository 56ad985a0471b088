package images

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/images/layer"
)

// The store has a bound (Caps.StoreBytes, images.max_store_bytes): after
// an image is added to it (Use or Fetch pulled or unpacked something) and
// when a process first opens it (the executor does), Trim evicts the least
// recently used images until what the store holds is within it.
//
// What it holds is the size of every file under its directory (blobs,
// unpacked chains, records, what a pull under way wrote to tmp/), each
// inode once: a chain's files are hard links of its parent's, counted
// once. Directories are not counted.
//
// An image's last use is the mtime of used/HEX: set when it is pulled and
// whenever Hold holds it (each run). It is on disk, so the order holds
// across restarts and between processes sharing the store. Hold also takes
// a shared flock on that file for as long as the image is held, and Trim
// evicts only an image whose file it can lock exclusively: an image a run
// uses, in this process or another, is never evicted (nor one InUse
// names). Evicting an image removes its references, its record, and the
// blobs and chains no image kept needs: layers shared with a kept image
// stay. The blobs of a pull under way in this process are never removed;
// one in another process sharing the store is not seen (as with Prune).

// DefaultStoreBytes bounds a store when nothing else does: 10 GiB.
const DefaultStoreBytes int64 = 10 << 30

// UnpackError says an image was had but its layers could not be
// unpacked (Use).
type UnpackError struct {
	Ref string
	Err error
}

func (e *UnpackError) Error() string { return fmt.Sprintf("unpack %s: %v", e.Ref, e.Err) }
func (e *UnpackError) Unwrap() error { return e.Err }

// SetLogger has the store report evictions to l (default: slog's default).
func (s *Store) SetLogger(l *slog.Logger) { s.log.Store(l) }

func (s *Store) logger() *slog.Logger {
	if l := s.log.Load(); l != nil {
		return l
	}
	return slog.Default()
}

// Use returns the image ref names and its root filesystem, pulling
// (Ensure) and unpacking (Root) what the store lacks, held (Hold) until
// release is called: an image a run uses is never evicted. An image
// evicted since a run last used it is fetched anew. When Use added to the
// store it trims it to caps.StoreBytes (Trim) before it returns. An error
// unpacking is an *UnpackError.
func (s *Store) Use(ctx context.Context, ref string, caps Caps, lim layer.Limits, progress func(Progress)) (img *Image, root string, release func(), err error) {
	for attempt := 0; ; attempt++ {
		var pulled, ok bool
		if img, pulled, err = s.ensure(ctx, ref, caps, progress); err != nil {
			return nil, "", nil, err
		}
		if release, ok = s.Hold(img.Digest); !ok {
			// Evicted between the two (by another image's Use): again.
			if attempt < 3 {
				continue
			}
			return nil, "", nil, fmt.Errorf("%s: evicted from the image store as soon as it was fetched", img.Ref)
		}
		made := !s.unpacked(img)
		if root, err = s.Root(img, lim); err != nil {
			release()
			return nil, "", nil, &UnpackError{Ref: img.Ref, Err: err}
		}
		if pulled || made {
			s.trimLogged(caps.withDefaults().StoreBytes)
		}
		return img, root, release, nil
	}
}

// unpacked says whether img's root is unpacked already.
func (s *Store) unpacked(img *Image) bool {
	chain := ""
	for _, l := range img.Layers {
		var err error
		if chain, err = chainID(chain, l.DiffID); err != nil {
			return false
		}
	}
	if chain == "" {
		return false
	}
	_, err := os.Stat(filepath.Join(s.dir, "chains", chain))
	return err == nil
}

// Hold marks the image (by digest) in use until release is called (more
// than once is fine): no Trim, of this process or of another that shares
// the store, evicts it, and Prune keeps it. It counts as a use: the image
// becomes the most recently used. ok is false when the store no longer
// has the image (evicted, pruned) or is evicting it.
func (s *Store) Hold(digest string) (release func(), ok bool) {
	h, err := parseDigest(digest)
	if err != nil {
		return nil, false
	}
	record := filepath.Join(s.dir, "images", h+".json")
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := os.Stat(record); err != nil {
		return nil, false
	}
	f, err := os.OpenFile(s.usedPath(h), os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		return nil, false
	}
	if syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB) != nil {
		f.Close() // another process is evicting it
		return nil, false
	}
	// Another process may have evicted it between the two (it removes the
	// record while it holds the lock, before we could take ours).
	if _, err := os.Stat(record); err != nil {
		f.Close()
		return nil, false
	}
	now := time.Now()
	os.Chtimes(f.Name(), now, now)
	s.holds[digest]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			if s.holds[digest]--; s.holds[digest] <= 0 {
				delete(s.holds, digest)
			}
			s.mu.Unlock()
			f.Close()
			// An image held kept the store above its bound: it may go now.
			if s.over.Load() {
				s.trimLogged(s.bound.Load())
			}
		})
	}, true
}

// usedPath is the file whose mtime is the image's last use (hex of its
// digest) and which its holds lock.
func (s *Store) usedPath(hexPart string) string { return filepath.Join(s.dir, "used", hexPart) }

// touch marks the image (hex of its digest) used now.
func (s *Store) touch(hexPart string) {
	p := s.usedPath(hexPart)
	now := time.Now()
	if err := os.Chtimes(p, now, now); errors.Is(err, fs.ErrNotExist) {
		os.MkdirAll(filepath.Dir(p), 0o755)
		if f, err := os.OpenFile(p, os.O_RDONLY|os.O_CREATE, 0o644); err == nil {
			f.Close()
		}
	}
}

// lastUse is when the image (hex of its digest) was last used: its used
// file's mtime, else its record's (a store of an earlier version).
func (s *Store) lastUse(hexPart string) time.Time {
	if fi, err := os.Stat(s.usedPath(hexPart)); err == nil {
		return fi.ModTime()
	}
	if fi, err := os.Stat(filepath.Join(s.dir, "images", hexPart+".json")); err == nil {
		return fi.ModTime()
	}
	return time.Time{}
}

// lockUsed takes the image's used file exclusively, if nothing holds it:
// the file to close once it is evicted; ok false when it is held.
func (s *Store) lockUsed(hexPart string) (f *os.File, ok bool) {
	f, err := os.OpenFile(s.usedPath(hexPart), os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		return nil, false
	}
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		f.Close()
		return nil, false
	}
	return f, true
}

// inUse says whether the image d is held here or elsewhere, or InUse
// names it (under s.mu).
func (s *Store) inUse(d string) bool {
	if s.holds[d] > 0 || s.InUse != nil && s.InUse(d) {
		return true
	}
	h, err := parseDigest(d)
	if err != nil {
		return false
	}
	f, ok := s.lockUsed(h)
	if ok {
		f.Close()
	}
	return !ok
}

// recordDigests are the digests of the image records in the store.
func (s *Store) recordDigests() []string {
	entries, _ := os.ReadDir(filepath.Join(s.dir, "images"))
	var out []string
	for _, e := range entries {
		if h, ok := strings.CutSuffix(e.Name(), ".json"); ok {
			if _, err := parseDigest("sha256:" + h); err == nil {
				out = append(out, "sha256:"+h)
			}
		}
	}
	return out
}

// pin keeps the blobs (hex) from eviction until unpin is called: a pull
// that found them in the store needs them until its record names them.
func (s *Store) pin(blobs []string) (unpin func()) {
	s.mu.Lock()
	for _, b := range blobs {
		s.pins[b]++
	}
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		for _, b := range blobs {
			if s.pins[b]--; s.pins[b] <= 0 {
				delete(s.pins, b)
			}
		}
		s.mu.Unlock()
	}
}

// Usage is the bytes the store holds (see Trim).
func (s *Store) Usage() (int64, error) {
	u, err := s.measure()
	if err != nil {
		return 0, err
	}
	return u.total, nil
}

// Trimmed is what a Trim did.
type Trimmed struct {
	Evicted []*Image // least recently used first
	Freed   int64    // the bytes that went
	Bytes   int64    // what the store holds now
	// Held are the images in use that Trim would have evicted: they keep
	// the store above its bound until they are released.
	Held []*Image
}

// Trim evicts the least recently used images until the store holds at
// most max bytes (<= 0: DefaultStoreBytes); images no reference names go
// first, and so do blobs and chains no image needs. An image in use
// (Hold, InUse) is never evicted: when those keep the store above max,
// Trim says so in a warning, and trims again when the last of them is
// released.
func (s *Store) Trim(max int64) (*Trimmed, error) {
	if max <= 0 {
		max = DefaultStoreBytes
	}
	s.bound.Store(max)
	s.trimMu.Lock()
	defer s.trimMu.Unlock()
	u, err := s.measure()
	if err != nil {
		return nil, err
	}
	out := &Trimmed{Bytes: u.total}
	if u.total <= max {
		s.over.Store(false)
		return out, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	unlock, err := s.lockFile()
	if err != nil {
		return nil, err
	}
	defer unlock()
	refs, err := s.refs()
	if err != nil {
		return nil, err
	}
	named := map[string][]string{} // digest → its references
	for ref, d := range refs {
		named[d] = append(named[d], ref)
	}
	// need counts, for each thing of the store (owner), the images kept
	// that need it; a thing no image needs is free to go.
	const always = 1 << 30
	need := map[string]int{}
	type candidate struct {
		img     *Image
		hex     string
		used    time.Time
		unnamed bool
	}
	var cands []candidate
	for _, d := range s.recordDigests() {
		h, _ := parseDigest(d)
		img, err := s.image(d)
		if err != nil {
			need["image:"+h] += always // unreadable: left alone
			continue
		}
		for _, o := range ownersOf(img) {
			need[o]++
		}
		cands = append(cands, candidate{img: img, hex: h, used: s.lastUse(h), unnamed: len(named[d]) == 0})
	}
	for b := range s.pins {
		need["blob:"+b] += always
	}
	for dir := range s.chains {
		need["chain:"+filepath.Base(dir)] += always
	}
	var gone []string
	for o := range u.owners {
		if need[o] == 0 {
			out.Freed += u.free(o)
			gone = append(gone, o)
		}
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if cands[i].unnamed != cands[j].unnamed {
			return cands[i].unnamed
		}
		return cands[i].used.Before(cands[j].used)
	})
	var victims []candidate
	var locks []*os.File
	defer func() {
		for _, f := range locks {
			f.Close()
		}
	}()
	for _, c := range cands {
		if u.total <= max {
			break
		}
		if s.holds[c.img.Digest] > 0 || s.InUse != nil && s.InUse(c.img.Digest) {
			out.Held = append(out.Held, c.img)
			continue
		}
		f, ok := s.lockUsed(c.hex)
		if !ok {
			out.Held = append(out.Held, c.img) // held by another process
			continue
		}
		locks = append(locks, f)
		for _, o := range ownersOf(c.img) {
			if need[o]--; need[o] == 0 {
				out.Freed += u.free(o)
				gone = append(gone, o)
			}
		}
		victims = append(victims, c)
		out.Evicted = append(out.Evicted, c.img)
	}
	out.Bytes = u.total
	s.over.Store(u.total > max && len(out.Held) > 0)
	if u.total > max {
		var held []string
		for _, img := range out.Held {
			held = append(held, img.Ref)
		}
		s.logger().Warn("the image store stays above images.max_store_bytes: the images it would evict next are in use (kept until released)",
			"bytes", u.total, "max_store_bytes", max, "in_use", held)
	}
	if len(gone) == 0 {
		return out, nil
	}
	var dirs []string
	for _, o := range gone {
		if id, ok := strings.CutPrefix(o, "chain:"); ok {
			dirs = append(dirs, filepath.Join(s.dir, "chains", id))
		}
	}
	if len(dirs) > 0 && s.Evicting != nil {
		s.Evicting(dirs)
	}
	// References first, then records: nothing finds an evicted image while
	// its files go.
	if len(victims) > 0 {
		for _, c := range victims {
			for _, ref := range named[c.img.Digest] {
				delete(refs, ref)
				if r, err := ParseRef(ref); err == nil && r.Kind != Registry {
					os.Remove(s.stampPath(r))
				}
			}
		}
		if err := s.writeJSON("refs.json", refs); err != nil {
			return out, err
		}
	}
	sort.SliceStable(gone, func(i, j int) bool {
		return strings.HasPrefix(gone[i], "image:") && !strings.HasPrefix(gone[j], "image:")
	})
	var errs []error
	for _, o := range gone {
		if err := s.removeOwner(o); err != nil {
			errs = append(errs, err)
		}
	}
	for _, c := range victims {
		refs := named[c.img.Digest]
		sort.Strings(refs)
		s.logger().Info("image evicted from the store (least recently used)", "image", cmp.Or(strings.Join(refs, " "), c.img.Ref),
			"digest", c.img.Digest, "last_used", c.used.UTC().Format(time.RFC3339Nano))
	}
	if len(victims) > 0 {
		s.logger().Info("image store trimmed", "evicted", len(victims), "freed_bytes", out.Freed, "bytes", u.total, "max_store_bytes", max)
	}
	return out, errors.Join(errs...)
}

// trimLogged trims the store to max, saying why not when it cannot.
func (s *Store) trimLogged(max int64) {
	if _, err := s.Trim(max); err != nil {
		s.logger().Warn("trimming the image store", "error", err)
	}
}

// ownersOf lists what of the store img needs: its record (and used
// file), its config and layer blobs, the chains of its layers.
func ownersOf(img *Image) []string {
	var out []string
	if h, err := parseDigest(img.Digest); err == nil {
		out = append(out, "image:"+h)
	}
	if h, err := parseDigest(img.Config); err == nil {
		out = append(out, "blob:"+h)
	}
	chain := ""
	for _, l := range img.Layers {
		if h, err := parseDigest(l.Digest); err == nil {
			out = append(out, "blob:"+h)
		}
		var err error
		if chain, err = chainID(chain, l.DiffID); err != nil {
			break
		}
		out = append(out, "chain:"+chain)
	}
	return out
}

// ownerOf names what of the store the file at rel (relative to the
// store) belongs to: "blob:HEX", "image:HEX" (a record or used file),
// "chain:ID" (its tree and its measure); "" for the rest (refs.json,
// tmp/, sources/).
func ownerOf(rel string) string {
	parts := strings.SplitN(filepath.ToSlash(rel), "/", 3)
	switch {
	case len(parts) == 3 && parts[0] == "blobs" && parts[1] == "sha256":
		return "blob:" + parts[2]
	case len(parts) == 2 && parts[0] == "images" && strings.HasSuffix(parts[1], ".json"):
		return "image:" + strings.TrimSuffix(parts[1], ".json")
	case len(parts) == 2 && parts[0] == "used":
		return "image:" + parts[1]
	case len(parts) >= 2 && parts[0] == "chains":
		return "chain:" + strings.TrimSuffix(parts[1], ".json")
	}
	return ""
}

// removeOwner removes the files of an owner (ownerOf).
func (s *Store) removeOwner(o string) error {
	kind, id, _ := strings.Cut(o, ":")
	if _, err := parseDigest("sha256:" + id); err != nil {
		return fmt.Errorf("evict %s: not a digest", o)
	}
	var paths []string
	switch kind {
	case "blob":
		paths = []string{filepath.Join(s.dir, "blobs", "sha256", id)}
	case "image":
		paths = []string{filepath.Join(s.dir, "images", id+".json"), s.usedPath(id)}
	case "chain":
		paths = []string{filepath.Join(s.dir, "chains", id), filepath.Join(s.dir, "chains", id+".json")}
	}
	var errs []error
	for _, p := range paths {
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// usage is what the store holds: each inode's size once, and which files
// each owner has (to tell what removing it frees).
type usage struct {
	total  int64
	size   map[inodeKey]int64
	links  map[inodeKey]int // paths to it in the store
	owners map[string][]inodeKey
}

type inodeKey struct{ dev, ino uint64 }

// measure walks the store. Files that go meanwhile are not counted.
func (s *Store) measure() (*usage, error) {
	u := &usage{size: map[inodeKey]int64{}, links: map[inodeKey]int{}, owners: map[string][]inodeKey{}}
	err := filepath.WalkDir(s.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == s.dir && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			return nil // gone meanwhile, or unreadable: not counted
		}
		if d.IsDir() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		k := inodeKey{uint64(st.Dev), st.Ino}
		if _, seen := u.size[k]; !seen {
			u.size[k] = fi.Size()
			u.total += fi.Size()
		}
		u.links[k]++
		rel, err := filepath.Rel(s.dir, p)
		if err != nil {
			return nil
		}
		if o := ownerOf(rel); o != "" {
			u.owners[o] = append(u.owners[o], k)
		}
		return nil
	})
	return u, err
}

// free counts owner o's files as removed: it returns (and subtracts) the
// bytes of those no other path in the store keeps.
func (u *usage) free(o string) int64 {
	var n int64
	for _, k := range u.owners[o] {
		if u.links[k]--; u.links[k] == 0 {
			n += u.size[k]
		}
	}
	delete(u.owners, o)
	u.total -= n
	return n
}
