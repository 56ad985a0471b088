package secrets

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestLoadKeyFile: the key file is made on first use (0600, 32 random
// bytes, its directory 0700) and read back the same; a file others may
// read, of the wrong size, or not a file is refused.
func TestLoadKeyFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	path := filepath.Join(dir, "secrets.key")
	key, err := LoadKey(path, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(key) != KeySize || bytes.Equal(key, make([]byte, KeySize)) {
		t.Fatalf("key %x", key)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != KeySize {
		t.Fatalf("key file: %v %v", fi.Mode(), err)
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Fatalf("key directory mode %v", fi.Mode())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("left in the directory: %v", entries)
	}
	again, err := LoadKey(path, "")
	if err != nil || !bytes.Equal(again, key) {
		t.Fatalf("read back %x %v, want %x", again, err, key)
	}
	if other, _ := LoadKey(filepath.Join(dir, "other.key"), ""); bytes.Equal(other, key) {
		t.Fatal("two key files hold the same key")
	}

	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKey(path, ""); err == nil || !strings.Contains(err.Error(), "0644") {
		t.Fatalf("a 0644 key file: %v", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "short.key")
	if err := os.WriteFile(short, key[:31], 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKey(short, ""); err == nil || !strings.Contains(err.Error(), "31 bytes") {
		t.Fatalf("a 31-byte key file: %v", err)
	}
	if _, err := LoadKey(dir, ""); err == nil {
		t.Fatal("a directory as key file")
	}
	if _, err := LoadKey("", ""); err == nil {
		t.Fatal("no key at all")
	}
	blocked := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocked, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKey(filepath.Join(blocked, "secrets.key"), ""); err == nil {
		t.Fatal("a key file under a file")
	}
}

// TestLoadKeyRace: servers making the key file at once get one key.
func TestLoadKeyRace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secrets.key")
	keys := make([][]byte, 8)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			k, err := LoadKey(path, "")
			if err != nil {
				t.Error(err)
			}
			keys[i] = k
		})
	}
	wg.Wait()
	for _, k := range keys {
		if !bytes.Equal(k, keys[0]) {
			t.Fatalf("keys differ: %x %x", k, keys[0])
		}
	}
}

// TestLoadKeyConfig: a configured key, in hex or base64, comes before the
// file; one of the wrong size is refused without echoing it.
func TestLoadKeyConfig(t *testing.T) {
	want := bytes.Repeat([]byte{0xfb, 0xef, 0x01}, 11)[:KeySize]
	path := filepath.Join(t.TempDir(), "never")
	for _, s := range []string{
		hex.EncodeToString(want),
		strings.ToUpper(hex.EncodeToString(want)),
		base64.StdEncoding.EncodeToString(want),
		base64.RawStdEncoding.EncodeToString(want),
		base64.URLEncoding.EncodeToString(want),
		" " + base64.RawURLEncoding.EncodeToString(want) + "\n",
	} {
		got, err := LoadKey(path, s)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%q: %x %v", s, got, err)
		}
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatal("a key file was made")
	}
	for _, s := range []string{
		hex.EncodeToString(want[:31]),
		base64.StdEncoding.EncodeToString(want[:16]),
		base64.StdEncoding.EncodeToString(append(want, 0)),
		"not a key!",
	} {
		if _, err := LoadKey(path, s); err == nil || strings.Contains(err.Error(), s) {
			t.Errorf("%q: %v", s, err)
		}
	}
}
