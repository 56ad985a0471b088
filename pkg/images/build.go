package images

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/match"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/sys/unix"
)

// DefaultPath is the PATH an imported image sets when its environment
// names none (docker's default for images without one).
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// whiteoutName begins the names that mark deletions in a layer (the OCI
// image spec's whiteouts): a file so named is left out of an import.
const whiteoutName = ".wh."

// ErrImport is what the errors of ImportPath and ImportTar are (errors.Is)
// when they are the input's fault: a source that does not exist, cannot
// be read or is neither a directory nor a tar archive, an archive entry
// that climbs out of the root, an output that is not an OCI layout (or an
// empty directory), bad options.
var ErrImport = errors.New("cannot import")

// inputError is an error that is the input's fault: it is ErrImport.
type inputError struct{ err error }

func (e inputError) Error() string        { return e.err.Error() }
func (e inputError) Unwrap() error        { return e.err }
func (e inputError) Is(target error) bool { return target == ErrImport }

func input(err error) error { return inputError{err} }

func inputf(format string, a ...any) error { return inputError{fmt.Errorf(format, a...)} }

// ImportOptions says how ImportPath and ImportTar make an image.
type ImportOptions struct {
	// Env is the environment the image config sets (K=V); without a PATH
	// it gets DefaultPath.
	Env []string
	// WorkingDir, if set, is the image config's working directory (an
	// absolute path). sandbox-run's own runs start in /work regardless.
	WorkingDir string
	// KeepOwners keeps the uid and gid of every entry; otherwise they are
	// 0 (root), whoever owns the files on the host.
	KeepOwners bool
	// MTime, if set, is the mtime of every entry and the image's creation
	// time; otherwise entries keep their own (in whole seconds: a
	// Python's .pyc files stay valid) and the image says it was created
	// at the Unix epoch.
	MTime *time.Time
	// Warn, if set, hears of each entry left out of the layer (a socket, a
	// device, a name the image format reserves, the contents of a mount
	// point).
	Warn func(string)
}

// Imported is the image ImportPath or ImportTar wrote.
type Imported struct {
	// Ref is the reference that names it: oci:DIR:TAG.
	Ref string `json:"ref"`
	// Digest is its manifest's digest, Layer its one layer's (as
	// stored, gzip-compressed), Size that layer's bytes.
	Digest string `json:"digest"`
	Layer  string `json:"layer"`
	Size   int64  `json:"size"`
	// Entries is how many entries the layer has; Skipped, what was left
	// out of it and why.
	Entries int      `json:"entries"`
	Skipped []string `json:"skipped,omitempty"`
}

// ImportPath makes a one-layer image of src, a directory (a root
// filesystem tree) or a tar archive of one (plain, gzip or zstd, told
// apart by their first bytes), and writes it to the OCI image layout dst
// names (oci:DIR[:TAG]; TAG defaults to "latest"): a new layout, or one
// that exists, which gets the tag added (or moved to the new image).
//
// From a directory the layer is built in sorted order, with symlinks
// stored as symlinks (never followed), hard links as hard links, modes and
// mtimes kept, owners 0 unless opts.KeepOwners, and nothing below a mount
// point: the same tree (names, contents, modes, mtimes) always gives the
// same digest, and with opts.MTime set so does a copy of it. Sockets and devices
// are left out (opts.Warn hears of them), and so is dst's directory when
// it lies inside the tree.
func ImportPath(ctx context.Context, src string, dst Ref, opts ImportOptions) (*Imported, error) {
	fi, err := os.Stat(src)
	if err != nil {
		return nil, input(err)
	}
	if fi.IsDir() {
		return importTo(ctx, dst, opts, func(w *layerWriter, out os.FileInfo) error {
			return w.addTree(src, out)
		})
	}
	if !fi.Mode().IsRegular() {
		return nil, inputf("%s is neither a directory nor a tar archive", src)
	}
	f, err := os.Open(src)
	if err != nil {
		return nil, input(err)
	}
	defer f.Close()
	return ImportTar(ctx, f, src, dst, opts)
}

