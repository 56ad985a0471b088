package images

import (
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/sandbox-run/sandbox-run/pkg/images/layer"
)

// An image's root is a tree under chains/: the tree of a chain of layers
// (base first) is its parent chain's tree, copied as hard links, with the
// chain's last layer applied (pkg/images/layer) onto it. Images that share
// base layers share those chains, and the file data of every chain below
// their own; each layer is unpacked once per base it sits on. Layers
// never write into a file they did not create (Apply replaces a file by
// removing it and making a new one), so the hard links a chain shares
// with its parent are never written through. Chains are named by their
// OCI ChainID and made under tmp/, then renamed into place: a chain
// directory that exists is complete.

// Root returns the directory of img's root filesystem, unpacking what is
// not yet unpacked. It is to be mounted read-only. lim bounds the whole
// image: the bytes of file content and the entries of all its layers
// together (each chain remembers what it and the layers below it took, in
// chains/ID.json).
func (s *Store) Root(img *Image, lim layer.Limits) (string, error) {
	if len(img.Layers) == 0 {
		return "", fmt.Errorf("%s: an image without layers", img.Ref)
	}
	if lim.MaxBytes <= 0 {
		lim.MaxBytes = layer.DefaultMaxBytes
	}
	if lim.MaxEntries <= 0 {
		lim.MaxEntries = layer.DefaultMaxEntries
	}
	parent := ""
	var chain string
	var used chainUse
	for i, l := range img.Layers {
		var err error
		if chain, err = chainID(chain, l.DiffID); err != nil {
			return "", fmt.Errorf("%s: layer %d: %w", img.Ref, i, err)
		}
		dir := filepath.Join(s.dir, "chains", chain)
		left := layer.Limits{MaxBytes: lim.MaxBytes - used.Bytes, MaxEntries: lim.MaxEntries - used.Entries}
		if left.MaxBytes <= 0 || left.MaxEntries <= 0 {
			return "", fmt.Errorf("%s: layer %d (%s): %w", img.Ref, i, l.Digest, imageLimit(lim, left.MaxEntries <= 0))
		}
		if used, err = s.makeChain(dir, parent, l, left, used); err != nil {
			var le *layer.LimitError
			if errors.As(err, &le) {
				err = imageLimit(lim, le.Entries)
			}
			return "", fmt.Errorf("%s: layer %d (%s): %w", img.Ref, i, l.Digest, err)
		}
		parent = dir
	}
	return parent, nil
}

// chainUse is what a chain's layers took in all (chains/ID.json).
type chainUse struct {
	Bytes   int64 `json:"bytes"`
	Entries int   `json:"entries"`
}

// imageLimit says which of an image's unpacking limits it exceeded.
func imageLimit(lim layer.Limits, entries bool) error {
	if entries {
		return fmt.Errorf("the image's layers have more than %d entries in all (images.max_unpacked_entries)", lim.MaxEntries)
	}
	return fmt.Errorf("the image unpacks to more than %d bytes in all (images.max_unpacked_bytes)", lim.MaxBytes)
}

// chainID is the OCI ChainID of a layer with diffID on the chain parent
// ("" for the base layer), as the hex of its sha256.
func chainID(parent, diffID string) (string, error) {
	d, err := parseDigest(diffID)
	if err != nil {
		return "", err
	}
	if parent == "" {
		return d, nil
	}
	sum := sha256.Sum256([]byte("sha256:" + parent + " sha256:" + d))
	return hex.EncodeToString(sum[:]), nil
}

// parseDigest returns the hex of a sha256 digest ("sha256:HEX"); any
// other form is refused.
func parseDigest(d string) (string, error) {
	hexPart, ok := strings.CutPrefix(d, "sha256:")
	if b, err := hex.DecodeString(hexPart); !ok || err != nil || len(b) != sha256.Size {
		return "", fmt.Errorf("not a sha256 digest: %q", d)
	}
	return hexPart, nil
}

