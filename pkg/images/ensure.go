package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/sandbox-run/sandbox-run/internal/lib/records"
	"github.com/sandbox-run/sandbox-run/pkg/images/layer"
)

// ErrUnknown says the source has no such image: a registry that answers
// that it knows no such name, tag or digest, or a local source that does
// not exist or lacks the tag. It is the user's mistake, not the source's
// failure.
var ErrUnknown = errors.New("no such image")

// Ensure returns the image ref names, pulling it first when the store
// does not have it (docker's "missing" policy: a reference by tag is not
// looked up again once pulled; `images pull` refreshes it). A local source
// (oci:, docker-archive:) is read again when its file changed since it was
// pulled, so that a rebuilt layout or archive is what runs.
func (s *Store) Ensure(ctx context.Context, ref string, caps Caps, progress func(Progress)) (*Image, error) {
	img, _, err := s.ensure(ctx, ref, caps, progress)
	return img, err
}

// ensure is Ensure, saying whether it pulled.
func (s *Store) ensure(ctx context.Context, ref string, caps Caps, progress func(Progress)) (*Image, bool, error) {
	r, err := ParseRef(ref)
	if err != nil {
		return nil, false, err
	}
	img, err := s.Get(ref)
	switch {
	case err == nil && r.Kind == Registry:
		return img, false, nil
	case err == nil:
		if stamp, ok := sourceStamp(r); ok && stamp == s.readStamp(r) {
			return img, false, nil
		}
	case !errors.Is(err, ErrNotFound):
		return nil, false, err
	}
	img, err = s.Pull(ctx, ref, caps, progress)
	return img, err == nil, err
}

// sourceStamp tells whether a local source changed: the size, time and
// inode of its index (a layout) or of the archive.
func sourceStamp(r Ref) (string, bool) {
	p := r.Path
	if r.Kind == Layout {
		p = filepath.Join(p, "index.json")
	}
	fi, err := os.Stat(p)
	if err != nil {
		return "", false
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	var ino uint64
	if st != nil {
		ino = st.Ino
	}
	return fmt.Sprintf("%d-%d-%d", fi.Size(), fi.ModTime().UnixNano(), ino), true
}

// stampPath is where the stamp of a local source's last pull is kept.
func (s *Store) stampPath(r Ref) string {
	sum := sha256.Sum256([]byte(r.String()))
	return filepath.Join(s.dir, "sources", hex.EncodeToString(sum[:16]))
}

func (s *Store) readStamp(r Ref) string {
	b, err := os.ReadFile(s.stampPath(r))
	if err != nil {
		return ""
	}
	return string(b)
}

// writeStamp records the stamp a local source had when it was pulled
// (taken before the pull: a change during it is seen next time).
func (s *Store) writeStamp(r Ref, stamp string) error {
	if err := os.MkdirAll(filepath.Join(s.dir, "sources"), 0o755); err != nil {
		return err
	}
	return records.WriteAtomic(s.tmp, "stamp-", s.stampPath(r), func(w io.Writer) error {
		_, err := io.WriteString(w, stamp)
		return err
	})
}

// unknown marks err as ErrUnknown when a local source does not exist or
// lacks the tag (a registry's Fetcher marks its own).
func unknown(err error) error {
	if err == nil || errors.Is(err, ErrUnknown) {
		return err
	}
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errNoTag) {
		return fmt.Errorf("%w: %v", ErrUnknown, err)
	}
	return err
}

// Fetch pulls ref from its source (a tag is looked up again) and unpacks
// its root, so that the first run finds it ready: `images pull`. Then it
// trims the store to caps.StoreBytes (Trim), the image held meanwhile:
// one that alone exceeds the bound goes as soon as it is released.
func (s *Store) Fetch(ctx context.Context, ref string, caps Caps, lim layer.Limits, progress func(Progress)) (*Image, error) {
	for attempt := 0; ; attempt++ {
		img, err := s.Pull(ctx, ref, caps, progress)
		if err != nil {
			return nil, err
		}
		release, ok := s.Hold(img.Digest)
		if !ok {
			if attempt < 3 {
				continue // evicted at once by another's Trim: again
			}
			return nil, fmt.Errorf("%s: evicted from the image store as soon as it was fetched", img.Ref)
		}
		defer release()
		if _, err := s.Root(img, lim); err != nil {
			return nil, fmt.Errorf("unpack %s: %w", img.Ref, err)
		}
		s.trimLogged(caps.withDefaults().StoreBytes)
		return img, nil
	}
}