// ImportTar is ImportPath of a tar archive read from r (name says where it
// comes from, in errors). Entry names are cleaned ("./etc", "/etc" are
// "etc"); an entry that would climb out of the root ("../x"), lies below a
// symlink of the archive, or is a hard link to no earlier file is an error
// that is ErrImport (errors.Is), and nothing is written. Owners and mtimes are
// treated as ImportPath treats a tree's; devices are left out.
func ImportTar(ctx context.Context, r io.Reader, name string, dst Ref, opts ImportOptions) (*Imported, error) {
	return importTo(ctx, dst, opts, func(w *layerWriter, _ os.FileInfo) error {
		return w.addTar(r, name)
	})
}

// importTo writes to dst the image of the layer add fills (out is dst's
// directory, for a tree to leave out).
func importTo(ctx context.Context, dst Ref, opts ImportOptions, add func(w *layerWriter, out os.FileInfo) error) (_ *Imported, err error) {
	if dst.Kind != Layout {
		return nil, inputf("the image is written as an OCI image layout: name it oci:/DIR[:TAG], not %s", dst)
	}
	if dst.Tag == "" {
		dst.Tag = "latest"
	}
	cfg, err := importConfig(opts)
	if err != nil {
		return nil, err
	}
	dir := dst.Path
	lock, made, err := openLayoutDir(dir)
	if err != nil {
		return nil, err
	}
	defer lock.Close() // and with it the lock, after undo
	fresh, err := inspectLayout(dir)
	if err != nil {
		if made != "" {
			os.RemoveAll(made)
		}
		return nil, err
	}
	// What a failed import made is removed: the directories it made, or
	// what it put in an empty one; an existing layout only loses the
	// layer being written (w.abort).
	undo := func() {}
	switch {
	case made != "":
		undo = func() { os.RemoveAll(made) }
	case fresh:
		undo = func() {
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				os.RemoveAll(filepath.Join(dir, e.Name()))
			}
		}
	}
	defer func() {
		if err != nil {
			undo()
		}
	}()
	out, err := lock.Stat()
	if err != nil {
		return nil, err
	}
	w, err := newLayerWriter(ctx, filepath.Join(dir, "blobs", "sha256"), opts)
	if err != nil {
		return nil, err
	}
	defer w.abort()
	if err := add(w, out); err != nil {
		return nil, err
	}
	l, err := w.finish()
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: l, MediaType: types.OCILayer,
		History: v1.History{Created: cfg.Created, CreatedBy: "sandbox-run images import"}})
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(mutate.MediaType(img, types.OCIManifestSchema1), types.OCIConfigJSON)
	base, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg.History, cfg.RootFS = base.History, base.RootFS
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return nil, err
	}
	p := layout.Path(dir)
	if fresh {
		if p, err = layout.Write(dir, empty.Index); err != nil {
			return nil, err
		}
	}
	if err := p.WriteImage(img); err != nil {
		return nil, err
	}
	if err := tagInLayout(p, img, dst.Tag); err != nil {
		return nil, err
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, err
	}
	return &Imported{Ref: dst.String(), Digest: digest.String(), Layer: w.digest.String(), Size: w.size,
		Entries: w.entries, Skipped: w.skipped}, nil
}

// importConfig is the config file of an imported image, but for its
// layers.
func importConfig(opts ImportOptions) (*v1.ConfigFile, error) {
	created := time.Unix(0, 0).UTC()
	if opts.MTime != nil {
		created = opts.MTime.UTC().Truncate(time.Second)
	}
	env := []string{}
	hasPath := false
	for _, kv := range opts.Env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsAny(kv, "\x00") {
			return nil, inputf("an environment variable is NAME=VALUE, not %q", kv)
		}
		hasPath = hasPath || k == "PATH"
		env = append(env, kv)
	}
	if !hasPath {
		env = append([]string{"PATH=" + DefaultPath}, env...)
	}
	if wd := opts.WorkingDir; wd != "" && !path.IsAbs(wd) {
		return nil, inputf("the working directory must be an absolute path, not %q", wd)
	}
	return &v1.ConfigFile{
		Architecture: Platform.Architecture,
		OS:           Platform.OS,
		Created:      v1.Time{Time: created},
		Config:       v1.Config{Env: env, WorkingDir: opts.WorkingDir},
	}, nil
}

