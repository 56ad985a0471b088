package executor

import (
	"bytes"
	"container/list"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/gob"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// The compile cache
//
// A successful compile's artefacts and outcome are kept on disk under a
// content address: the SHA-256 of everything that can change what the
// compile step produces, and of the tenant it is for unless the cache is
// shared (compileKey). A request whose key is present skips
// the compile sandbox: its artefacts come from the cache, and its compile
// step reports the cached outcome (the compiler's output and times of the
// compile that filled the entry) with CacheHit set. Only successes are
// stored; a compile error, a limit or a set-up failure is never cached.
//
// Entries live in CompileCacheDir/<hex[:2]>/<hex>, one file each, written
// to a temporary name and renamed, and carry a SHA-256 of their own bytes:
// a truncated, partial or corrupt entry is removed and never served (it is
// checked cheaply when the index is built and fully on every read). The
// in-memory index (key → size, least recently used first) is rebuilt from
// the directory the first time a compile needs it, ordered by the entries'
// modification times, which every hit refreshes. Past CompileCacheBytes,
// the least recently used entries are removed.
//
// Tenants are kept apart by the key: a tenant's hit, its replayed output,
// its timing and its waiting for an identical compile in flight never come
// from another tenant's compile (Config.SharedCompileCache lifts this).
//
// Identical compiles at the same time run once: the first is the leader,
// the others wait for it (or for their own context). When the leader's
// compiler ran to an end (success, compile error, or a limit), the waiters
// take its outcome, marked CacheHit since no compiler ran for them; when
// the leader was canceled or its sandbox could not be set up, each waiter
// compiles for itself, at once and in parallel.
//
// Several processes may share the directory: each keeps its own index, so
// the size cap is per process, and an entry another process removed is a
// miss (and drops from the index).

// DefaultCompileCacheBytes is the compile cache's size unless configured
// (config's, which it is).
const DefaultCompileCacheBytes = config.DefaultCompileCacheBytes

const (
	// cacheFormat names the layout of the key and of the entries: change it
	// whenever either changes.
	cacheFormat = "sandbox-run compile cache v2"
	// cacheMagic opens every entry file.
	cacheMagic = "SRCC\x00\x00\x00\x01"
	// cacheHeaderLen is magic + key + payload length.
	cacheHeaderLen = len(cacheMagic) + sha256.Size + 8
	// staleTempAge is how old a temporary file must be before the index
	// build takes it for the leftover of a crash (a younger one may be
	// another process's write in progress).
	staleTempAge = 10 * time.Minute
	// maxCompileArtifactBytes and maxCompileArtifactTotal bound what a
	// compile hands to the run.
	maxCompileArtifactBytes = 256 << 20
	maxCompileArtifactTotal = 512 << 20
)

// cacheKey is a compile cache key: the SHA-256 of the compile's inputs.
type cacheKey [sha256.Size]byte

func (k cacheKey) String() string { return hex.EncodeToString(k[:]) }

// keyHasher writes length-prefixed fields into a SHA-256, so that no two
// different sequences of fields give the same byte stream.
type keyHasher struct{ h io.Writer }

func (k keyHasher) uint(n uint64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], n)
	k.h.Write(b[:])
}

func (k keyHasher) bytes(b []byte) {
	k.uint(uint64(len(b)))
	k.h.Write(b)
}

func (k keyHasher) str(s string) { k.bytes([]byte(s)) }

func (k keyHasher) strs(ss []string) {
	k.uint(uint64(len(ss)))
	for _, s := range ss {
		k.str(s)
	}
}