// makeChain makes the chain directory dir, unless it exists: parent's
// tree ("" for none) with the layer l applied, within lim; below is what
// the parent chain took. It returns what the chain takes in all.
func (s *Store) makeChain(dir, parent string, l Layer, lim layer.Limits, below chainUse) (chainUse, error) {
	unlock := s.lockChain(dir)
	defer unlock()
	if _, err := os.Stat(dir); err == nil {
		var use chainUse
		b, err := os.ReadFile(dir + ".json")
		if err == nil && json.Unmarshal(b, &use) == nil {
			return use, nil
		}
		return below, nil // not measured (a crash between the two): counted as nothing
	}
	return s.unpackChain(dir, parent, l, lim, below)
}

// unpackChain makes dir: parent's tree with l applied; it returns what
// the chain takes in all (below, what the parent took, and the layer).
func (s *Store) unpackChain(dir, parent string, l Layer, lim layer.Limits, below chainUse) (chainUse, error) {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return chainUse{}, err
	}
	tmp, err := os.MkdirTemp(s.tmp, "chain-")
	if err != nil {
		return chainUse{}, err
	}
	defer os.RemoveAll(tmp)
	// The tree's root is a directory of its own: tmp's mode is 0700.
	root := filepath.Join(tmp, "root")
	if parent != "" {
		if err := linkTree(parent, root); err != nil {
			return chainUse{}, fmt.Errorf("copy the layers below: %w", err)
		}
	} else if err := os.Mkdir(root, 0o755); err != nil {
		return chainUse{}, err
	}
	blob, err := s.BlobPath(l.Digest)
	if err != nil {
		return chainUse{}, err
	}
	f, err := os.Open(blob)
	if err != nil {
		return chainUse{}, err
	}
	defer f.Close()
	tar, err := decompress(bufio.NewReaderSize(f, 64<<10))
	if err != nil {
		return chainUse{}, err
	}
	defer tar.Close()
	h := sha256.New()
	st, err := layer.Apply(root, io.TeeReader(tar, h), lim)
	if err != nil {
		return chainUse{}, err
	}
	// The digest covers the whole stream, the tar's padding included.
	if _, err := io.Copy(h, tar); err != nil {
		return chainUse{}, err
	}
	if err := checkDiffID(h, l.DiffID); err != nil {
		return chainUse{}, err
	}
	use := chainUse{Bytes: below.Bytes + st.Bytes,
		Entries: below.Entries + st.Files + st.Dirs + st.Symlinks + st.Hardlinks + st.Whiteouts + st.Skipped}
	// The measure first: a chain directory that exists has one.
	if err := s.writeJSON(filepath.Join("chains", filepath.Base(dir)+".json"), use); err != nil {
		return chainUse{}, err
	}
	return use, os.Rename(root, dir)
}

// lockChain serializes the making of one chain directory.
func (s *Store) lockChain(dir string) (unlock func()) {
	s.mu.Lock()
	if s.chains == nil {
		s.chains = map[string]chan struct{}{}
	}
	for {
		busy, ok := s.chains[dir]
		if !ok {
			break
		}
		s.mu.Unlock()
		<-busy
		s.mu.Lock()
	}
	done := make(chan struct{})
	s.chains[dir] = done
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.chains, dir)
		s.mu.Unlock()
		close(done)
	}
}

func checkDiffID(h hash.Hash, diffID string) error {
	want, err := parseDigest(diffID)
	if err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("the layer's content does not match its diff id (got sha256:%s)", got)
	}
	return nil
}

// decompress reads a layer blob: gzip, zstd or a plain tar, told apart by
// their first bytes (what the media type says is not trusted).
func decompress(r *bufio.Reader) (io.ReadCloser, error) {
	magic, _ := r.Peek(4)
	switch {
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		z, err := gzip.NewReader(r)
		if err != nil {
			return nil, err
		}
		return z, nil
	case len(magic) == 4 && magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f && magic[3] == 0xfd:
		z, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		return z.IOReadCloser(), nil
	}
	return io.NopCloser(r), nil
}

// linkTree copies the tree src to dst (which must not exist): directories
// made anew with their modes, symlinks recreated, everything else hard
// linked. It never follows a symlink.
func linkTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			info, err := d.Info()
			if err != nil {
				return err
			}
			if err := os.Mkdir(target, 0o700); err != nil {
				return err
			}
			return os.Chmod(target, info.Mode().Perm()|info.Mode()&fs.ModeSticky|0o700)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			return os.Link(path, target)
		}
		return errors.New(path + ": neither a directory, a file nor a symlink")
	})
}