// openLayoutDir opens dir, made if missing, and locks it against other
// imports. made is the first directory it made (dir or an ancestor), ""
// when dir existed.
func openLayoutDir(dir string) (lock *os.File, made string, err error) {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		made = dir
		for {
			parent := filepath.Dir(made)
			if _, err := os.Lstat(parent); err == nil || parent == made {
				break
			}
			made = parent
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, "", err
		}
	case err != nil:
		return nil, "", err
	case !fi.IsDir():
		return nil, "", inputf("%s is not a directory", dir)
	}
	if lock, err = os.Open(dir); err == nil {
		if err = unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
			lock.Close()
			err = fmt.Errorf("lock %s: %w", dir, err)
		}
	}
	if err != nil {
		if made != "" {
			os.RemoveAll(made)
		}
		return nil, "", err
	}
	return lock, made, nil
}

// inspectLayout says whether dir (locked) is empty (fresh) or an OCI
// image layout already; anything else is an error.
func inspectLayout(dir string) (fresh bool, err error) {
	if _, err := os.Stat(filepath.Join(dir, "index.json")); err == nil {
		lp, err := layout.FromPath(dir)
		if err == nil {
			_, err = lp.ImageIndex()
		}
		if err != nil {
			return false, inputf("%s is not a usable OCI image layout: %w", dir, err)
		}
		return false, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	if len(entries) > 0 {
		return false, inputf("%s is neither empty nor an OCI image layout (it has no index.json)", dir)
	}
	return true, nil
}

// tagInLayout points tag at img in the layout's index (img's blobs are in
// already), keeping every other image; index.json is replaced atomically,
// so that a reader (a server using the layout) sees the old index or the
// new one. The blobs of the image the tag named before that no other
// image of the layout uses are removed.
func tagInLayout(p layout.Path, img v1.Image, tag string) error {
	idx, err := p.ImageIndex()
	if err != nil {
		return err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	tagged := match.Annotation(refNameAnnotation, tag)
	var old []v1.Hash
	for _, d := range m.Manifests {
		if tagged(d) && d.MediaType.IsImage() {
			if blobs, err := imageBlobs(idx, d); err == nil {
				old = append(old, blobs...)
			}
		}
	}
	idx = mutate.AppendManifests(mutate.RemoveManifests(idx, tagged),
		mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Annotations: map[string]string{refNameAnnotation: tag},
			Platform:    &v1.Platform{OS: Platform.OS, Architecture: Platform.Architecture},
		}})
	raw, err := idx.RawManifest()
	if err != nil {
		return err
	}
	if err := replaceFile(filepath.Join(string(p), "index.json"), raw); err != nil {
		return err
	}
	if len(old) == 0 {
		return nil
	}
	// What every image left uses is kept; when one cannot be read (an
	// index whose images are elsewhere), nothing is removed.
	keep := map[v1.Hash]bool{}
	if m, err = idx.IndexManifest(); err != nil {
		return nil
	}
	for _, d := range m.Manifests {
		blobs, err := reachable(idx, d, 0)
		if err != nil {
			return nil
		}
		for _, h := range blobs {
			keep[h] = true
		}
	}
	for _, h := range old {
		if !keep[h] {
			p.RemoveBlob(h)
		}
	}
	return nil
}

// imageBlobs lists the blobs of the image d of idx: its manifest, config
// and layers.
func imageBlobs(idx v1.ImageIndex, d v1.Descriptor) ([]v1.Hash, error) {
	img, err := idx.Image(d.Digest)
	if err != nil {
		return nil, err
	}
	im, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	blobs := []v1.Hash{d.Digest, im.Config.Digest}
	for _, l := range im.Layers {
		blobs = append(blobs, l.Digest)
	}
	return blobs, nil
}

// reachable lists the blobs d of idx leads to.
func reachable(idx v1.ImageIndex, d v1.Descriptor, depth int) ([]v1.Hash, error) {
	switch {
	case d.MediaType.IsImage():
		return imageBlobs(idx, d)
	case d.MediaType.IsIndex() && depth < 4:
		inner, err := idx.ImageIndex(d.Digest)
		if err != nil {
			return nil, err
		}
		m, err := inner.IndexManifest()
		if err != nil {
			return nil, err
		}
		blobs := []v1.Hash{d.Digest}
		for _, c := range m.Manifests {
			more, err := reachable(inner, c, depth+1)
			if err != nil {
				return nil, err
			}
			blobs = append(blobs, more...)
		}
		return blobs, nil
	}
	return nil, fmt.Errorf("cannot follow %s", d.MediaType)
}