// compileKey hashes whom the entry is for (tenant, or everyone when shared)
// and everything that decides what a compile produces: the
// language and its toolchain (name, version, binary path, home, and the
// binary's size and modification time, so a toolchain replaced in place
// is a new key), the mounts, the expanded argv and environment, the
// effective limits (a compile that succeeds under generous limits might not
// under tight ones), the artefact patterns and collection caps, and every
// input file (path, mode, content), in path order.
func compileKey(lang *Language, tc *Toolchain, spec *sandbox.Spec, tenant string, shared bool) cacheKey {
	h := sha256.New()
	k := keyHasher{h}
	k.str(cacheFormat)
	if shared {
		k.uint(0)
	} else {
		k.uint(1)
		k.str(tenant)
	}
	k.str(lang.Name)
	k.str(tc.Version)
	k.str(tc.Bin)
	k.str(tc.Home)
	k.str(tc.ImageDigest)
	// A binary inside an image is the image's digest's.
	if fi, err := statHost(tc); err == nil {
		k.uint(uint64(fi.Size()))
		k.uint(uint64(fi.ModTime().UnixNano()))
	} else {
		k.uint(math.MaxUint64)
		k.uint(math.MaxUint64)
	}
	if lang.Cache != nil {
		k.str(lang.Cache.Dir)
		k.strs(lang.Cache.Prepare)
	} else {
		k.str("")
		k.strs(nil)
	}
	k.uint(uint64(len(spec.Mounts)))
	for _, m := range spec.Mounts {
		k.str(m.Source)
		k.str(m.Target)
		flags := uint64(0)
		for i, b := range []bool{m.Writable, m.Overlay, m.Optional} {
			if b {
				flags |= 1 << i
			}
		}
		k.uint(flags)
	}
	k.strs(spec.Args)
	env := append([]string(nil), spec.Env...)
	sort.Strings(env)
	k.strs(env)
	k.str(spec.Dir)
	l := spec.Limits
	for _, v := range []int64{int64(l.WallTime), int64(l.CPUTime), l.Memory, int64(l.Processes), int64(math.Float64bits(l.CPUs)),
		l.OutputBytes, l.FileSize, l.WorkSize, l.TmpSize, int64(l.Inodes), int64(l.OpenFiles), l.Stack} {
		k.uint(uint64(v))
	}
	k.strs(spec.Collect.Patterns)
	k.uint(uint64(spec.Collect.MaxFileBytes))
	k.uint(uint64(spec.Collect.MaxTotalBytes))
	files := append([]sandbox.File(nil), spec.Files...)
	sort.Slice(files, func(i, j int) bool { return path.Clean(files[i].Path) < path.Clean(files[j].Path) })
	k.uint(uint64(len(files)))
	for _, f := range files {
		k.str(path.Clean(f.Path))
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		k.uint(uint64(mode))
		k.bytes(f.Data)
	}
	var key cacheKey
	h.Sum(key[:0])
	return key
}

// compiled is what a compile produced, as the cache keeps it.
type compiled struct {
	Outcome Outcome // Stdout and Stderr empty: the raw bytes are below
	Stdout  []byte
	Stderr  []byte
	Files   []cachedFile
}

type cachedFile struct {
	Path string
	Mode uint32
	Data []byte
}

func (c *compiled) step(hit bool) *StepResult {
	s := &StepResult{Outcome: c.Outcome, CacheHit: hit}
	s.Stdout, s.StdoutEncoding = wire.EncodeOutput(c.Stdout)
	s.Stderr, s.StderrEncoding = wire.EncodeOutput(c.Stderr)
	return s
}

func (c *compiled) files() []sandbox.File {
	out := make([]sandbox.File, len(c.Files))
	for i, f := range c.Files {
		out[i] = sandbox.File{Path: f.Path, Data: f.Data, Mode: fs.FileMode(f.Mode)}
	}
	return out
}

func (c *compiled) size() int64 {
	n := int64(len(c.Stdout) + len(c.Stderr) + 512)
	for _, f := range c.Files {
		n += int64(len(f.Path) + len(f.Data) + 16)
	}
	return n
}

// replay writes a compile's output to the request's live writer, as the
// compiler would have (stdout first, then stderr: their interleaving is
// not kept).
func (c *compiled) replay(w io.Writer) {
	if w == nil {
		return
	}
	if len(c.Stdout) > 0 {
		w.Write(c.Stdout)
	}
	if len(c.Stderr) > 0 {
		w.Write(c.Stderr)
	}
}

// compileCache is the on-disk cache with its index and its flights.
type compileCache struct {
	dir string
	max int64

	loadOnce sync.Once
	disabled bool // the directory could not be made

	mu      sync.Mutex
	index   map[cacheKey]*list.Element // of *cacheItem
	lru     *list.List                 // most recently used first
	total   int64
	flights map[cacheKey]*flight
}

type cacheItem struct {
	key  cacheKey
	size int64
}

// flight is a compile in progress that identical requests wait for.
type flight struct {
	done   chan struct{}
	res    *compiled // set before done closes
	shared bool      // whether waiters may take res
}

func newCompileCache(dir string, max int64) *compileCache {
	if max == 0 {
		max = DefaultCompileCacheBytes
	}
	if max < 0 {
		return nil
	}
	return &compileCache{dir: dir, max: max, index: map[cacheKey]*list.Element{}, lru: list.New(), flights: map[cacheKey]*flight{}}
}

