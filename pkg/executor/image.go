package executor

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/lib/records"
	"github.com/sandbox-run/sandbox-run/pkg/images"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// Runs in an image: the sandbox's root is the image's root filesystem
// (read-only; pkg/images unpacks it), none of the host's /usr or /etc is
// mounted, and the language's toolchain is looked for inside the image by
// the entry's candidates (absolute paths, globs, or names on the image's
// PATH and then /usr/local/bin, /usr/bin, /bin), symlinks followed as
// they would be inside. Its version comes from the entry's version
// command, run once in a sandbox of the image and remembered on disk
// (CacheDir/image-toolchains): image digests never change.

// ImageError is a request whose image cannot be used because of the
// request: an invalid reference, or one the source does not have. Pull
// and unpack failures of an image that exists are set-up failures in the
// Result instead.
type ImageError struct {
	Ref string
	Err error
}

func (e *ImageError) Error() string { return fmt.Sprintf("image %.200q: %v", e.Ref, e.Err) }
func (e *ImageError) Unwrap() error { return e.Err }

// picked is a request's language entry and toolchain, in an image or on
// the host, or why there is none; ref is the image ("" on the host).
// release, when set, ends the hold on the image (images.Store.Hold): the
// store evicts no image a run uses.
type picked struct {
	lang    *Language
	tc      *Toolchain
	ref     string
	err     error
	release func()
}

// done releases the image p holds, if any.
func (p *picked) done() {
	if p.release != nil {
		p.release()
	}
}

// hold is what req runs with (as pick finds it), its image held until
// done: what Prepare found when its image is still in the store (Prepare
// holds none, so that a request that never runs holds nothing), else
// found again, the image fetched anew if it was evicted meanwhile.
func (x *Executor) hold(ctx context.Context, req *Request) *picked {
	p := req.picked
	if p == nil {
		return x.pick(ctx, req)
	}
	if p.err != nil || p.ref == "" || p.tc == nil {
		return p
	}
	store, err := x.Images()
	if err != nil {
		return x.pick(ctx, req)
	}
	release, ok := store.Hold(p.tc.ImageDigest)
	if !ok {
		return x.pick(ctx, req)
	}
	held := *p
	held.release = release
	return &held
}

// pick finds the entry and toolchain req runs with: on the host, or in
// the image the request or the entry names (pulled and unpacked when the
// store lacks it).
func (x *Executor) pick(ctx context.Context, req *Request) *picked {
	ref, entries := req.Image, x.reg.Entries(req.Language)
	if ref == "" {
		lang, tc, err := x.resolve(req.Language, req.Version)
		if err != nil || lang.Image == "" {
			return &picked{lang: lang, tc: tc, err: err}
		}
		// An entry backed by an image (languages stay data).
		ref, entries = lang.Image, []*Language{lang}
	} else if len(entries) == 0 {
		return &picked{err: &UnsupportedLanguageError{Language: req.Language, Known: x.reg.Names()}}
	}
	lang, tc, release, err := x.resolveImage(ctx, ref, entries, req.Version)
	return &picked{lang: lang, tc: tc, ref: ref, err: err, release: release}
}

// Prepare finds the language entry and toolchain req runs with and, when
// it runs in an image (its own, or its language entry's), gets that image
// ready: pulled, unpacked, its toolchain found. The run service calls it
// before the run takes a worker, so that a pull never holds one that other
// runs wait for; Execute then uses what it found, or reports why it
// failed, without trying again.
func (x *Executor) Prepare(ctx context.Context, req *Request) {
	if x.validateImage(req) != nil {
		return // Execute refuses it
	}
	p := x.pick(ctx, req)
	// Execute holds the image again (hold): a request that never runs
	// holds none.
	p.done()
	p.release = nil
	req.picked = p
}

// storedImageToolchain is the toolchain of the image-backed entry l when
// its image is in the store already (nil otherwise: nothing is pulled).
func (x *Executor) storedImageToolchain(l *Language) *Toolchain {
	store, err := x.Images()
	if err != nil {
		return nil
	}
	img, err := store.Get(l.Image)
	if err != nil {
		return nil
	}
	root, err := store.Root(img, x.unpackLimits)
	if err != nil {
		return nil
	}
	if tc := x.imageToolchain(context.Background(), img, root, l); tc.Err == nil {
		return tc
	}
	return nil
}

// validateImage refuses a request's image that cannot be run whatever
// happens: an invalid reference.
func (x *Executor) validateImage(req *Request) error {
	if req.Image == "" {
		return nil
	}
	if _, err := images.ParseRef(req.Image); err != nil {
		return &ImageError{Ref: req.Image, Err: err}
	}
	return nil
}