// replaceFile writes data to name atomically, readable by all.
func replaceFile(name string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(name), ".index-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), name)
}

// layerWriter writes a layer's tar, gzip-compressed, into a temporary
// file among the layout's blobs, hashing it on the way (the diff id before
// compression, the digest after).
type layerWriter struct {
	ctx     context.Context // ends the import early
	opts    ImportOptions
	blobs   string
	file    *os.File
	buf     *bufio.Writer
	zw      *gzip.Writer
	tw      *tar.Writer
	diffH   hash.Hash
	blobH   hash.Hash
	size    int64
	digest  v1.Hash
	diffID  v1.Hash
	entries int
	skipped []string
	done    bool
}

func newLayerWriter(ctx context.Context, blobs string, opts ImportOptions) (*layerWriter, error) {
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(blobs, ".import-*")
	if err != nil {
		return nil, err
	}
	w := &layerWriter{ctx: ctx, opts: opts, blobs: blobs, file: f, diffH: sha256.New(), blobH: sha256.New()}
	w.buf = bufio.NewWriterSize(io.MultiWriter(f, w.blobH, &byteCounter{&w.size}), 1<<20)
	// The fastest level: the layer is read on this machine, where time
	// counts more than bytes. Go's gzip writes no name or time in its
	// header, so the same tar always compresses to the same blob.
	w.zw, _ = gzip.NewWriterLevel(w.buf, gzip.BestSpeed)
	w.tw = tar.NewWriter(io.MultiWriter(w.zw, w.diffH))
	return w, nil
}

type byteCounter struct{ n *int64 }

func (c *byteCounter) Write(p []byte) (int, error) {
	*c.n += int64(len(p))
	return len(p), nil
}

// skip records an entry left out.
func (w *layerWriter) skip(name, why string) {
	msg := name + ": " + why
	w.skipped = append(w.skipped, msg)
	if w.opts.Warn != nil {
		w.opts.Warn(msg)
	}
}

// write writes the entry h (whose Name, Typeflag, Mode, Uid, Gid,
// ModTime, Linkname and Size are set) with the content r, normalised:
// only those fields, the mode's permission bits, owners 0 unless kept,
// mtime in whole seconds or opts.MTime.
func (w *layerWriter) write(h *tar.Header, r io.Reader) error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	hdr := &tar.Header{Typeflag: h.Typeflag, Name: h.Name, Linkname: h.Linkname, Size: h.Size,
		Mode: h.Mode & 0o7777, ModTime: h.ModTime.Truncate(time.Second)}
	if w.opts.KeepOwners {
		hdr.Uid, hdr.Gid = h.Uid, h.Gid
	}
	if w.opts.MTime != nil {
		hdr.ModTime = w.opts.MTime.Truncate(time.Second)
	}
	if hdr.ModTime.Unix() < 0 {
		hdr.ModTime = time.Unix(0, 0)
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		hdr.Name += "/"
		hdr.Size = 0
	case tar.TypeReg:
	default:
		hdr.Size = 0
	}
	if err := w.tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("%s: %w", h.Name, err)
	}
	w.entries++
	if hdr.Size > 0 {
		n, err := io.Copy(w.tw, sourceReader{io.LimitReader(r, hdr.Size)})
		if err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
		if n < hdr.Size {
			return inputf("%s: shorter than it said (%d of %d bytes)", h.Name, n, hdr.Size)
		}
	}
	return nil
}

// sourceReader marks the errors of reading the source as ErrImport (those
// of writing the layer are not).
type sourceReader struct{ r io.Reader }

func (s sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		err = input(err)
	}
	return n, err
}

// finish completes the layer, moves it to its place among the blobs, and
// returns it.
func (w *layerWriter) finish() (v1.Layer, error) {
	err := w.tw.Close()
	if err == nil {
		err = w.zw.Close()
	}
	if err == nil {
		err = w.buf.Flush()
	}
	if err == nil {
		err = w.file.Chmod(0o644)
	}
	if err == nil {
		err = w.file.Sync()
	}
	if cerr := w.file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("writing the layer: %w", err)
	}
	w.digest = v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(w.blobH.Sum(nil))}
	w.diffID = v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(w.diffH.Sum(nil))}
	blob := filepath.Join(w.blobs, w.digest.Hex)
	if err := os.Rename(w.file.Name(), blob); err != nil {
		return nil, err
	}
	w.done = true
	return partial.CompressedToLayer(&builtLayer{path: blob, digest: w.digest, diffID: w.diffID, size: w.size})
}

