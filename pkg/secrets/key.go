package secrets

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// LoadKey returns the server key: from hexOrBase64 when it is not empty
// (KeySize bytes as 64 hex digits or in base64), else from the file at
// path, which it makes on first use with KeySize random bytes, mode 0600,
// in a directory it makes 0700. A key of the wrong size, or a key file
// that group or others may access, is an error saying so; an error never
// holds the key.
func LoadKey(path, hexOrBase64 string) ([]byte, error) {
	if s := strings.TrimSpace(hexOrBase64); s != "" {
		return parseKey(s)
	}
	if path == "" {
		return nil, errors.New("secrets: no key and no key file")
	}
	key, err := readKey(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	if err := makeKey(path); err != nil {
		return nil, fmt.Errorf("secrets: make key file: %w", err)
	}
	return readKey(path)
}

// parseKey decodes a configured key.
func parseKey(s string) ([]byte, error) {
	if len(s) == 2*KeySize {
		if key, err := hex.DecodeString(s); err == nil {
			return key, nil
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if key, err := enc.DecodeString(s); err == nil {
			if len(key) != KeySize {
				return nil, fmt.Errorf("secrets: the configured key has %d bytes, want %d (64 hex digits or base64)", len(key), KeySize)
			}
			return key, nil
		}
	}
	return nil, fmt.Errorf("secrets: the configured key is neither 64 hex digits nor base64 of %d bytes", KeySize)
}

// readKey reads the key file at path.
func readKey(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	switch {
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("secrets: key file %s is not a regular file", path)
	case fi.Mode().Perm()&0o077 != 0:
		return nil, fmt.Errorf("secrets: key file %s has mode %04o: group and others must have no access (chmod 600)", path, fi.Mode().Perm())
	case fi.Size() != KeySize:
		return nil, fmt.Errorf("secrets: key file %s holds %d bytes, want %d", path, fi.Size(), KeySize)
	}
	key := make([]byte, KeySize)
	if _, err := io.ReadFull(f, key); err != nil {
		return nil, fmt.Errorf("secrets: key file %s: %w", path, err)
	}
	return key, nil
}

// makeKey writes a new random key at path unless a file is there: into a
// synced temporary file linked at path, so that a key is never seen half
// written and two servers starting at once agree on one.
func makeKey(path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".key-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	key := make([]byte, KeySize)
	rand.Read(key)
	_, err = tmp.Write(key)
	clear(key)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}