// lazyStore opens the image store when it is first needed.
type lazyStore struct {
	once   sync.Once
	store  *images.Store
	dir    string
	fetch  images.Fetcher
	err    error
	log    atomic.Pointer[slog.Logger] // where the store reports evictions
	opened atomic.Pointer[images.Store]
}

// SetImageLogger has the image store report what it evicts to l (a
// server's log); by default slog's default logger hears it.
func (x *Executor) SetImageLogger(l *slog.Logger) {
	x.imageStore.log.Store(l)
	if st := x.imageStore.opened.Load(); st != nil {
		st.SetLogger(l)
	}
}

// Images returns the executor's image store, opening it if need be. The
// first call trims it to its bound (images.max_store_bytes): a restart
// with a smaller one evicts at once.
func (x *Executor) Images() (*images.Store, error) {
	s := &x.imageStore
	s.once.Do(func() {
		if s.store == nil {
			if s.store, s.err = images.Open(s.dir); s.err == nil {
				s.store.Registry = s.fetch
			}
		}
		if s.err == nil {
			if l := s.log.Load(); l != nil {
				s.store.SetLogger(l)
			}
			s.opened.Store(s.store)
			s.store.InUse = x.kernelUses
			s.store.Evicting = x.imagesEvicting
			if _, err := s.store.Trim(x.imageCaps.StoreBytes); err != nil {
				cmp.Or(s.log.Load(), slog.Default()).Warn("trimming the image store", "error", err)
			}
		}
	})
	return s.store, s.err
}

// kernelUses says whether a live interpreter session's sandbox runs in the
// image (by digest): the store never evicts it meanwhile (a run holds its
// image; a kernel lives on between cells).
func (x *Executor) kernelUses(digest string) bool {
	x.kernels.mu.Lock()
	defer x.kernels.mu.Unlock()
	for _, k := range x.kernels.live {
		if k.tc != nil && k.tc.ImageDigest == digest {
			select {
			case <-k.ended:
			default:
				return true
			}
		}
	}
	return false
}

// imagesEvicting drops the idle sandboxes before the store removes the
// unpacked trees of evicted images: a pooled sandbox has its root's
// directories bound, and an image fetched anew is unpacked to the same
// paths, which would find it and run in the emptied tree.
func (x *Executor) imagesEvicting([]string) {
	if x.engine != nil {
		x.engine.Drain()
	}
}

// imageToolchains remembers the toolchains found in images, by image
// digest and entry.
type imageToolchains struct {
	mu    sync.Mutex
	found map[string]*toolchainSlot
}

// resolveImage picks one of entries (a language's) and its toolchain
// inside the image ref, by version as Registry.Resolve does. A failure to
// get the image is an *ImageError (the request's fault) or any other error
// (a set-up failure: unreachable registry, hostile layer, full disk).
//
// The image stays held (release) until the run that picked it ends: the
// store evicts no image in use.
func (x *Executor) resolveImage(ctx context.Context, ref string, entries []*Language, version string) (_ *Language, _ *Toolchain, _ func(), err error) {
	img, root, hold, err := x.useImage(ctx, ref)
	if err != nil {
		return nil, nil, nil, err
	}
	defer func() {
		if err != nil {
			hold()
		}
	}()
	// The default entry first: a request without a version gets it when
	// the image has its toolchain.
	ordered := append([]*Language(nil), entries...)
	sort.SliceStable(ordered, func(i, j int) bool { return ordered[i].Default && !ordered[j].Default })
	version = strings.TrimSpace(version)
	var seen []string
	var firstErr error
	for _, exact := range []bool{true, false} {
		for _, l := range ordered {
			tc := x.imageToolchain(ctx, img, root, l)
			if tc.Err != nil {
				firstErr = cmpErr(firstErr, tc.Err)
				continue
			}
			v := tc.Version
			if exact {
				seen = append(seen, v)
			}
			if version == "" || v == version || !exact && (strings.HasPrefix(v, version+".") || strings.HasSuffix(v, "-"+version)) {
				return l, tc, hold, nil
			}
		}
		if version == "" {
			break
		}
	}
	name := entries[0].Name
	if len(seen) == 0 {
		return nil, nil, nil, &UnsupportedLanguageError{Language: name, Reason: fmt.Sprintf("image %s: %v", ref, firstErr)}
	}
	return nil, nil, nil, &UnsupportedLanguageError{Language: name,
		Reason: fmt.Sprintf("version %q is not in image %s (it has %s)", version, ref, strings.Join(seen, ", "))}
}

