// Package layer applies one OCI/Docker image layer, an uncompressed tar
// stream, onto a directory of the host, for use as (part of) the read-only
// root filesystem of a sandbox. Layers are untrusted: nothing an entry says
// (a "..", an absolute path, a symlink in a parent, a hard link, a
// whiteout) can make Apply read, write or remove anything outside the
// directory, and the amount written is bounded.
//
// What Apply does with each kind of entry:
//
//   - Paths are cleaned lexically; a ".." that would climb above the root
//     is refused (ErrEscape), an absolute path is taken as relative to the
//     directory ("/etc/x" is dir/etc/x), and paths longer than 4096 bytes
//     or deeper than 256 components are refused (ErrPathTooLong).
//   - Parent directories are resolved from a descriptor of the directory
//     with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS|
//     RESOLVE_NO_XDEV): a parent that is a symlink, even one pointing
//     inside the directory, is refused (ErrSymlinkParent). Missing parents
//     are created with mode 0755.
//   - Regular files, directories and symlinks replace whatever was at
//     their path (a directory tree is removed without following any
//     symlink in it), except that a directory entry over an existing
//     directory only sets its mode. Files are created with
//     O_CREAT|O_EXCL|O_NOFOLLOW.
//   - Symlinks are created with the target as given: it is only ever
//     followed inside the sandbox, where the root is the image's.
//   - A hard link must name an existing regular file inside the directory,
//     reached without symlinks (ErrBadLink otherwise); it is made with
//     linkat between descriptors, never following the target.
//   - Character and block devices, FIFOs and every other type are skipped
//     (Stats.Skipped) and leave the tree as it was (what a lower layer
//     had at that path stays); so is a hard link to a path this layer
//     skipped.
//   - Permission bits are kept; setuid and setgid are dropped everywhere
//     and sticky is kept on directories only. Directories always keep
//     u+rwx (so this and later layers can add to them and remove from
//     them without privileges). Ownership, extended attributes (file
//     capabilities included) and directory times are not applied; the
//     mtime of files and symlinks is.
//   - Whiteouts (".wh.name", and the opaque marker ".wh..wh..opq"; the
//     OCI image spec's "Representation of Changes") remove what the lower
//     layers put there, never following a symlink, and are not created.
//     Following the spec, they never remove what this same layer wrote,
//     whether it comes before or after the whiteout in the stream. Other
//     ".wh..wh." names (AUFS metadata) are skipped.
//
// Apply does not roll back: on an error, the caller removes the directory.
package layer

import (
	"errors"
	"fmt"
	"strings"
)

// Defaults for the zero Limits.
const (
	DefaultMaxBytes   int64 = 8 << 30
	DefaultMaxEntries       = 1_000_000
)

// Bounds on one entry's path (its name, or a hard link's target).
const (
	MaxPathLen   = 4096
	MaxPathDepth = 256
)

// Limits bound what one layer may unpack to.
type Limits struct {
	MaxBytes   int64 // total bytes of regular file content written (0: DefaultMaxBytes)
	MaxEntries int   // tar entries, every header counted (0: DefaultMaxEntries)
}

// withDefaults returns l with its zero (or negative) fields set to the
// defaults.
func (l Limits) withDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultMaxEntries
	}
	return l
}

// Stats count what Apply did, up to an error if there was one.
type Stats struct {
	Files     int   // regular files written
	Dirs      int   // directory entries applied
	Symlinks  int   // symlinks created
	Hardlinks int   // hard links created
	Whiteouts int   // whiteouts and opaque markers applied
	Skipped   int   // entries not created: devices, FIFOs, unknown types, AUFS metadata
	Bytes     int64 // bytes of regular file content written
}

// Errors an *EntryError may wrap (test with errors.Is).
var (
	// ErrEscape: the entry's path, a hard link's target or a whiteout's
	// target would leave the directory through "..".
	ErrEscape = errors.New("path leads outside the layer's directory")
	// ErrPathTooLong: a path is longer than MaxPathLen bytes or deeper
	// than MaxPathDepth components.
	ErrPathTooLong = errors.New("path too long or too deep")
	// ErrSymlinkParent: a parent directory of the path is a symlink (or
	// not a directory); Apply never writes, links or removes through one.
	ErrSymlinkParent = errors.New("a parent directory is a symlink or not a directory")
	// ErrBadLink: a hard link's target is missing, not a regular file, or
	// reached through a symlink.
	ErrBadLink = errors.New("hard link target is not a regular file inside the layer")
	// ErrBadEntry: the entry is malformed (an empty symlink target, a
	// non-directory entry for the root, an empty whiteout name).
	ErrBadEntry = errors.New("malformed entry")
)

// EntryError is the error of one tar entry.
type EntryError struct {
	Name string // the entry's name as given in the tar
	Err  error
}

// Error names the entry and says what was wrong with it.
func (e *EntryError) Error() string {
	return fmt.Sprintf("layer entry %q: %v", e.Name, e.Err)
}

// Unwrap returns the entry's error (ErrEscape and the like, or the
// system's).
func (e *EntryError) Unwrap() error { return e.Err }

// LimitError reports a layer that unpacks to more than its Limits allow:
// a decompression bomb, or a layer too big for the sandbox. Apply stops
// before writing past the limit.
type LimitError struct {
	Entries bool  // the entry limit, not the byte limit
	Limit   int64 // the limit exceeded
}

// Error says which limit was exceeded: "layer unpacks to more than
// 8 GiB", "layer has more than 1000000 entries".
func (e *LimitError) Error() string {
	if e.Entries {
		return fmt.Sprintf("layer has more than %d entries", e.Limit)
	}
	return "layer unpacks to more than " + sizeString(e.Limit)
}

// sizeString writes n bytes in the largest binary unit that divides it.
func sizeString(n int64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{40, "TiB"}, {30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d %s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// Whiteout names (OCI image spec, "Representation of Changes").
const (
	whiteoutPrefix = ".wh."
	whiteoutMeta   = ".wh..wh."
	whiteoutOpaque = ".wh..wh..opq"
)

// splitPath cleans a tar path into its components beneath the root: ""
// and "." are dropped, a leading "/" roots the path at the directory, and
// ".." removes the previous component, or is refused at the root.
func splitPath(name string) ([]string, error) {
	if len(name) > MaxPathLen {
		return nil, ErrPathTooLong
	}
	var comps []string
	for c := range strings.SplitSeq(name, "/") {
		switch c {
		case "", ".":
		case "..":
			if len(comps) == 0 {
				return nil, ErrEscape
			}
			comps = comps[:len(comps)-1]
		default:
			comps = append(comps, c)
		}
	}
	if len(comps) > MaxPathDepth {
		return nil, ErrPathTooLong
	}
	return comps, nil
}