func (c *compileCache) path(key cacheKey) string {
	s := key.String()
	return filepath.Join(c.dir, s[:2], s)
}

// load builds the index from the directory, once.
func (c *compileCache) load() {
	c.loadOnce.Do(func() {
		if err := os.MkdirAll(c.dir, 0o700); err != nil {
			c.disabled = true
			return
		}
		type found struct {
			key  cacheKey
			size int64
			used time.Time
		}
		var entries []found
		subs, _ := os.ReadDir(c.dir)
		for _, sub := range subs {
			if !sub.IsDir() || len(sub.Name()) != 2 {
				continue
			}
			dir := filepath.Join(c.dir, sub.Name())
			names, _ := os.ReadDir(dir)
			for _, d := range names {
				p := filepath.Join(dir, d.Name())
				info, err := d.Info()
				if err != nil {
					continue
				}
				if len(d.Name()) > 0 && d.Name()[0] == '.' {
					if time.Since(info.ModTime()) > staleTempAge {
						os.Remove(p) // a write that never finished
					}
					continue
				}
				key, ok := parseKey(d.Name())
				if !ok || d.Name()[:2] != sub.Name() || !info.Mode().IsRegular() || !checkHeader(p, key, info.Size()) {
					os.RemoveAll(p)
					continue
				}
				entries = append(entries, found{key, info.Size(), info.ModTime()})
			}
		}
		sort.Slice(entries, func(i, j int) bool { return entries[i].used.After(entries[j].used) })
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, e := range entries {
			c.index[e.key] = c.lru.PushBack(&cacheItem{e.key, e.size})
			c.total += e.size
		}
		c.evictLocked()
	})
}

func parseKey(name string) (cacheKey, bool) {
	var k cacheKey
	if len(name) != 2*len(k) {
		return k, false
	}
	if _, err := hex.Decode(k[:], []byte(name)); err != nil || hex.EncodeToString(k[:]) != name {
		return k, false
	}
	return k, true
}

// checkHeader checks an entry's magic, key and length against its size
// without reading it all: what a crash or a truncation leaves fails here.
func checkHeader(p string, key cacheKey, size int64) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	var hdr [cacheHeaderLen]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return false
	}
	return headerOK(hdr[:], key, size)
}

func headerOK(hdr []byte, key cacheKey, size int64) bool {
	if string(hdr[:len(cacheMagic)]) != cacheMagic || !bytes.Equal(hdr[len(cacheMagic):len(cacheMagic)+len(key)], key[:]) {
		return false
	}
	n := binary.BigEndian.Uint64(hdr[cacheHeaderLen-8:])
	return n <= uint64(size) && uint64(cacheHeaderLen)+n+sha256.Size == uint64(size)
}

// evictLocked removes least recently used entries past the cap.
func (c *compileCache) evictLocked() {
	for c.total > c.max {
		back := c.lru.Back()
		if back == nil {
			return
		}
		c.dropLocked(back.Value.(*cacheItem).key)
	}
}

func (c *compileCache) dropLocked(key cacheKey) {
	el, ok := c.index[key]
	if !ok {
		return
	}
	c.lru.Remove(el)
	delete(c.index, key)
	c.total -= el.Value.(*cacheItem).size
	os.Remove(c.path(key))
}

// drop removes an entry that could not be read.
func (c *compileCache) drop(key cacheKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(key)
}

// read reads and checks an entry; any failure is a miss.
func (c *compileCache) read(key cacheKey) (*compiled, error) {
	data, err := os.ReadFile(c.path(key))
	if err != nil {
		return nil, err
	}
	if len(data) < cacheHeaderLen+sha256.Size || !headerOK(data[:cacheHeaderLen], key, int64(len(data))) {
		return nil, errors.New("compile cache: bad entry header")
	}
	body, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if want := sha256.Sum256(body); !bytes.Equal(want[:], sum) {
		return nil, errors.New("compile cache: entry checksum mismatch")
	}
	var rec compiled
	if err := gob.NewDecoder(bytes.NewReader(body[cacheHeaderLen:])).Decode(&rec); err != nil {
		return nil, err
	}
	if len(rec.Files) == 0 || rec.Outcome.Status != StatusCompleted {
		return nil, errors.New("compile cache: entry is not a successful compile")
	}
	now := time.Now()
	os.Chtimes(c.path(key), now, now) // the last use, for the index of the next start
	return &rec, nil
}