// abort removes the temporary file of a layer not finished.
func (w *layerWriter) abort() {
	if !w.done {
		w.file.Close()
		os.Remove(w.file.Name())
	}
}

// builtLayer is a layer finish wrote: its blob, and the hashes taken
// while it was written (not read again).
type builtLayer struct {
	path           string
	digest, diffID v1.Hash
	size           int64
}

func (l *builtLayer) Digest() (v1.Hash, error)            { return l.digest, nil }
func (l *builtLayer) DiffID() (v1.Hash, error)            { return l.diffID, nil }
func (l *builtLayer) Size() (int64, error)                { return l.size, nil }
func (l *builtLayer) MediaType() (types.MediaType, error) { return types.OCILayer, nil }
func (l *builtLayer) Compressed() (io.ReadCloser, error)  { return os.Open(l.path) }

// devIno identifies a file on the host.
type devIno struct{ dev, ino uint64 }

// addTree adds the tree under root, in sorted order, leaving out the
// directory out (the layout being written, if it lies inside).
func (w *layerWriter) addTree(root string, out os.FileInfo) error {
	root, err := filepath.EvalSymlinks(root) // the tree a symlink names
	if err != nil {
		return input(err)
	}
	rootInfo, err := os.Stat(root)
	if err != nil {
		return input(err)
	}
	rootDev := uint64(rootInfo.Sys().(*syscall.Stat_t).Dev)
	outID := devIno{}
	if st, ok := out.Sys().(*syscall.Stat_t); ok {
		outID = devIno{uint64(st.Dev), st.Ino}
	}
	links := map[devIno]string{} // files with more than one link: the first name
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return input(err)
		}
		if p == root {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return input(err)
		}
		name := filepath.ToSlash(rel)
		fi, err := os.Lstat(p)
		if err != nil {
			return input(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		id := devIno{uint64(st.Dev), st.Ino}
		base := path.Base(name)
		if strings.HasPrefix(base, whiteoutName) {
			w.skip(name, "names beginning "+whiteoutName+" mark deletions in image layers")
			if fi.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		h := &tar.Header{Name: name, Mode: int64(fi.Mode().Perm()), ModTime: fi.ModTime(),
			Uid: int(st.Uid), Gid: int(st.Gid)}
		if fi.Mode()&fs.ModeSetuid != 0 {
			h.Mode |= 0o4000
		}
		if fi.Mode()&fs.ModeSetgid != 0 {
			h.Mode |= 0o2000
		}
		if fi.Mode()&fs.ModeSticky != 0 {
			h.Mode |= 0o1000
		}
		switch mode := fi.Mode(); {
		case mode.IsDir():
			if id == outID {
				w.skip(name, "the image layout being written")
				return filepath.SkipDir
			}
			h.Typeflag = tar.TypeDir
			if err := w.write(h, nil); err != nil {
				return err
			}
			if uint64(st.Dev) != rootDev {
				w.skip(name, "a mount point (another file system): its contents are left out")
				return filepath.SkipDir
			}
			return nil
		case mode&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return input(err)
			}
			h.Typeflag, h.Linkname = tar.TypeSymlink, target
			return w.write(h, nil)
		case mode&fs.ModeNamedPipe != 0:
			h.Typeflag = tar.TypeFifo
			return w.write(h, nil)
		case mode&fs.ModeSocket != 0:
			w.skip(name, "a socket")
			return nil
		case mode&fs.ModeDevice != 0:
			w.skip(name, "a device")
			return nil
		case !mode.IsRegular():
			w.skip(name, "not a regular file, directory or symlink")
			return nil
		}
		if st.Nlink > 1 {
			if first, ok := links[id]; ok {
				h.Typeflag, h.Linkname = tar.TypeLink, first
				return w.write(h, nil)
			}
			links[id] = name
		}
		f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			return input(err)
		}
		defer f.Close()
		if fi, err = f.Stat(); err != nil {
			return input(err)
		}
		if !fi.Mode().IsRegular() {
			return input(fmt.Errorf("%s: changed while it was read", p))
		}
		h.Typeflag, h.Size = tar.TypeReg, fi.Size()
		return w.write(h, f)
	})
}