// useImage returns the image ref and its unpacked root, pulled and
// unpacked when the store lacks them, held until release is called. A
// failure is an *ImageError (an invalid reference, or one the source does
// not have) or any other error (a set-up failure: unreachable registry,
// hostile layer, full disk).
func (x *Executor) useImage(ctx context.Context, ref string) (_ *images.Image, root string, release func(), _ error) {
	if err := x.validateImage(&Request{Image: ref}); err != nil {
		return nil, "", nil, err
	}
	store, err := x.Images()
	if err != nil {
		return nil, "", nil, fmt.Errorf("image store: %w", err)
	}
	img, root, release, err := store.Use(ctx, ref, x.imageCaps, x.unpackLimits, nil)
	var unpack *images.UnpackError
	switch {
	case errors.Is(err, images.ErrUnknown):
		return nil, "", nil, &ImageError{Ref: ref, Err: err}
	case errors.As(err, &unpack):
		return nil, "", nil, fmt.Errorf("unpack %s: %w", ref, unpack.Err)
	case err != nil:
		return nil, "", nil, fmt.Errorf("pull %s: %w", ref, err)
	}
	return img, root, release, nil
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// imageToolchain finds (once per image and entry) the toolchain of l in
// the image img unpacked at root.
func (x *Executor) imageToolchain(ctx context.Context, img *images.Image, root string, l *Language) *Toolchain {
	key := img.Digest + " " + toolchainKey(l)
	x.imageTCs.mu.Lock()
	if x.imageTCs.found == nil {
		x.imageTCs.found = map[string]*toolchainSlot{}
	}
	slot, ok := x.imageTCs.found[key]
	if !ok {
		slot = &toolchainSlot{}
		x.imageTCs.found[key] = slot
	}
	x.imageTCs.mu.Unlock()
	slot.once.Do(func() { slot.tc = x.discoverInImage(ctx, img, root, l) })
	tc := *slot.tc
	// The slot is the digest's: this run names the image by its own
	// reference (another with the same content may have found it).
	tc.Root, tc.ImageRef = root, img.Ref
	if tc.Err != nil && errors.Is(tc.Err, context.Canceled) {
		// A version check cut short by its caller is tried again next time.
		x.imageTCs.mu.Lock()
		delete(x.imageTCs.found, key)
		x.imageTCs.mu.Unlock()
	}
	return &tc
}

// toolchainKey names an entry by what decides its toolchain: its name, its
// candidates and its version command.
func toolchainKey(l *Language) string {
	b, _ := json.Marshal([]any{l.Name, l.Toolchain, l.VersionCmd})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// foundInImage is what the disk remembers of a toolchain in an image.
type foundInImage struct {
	Bin     string `json:"bin"`
	Version string `json:"version"`
}

func (x *Executor) discoverInImage(ctx context.Context, img *images.Image, root string, l *Language) *Toolchain {
	tc := &Toolchain{Root: root, ImageRef: img.Ref, ImageDigest: img.Digest, ImageEnv: img.Env}
	memo := filepath.Join(x.cacheDir, "image-toolchains", strings.TrimPrefix(img.Digest, "sha256:")+"-"+toolchainKey(l)+".json")
	var f foundInImage
	if b, err := os.ReadFile(memo); err == nil && json.Unmarshal(b, &f) == nil && f.Bin != "" {
		tc.Bin, tc.Version = f.Bin, f.Version
		tc.Home = path.Dir(path.Dir(tc.Bin))
		return tc
	}
	pathDirs := imagePath(img.Env)
	tc.Bin = firstFound(l.Toolchain, func(cand string) string { return findInRoot(root, cand, pathDirs) })
	if tc.Bin == "" {
		tc.Err = fmt.Errorf("no toolchain in the image (looked for %s)", strings.Join(l.Toolchain, ", "))
		return tc
	}
	tc.Home = path.Dir(path.Dir(tc.Bin))
	if len(l.VersionCmd) > 0 {
		v, err := x.versionInImage(ctx, l, tc)
		if err != nil {
			tc.Err = err
			return tc
		}
		tc.Version = v
	}
	// Best effort: without it the check runs again in the next process.
	os.MkdirAll(filepath.Dir(memo), 0o755)
	records.WriteJSON(filepath.Dir(memo), ".tmp-", memo, foundInImage{Bin: tc.Bin, Version: tc.Version})
	return tc
}

// versionInImage runs the entry's version command in a sandbox of the
// image.
func (x *Executor) versionInImage(ctx context.Context, l *Language, tc *Toolchain) (string, error) {
	vars := map[string]string{"bin": tc.Bin, "home": tc.Home}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	spec := &sandbox.Spec{
		Args:   expandAll(l.VersionCmd, vars),
		Env:    environment(l, tc, vars, map[string]string{"JAVA_TOOL_OPTIONS": jvmNoPerfData}),
		Root:   tc.Root,
		Limits: sandbox.Limits{WallTime: 20 * time.Second, CPUTime: 20 * time.Second, Memory: 512 << 20, Processes: 64},
	}
	out, err := x.engine.Run(ctx, spec)
	if err != nil {
		return "", fmt.Errorf("version check %q in the image: %w", spec.Args, err)
	}
	if out.ExitCode != 0 || out.Limit != sandbox.LimitNone {
		return "", fmt.Errorf("version check %q in the image: exit %d %s %s: %s", spec.Args, out.ExitCode, out.Signal, out.Limit, lastLine(out.Stderr))
	}
	return versionOf(string(dropJVMNotice(append(out.Stdout, out.Stderr...)))), nil
}

// imagePath is the PATH an image's environment sets, split.
func imagePath(env []string) []string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			return filepath.SplitList(v)
		}
	}
	return nil
}