// put stores a successful compile. Errors only lose the entry.
func (c *compileCache) put(key cacheKey, rec *compiled) {
	if rec.size() > c.max {
		return
	}
	var payload bytes.Buffer
	if err := gob.NewEncoder(&payload).Encode(rec); err != nil {
		return
	}
	buf := make([]byte, 0, cacheHeaderLen+payload.Len()+sha256.Size)
	buf = append(buf, cacheMagic...)
	buf = append(buf, key[:]...)
	buf = binary.BigEndian.AppendUint64(buf, uint64(payload.Len()))
	buf = append(buf, payload.Bytes()...)
	sum := sha256.Sum256(buf)
	buf = append(buf, sum[:]...)
	size := int64(len(buf))
	if size > c.max {
		return
	}
	final := c.path(key)
	if err := os.MkdirAll(filepath.Dir(final), 0o700); err != nil {
		return
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := filepath.Join(filepath.Dir(final), ".tmp-"+hex.EncodeToString(rnd[:]))
	if err := os.WriteFile(tmp, buf, 0o600); err != nil {
		os.Remove(tmp)
		return
	}
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.index[key]; ok {
		c.total -= el.Value.(*cacheItem).size
		el.Value.(*cacheItem).size = size
		c.lru.MoveToFront(el)
	} else {
		c.index[key] = c.lru.PushFront(&cacheItem{key, size})
	}
	c.total += size
	c.evictLocked()
}

// lookup is what acquire found for a key.
type lookup int

const (
	lookupIndexed lookup = iota // an entry is on disk: read it
	lookupWait                  // an identical compile is running: wait for it
	lookupLead                  // nothing: compile, then finish the flight
)

// acquire looks a key up in the index, else joins or starts its flight.
// Looking both up under one lock means a compile that finishes in between
// is seen either as its flight or as its entry, never as neither.
func (c *compileCache) acquire(key cacheKey) (lookup, *flight) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.index[key]; ok {
		c.lru.MoveToFront(el)
		return lookupIndexed, nil
	}
	if f, ok := c.flights[key]; ok {
		return lookupWait, f
	}
	f := &flight{done: make(chan struct{})}
	c.flights[key] = f
	return lookupLead, f
}

// finish ends a flight: a success is stored first, so that a request that
// arrives after finds it in the index.
func (c *compileCache) finish(key cacheKey, f *flight, res *compiled, shared bool) {
	if res != nil && shared && res.Outcome.Status == StatusCompleted {
		c.put(key, res)
	}
	c.mu.Lock()
	delete(c.flights, key)
	c.mu.Unlock()
	f.res, f.shared = res, shared && res != nil
	close(f.done)
}

// stats reports the index's entries and bytes (for tests).
func (c *compileCache) stats() (int, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.index), c.total
}

// cachedCompile returns the compile's outcome from the cache, from an
// identical compile in flight, or by running run (which reports whether
// its outcome may be shared: the compiler ran to an end).
func (c *compileCache) cachedCompile(ctx context.Context, key cacheKey, live io.Writer, run func() (*compiled, bool)) (*compiled, bool) {
	c.load()
	if c.disabled {
		res, _ := run()
		return res, false
	}
	for range 3 {
		what, f := c.acquire(key)
		switch what {
		case lookupIndexed:
			rec, err := c.read(key)
			if err != nil {
				c.drop(key) // corrupt, partial or gone: never served
				continue
			}
			rec.replay(live)
			return rec, true
		case lookupWait:
			select {
			case <-f.done:
			case <-ctx.Done():
				return &compiled{Outcome: Outcome{Status: StatusCompileError, ExitCode: -1, LimitReason: string(sandbox.LimitCanceled)},
					Stderr: []byte("sandbox-run: canceled while waiting for an identical compile")}, false
			}
			if f.shared {
				f.res.replay(live)
				return f.res, true
			}
			res, shared := run() // the leader was canceled or not set up: compile alone
			if shared && res.Outcome.Status == StatusCompleted {
				c.put(key, res)
			}
			return res, false
		case lookupLead:
			var res *compiled
			shared := false
			func() {
				defer func() { c.finish(key, f, res, shared) }()
				res, shared = run()
			}()
			return res, false
		}
	}
	res, _ := run()
	return res, false
}

// statHost stats a host toolchain's binary; one in an image has no host
// file (its image's digest stands for it).
func statHost(tc *Toolchain) (os.FileInfo, error) {
	if tc.Root != "" {
		return nil, os.ErrNotExist
	}
	return os.Stat(tc.Bin)
}