// addTar adds the entries of the tar archive read from r, decompressed.
func (w *layerWriter) addTar(r io.Reader, name string) error {
	br := bufio.NewReaderSize(r, 1<<16)
	magic, _ := br.Peek(6)
	for _, c := range []struct {
		magic, what, how string
	}{{"\xfd7zXZ\x00", "xz", "xz -d"}, {"BZh", "bzip2", "bunzip2"}} {
		if strings.HasPrefix(string(magic), c.magic) {
			return inputf("%s is %s-compressed: decompress it first (%s), or use gzip or zstd", name, c.what, c.how)
		}
	}
	rc, err := decompress(br)
	if err != nil {
		return inputf("%s: %w", name, err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	symlinks := map[string]bool{} // entries that are symlinks, by cleaned name
	files := map[string]bool{}    // entries that are regular files
	for n := 0; ; n++ {
		hdr, err := tr.Next()
		if err == io.EOF && n > 0 {
			return nil
		}
		if (err == io.EOF || err != nil && !errors.Is(err, tar.ErrInsecurePath)) && n == 0 {
			return inputf("%s is neither a directory nor a tar archive (plain, gzip or zstd), or is an empty one", name)
		}
		if err != nil && !errors.Is(err, tar.ErrInsecurePath) {
			return inputf("%s: reading the archive: %w", name, err)
		}
		entry, ok := cleanEntryName(hdr.Name)
		if !ok {
			return inputf("%s: the entry %q climbs out of the root", name, hdr.Name)
		}
		for d := path.Dir(entry); entry != "" && d != "."; d = path.Dir(d) {
			if symlinks[d] {
				return inputf("%s: the entry %q lies below the symlink %q", name, hdr.Name, d)
			}
		}
		if entry == "" {
			if hdr.Typeflag != tar.TypeDir {
				return inputf("%s: the entry %q names the root but is not a directory", name, hdr.Name)
			}
			continue // the root's mode is the image's to choose
		}
		if strings.HasPrefix(path.Base(entry), whiteoutName) {
			w.skip(entry, "names beginning "+whiteoutName+" mark deletions in image layers")
			continue
		}
		h := &tar.Header{Name: entry, Mode: hdr.Mode, ModTime: hdr.ModTime, Uid: hdr.Uid, Gid: hdr.Gid,
			Linkname: hdr.Linkname, Size: hdr.Size}
		switch hdr.Typeflag {
		case tar.TypeReg, tar.TypeRegA, tar.TypeGNUSparse:
			h.Typeflag = tar.TypeReg
		case tar.TypeDir, tar.TypeSymlink, tar.TypeFifo:
			h.Typeflag = hdr.Typeflag
		case tar.TypeLink:
			target, ok := cleanEntryName(hdr.Linkname)
			if !ok || target == "" {
				return inputf("%s: the hard link %q to %q climbs out of the root", name, hdr.Name, hdr.Linkname)
			}
			if !files[target] {
				return inputf("%s: the hard link %q is to %q, which no earlier entry makes a file", name, hdr.Name, hdr.Linkname)
			}
			h.Typeflag, h.Linkname = tar.TypeLink, target
		case tar.TypeChar, tar.TypeBlock:
			w.skip(entry, "a device")
			continue
		default:
			w.skip(entry, fmt.Sprintf("an entry of type %q", hdr.Typeflag))
			continue
		}
		delete(symlinks, entry)
		delete(files, entry)
		switch h.Typeflag {
		case tar.TypeSymlink:
			symlinks[entry] = true
		case tar.TypeReg, tar.TypeLink:
			files[entry] = true
		}
		if err := w.write(h, tr); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
}

// cleanEntryName is a tar entry's name relative to the root ("" for the
// root): "" and "." components dropped, a leading "/" ignored, ".."
// removing the component before it. ok is false when a ".." would climb
// above the root.
func cleanEntryName(name string) (clean string, ok bool) {
	var comps []string
	for c := range strings.SplitSeq(name, "/") {
		switch c {
		case "", ".":
		case "..":
			if len(comps) == 0 {
				return "", false
			}
			comps = comps[:len(comps)-1]
		default:
			comps = append(comps, c)
		}
	}
	return strings.Join(comps, "/"), true
}