// findInRoot resolves a toolchain candidate inside the tree root as the
// sandbox would see it, returning the path inside ("" when absent): an
// absolute path, a glob (newest match first), or a bare name looked up on
// the image's PATH and then searchPath. Candidates under ~ are the host's.
func findInRoot(root, cand string, pathDirs []string) string {
	var paths []string
	switch {
	case strings.HasPrefix(cand, "~"):
		return ""
	case strings.ContainsAny(cand, "*?["):
		paths = globInRoot(root, cand)
		sort.Sort(sort.Reverse(sort.StringSlice(paths)))
	case strings.HasPrefix(cand, "/"):
		paths = []string{cand}
	default:
		for _, d := range append(append([]string(nil), pathDirs...), searchPath...) {
			if path.IsAbs(d) {
				// Not path.Join: a ".." after a link is the link's.
				paths = append(paths, strings.TrimSuffix(d, "/")+"/"+cand)
			}
		}
	}
	for _, p := range paths {
		inner, err := resolveInRoot(root, p)
		if err != nil {
			continue
		}
		fi, err := os.Lstat(filepath.Join(root, inner))
		if err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return inner
		}
	}
	return ""
}

// globInRoot expands the glob pattern (absolute) inside the tree root,
// with the directories on its way resolved inside root as well: the paths
// inside that match it.
func globInRoot(root, pattern string) []string {
	found := []string{""}
	for _, part := range strings.Split(strings.TrimPrefix(pattern, "/"), "/") {
		var next []string
		for _, dir := range found {
			if !strings.ContainsAny(part, "*?[") {
				next = append(next, dir+"/"+part)
				continue
			}
			real, err := resolveInRoot(root, cmp.Or(dir, "/"))
			if err != nil {
				continue
			}
			entries, _ := os.ReadDir(filepath.Join(root, real))
			for _, e := range entries {
				if ok, _ := path.Match(part, e.Name()); ok {
					next = append(next, dir+"/"+e.Name())
				}
			}
		}
		found = next
	}
	return found
}

// resolveInRoot follows the symlinks of p (absolute, inside the tree
// root) as the kernel would with root as "/", and returns the path inside
// with no symlink left. It never leaves root: ".." stops at it and an
// absolute link starts again from it.
func resolveInRoot(root, p string) (string, error) {
	// Not cleaned first: a ".." after a link goes up from where the link
	// leads, as in the kernel.
	todo := strings.Split(p, "/")
	cur := "/"
	for links := 0; len(todo) > 0; {
		name := todo[0]
		todo = todo[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, name)
		fi, err := os.Lstat(filepath.Join(root, next))
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if links++; links > 40 {
			return "", errors.New("too many levels of symbolic links")
		}
		target, err := os.Readlink(filepath.Join(root, next))
		if err != nil {
			return "", err
		}
		if path.IsAbs(target) {
			cur = "/"
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return cur, nil
}

// PullImage fetches ref into the image store within the configured caps
// (the admin API's pull), ahead of any run.
func (x *Executor) PullImage(ctx context.Context, ref string) (*images.Image, error) {
	store, err := x.Images()
	if err != nil {
		return nil, err
	}
	return store.Fetch(ctx, ref, x.imageCaps, x.unpackLimits, nil)
}
