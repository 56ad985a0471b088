package secrets

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func testKey(b byte) []byte { return bytes.Repeat([]byte{b}, KeySize) }

func newStore(t *testing.T, b Backend, key []byte) *Store {
	t.Helper()
	s, err := New(b, key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// clock is a test clock that moves a second at each reading.
func clock(s *Store) {
	t := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	s.now = func() time.Time { t = t.Add(time.Second); return t }
}

func put(t *testing.T, s *Store, owner, name, value string, hosts ...string) Secret {
	t.Helper()
	sec, err := s.Put(owner, Secret{Name: name, Value: value, Hosts: hosts})
	if err != nil {
		t.Fatalf("put %s: %v", name, err)
	}
	return sec
}

// TestRoundTrip: secrets are stored, listed sorted without values, got in
// the order asked with values, replaced (Created kept, Updated moved) and
// deleted; the last deletion removes the owner's file.
func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, Dir(dir), testKey(1))
	clock(s)
	b := put(t, s, "alice", "B_TOKEN", "bee", "API.Example.com:0443", "api.example.com:443")
	if b.Value != "" || !slices.Equal(b.Hosts, []string{"api.example.com:443"}) || !b.Created.Equal(b.Updated) || b.Created.IsZero() {
		t.Fatalf("put returned %+v", b)
	}
	a, err := s.Put("alice", Secret{Name: "A_KEY", Value: "ay", Hosts: []string{"*.example.com"}, Header: &Header{Name: "Authorization", Format: "Bearer {value}"}})
	if err != nil {
		t.Fatal(err)
	}
	list, err := s.List("alice")
	if err != nil || len(list) != 2 || list[0].Name != "A_KEY" || list[1].Name != "B_TOKEN" || list[0].Value != "" || list[1].Value != "" {
		t.Fatalf("list: %+v %v", list, err)
	}
	if list[0].Header == nil || *list[0].Header != (Header{"Authorization", "Bearer {value}"}) {
		t.Fatalf("header: %+v", list[0].Header)
	}
	got, err := s.Get("alice", []string{"B_TOKEN", "A_KEY"})
	if err != nil || len(got) != 2 || got[0].Value != "bee" || got[1].Value != "ay" || got[1].Hosts[0] != "*.example.com" {
		t.Fatalf("get: %+v %v", got, err)
	}
	if got, err := s.Get("alice", nil); err != nil || len(got) != 0 {
		t.Fatalf("get of nothing: %+v %v", got, err)
	}

	a2, err := s.Put("alice", Secret{Name: "A_KEY", Value: "ay2", Hosts: []string{"api.example.org"}})
	if err != nil {
		t.Fatal(err)
	}
	if !a2.Created.Equal(a.Created) || !a2.Updated.After(a.Updated) || a2.Header != nil {
		t.Fatalf("replace: was %+v, now %+v", a, a2)
	}
	if got, err := s.Get("alice", []string{"A_KEY"}); err != nil || got[0].Value != "ay2" || !got[0].Created.Equal(a.Created) || !got[0].Updated.Equal(a2.Updated) {
		t.Fatalf("get after replace: %+v %v", got, err)
	}

	if err := s.Delete("alice", "A_KEY"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get("alice", []string{"B_TOKEN", "A_KEY"}); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `"A_KEY"`) {
		t.Fatalf("get of a deleted secret: %v", err)
	}
	if err := s.Delete("alice", "A_KEY"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if err := s.Delete("alice", "B_TOKEN"); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("files left after the last delete: %v", entries)
	}
	if list, err := s.List("alice"); err != nil || len(list) != 0 {
		t.Fatalf("list after delete: %+v %v", list, err)
	}
}

// TestOwners: an owner sees, gets and deletes only its own secrets; the
// owner "" is an owner like the others.
func TestOwners(t *testing.T) {
	s := newStore(t, Dir(t.TempDir()), testKey(1))
	put(t, s, "a", "TOKEN", "a's", "a.example.com")
	put(t, s, "", "TOKEN", "nobody's", "n.example.com")
	put(t, s, "", "OTHER", "x", "n.example.com")
	if list, err := s.List("b"); err != nil || len(list) != 0 {
		t.Fatalf("b lists %+v %v", list, err)
	}
	if _, err := s.Get("b", []string{"TOKEN"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("b gets a's secret: %v", err)
	}
	if err := s.Delete("b", "TOKEN"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("b deletes a's secret: %v", err)
	}
	if _, err := s.Get("a", []string{"OTHER"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a gets another owner's secret: %v", err)
	}
	for owner, want := range map[string]string{"a": "a's", "": "nobody's"} {
		got, err := s.Get(owner, []string{"TOKEN"})
		if err != nil || got[0].Value != want {
			t.Fatalf("owner %q: %+v %v", owner, got, err)
		}
	}
	if list, _ := s.List(""); len(list) != 2 {
		t.Fatalf("owner \"\" lists %+v", list)
	}
}

// encodings are the forms in which a value must not be found on disk:
// itself, its hex, and its base64 at each alignment (with 0, 1 or 2 bytes
// before it), trimmed of the characters its neighbours change.
func encodings(v []byte) []string {
	out := []string{string(v), hex.EncodeToString(v), strings.ToUpper(hex.EncodeToString(v))}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		for pre := range 3 {
			s := enc.EncodeToString(append(make([]byte, pre), v...))
			out = append(out, s[3:len(s)-3])
		}
	}
	return out
}

// leaks returns the files under dir whose name or content holds one of
// needles' encodings, or whose mode is not 0600 (0700 for a directory).
func leaks(t *testing.T, dir string, needles ...string) []string {
	t.Helper()
	var bad []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if want := fs.FileMode(0o600); d.IsDir() && fi.Mode().Perm() != 0o700 || !d.IsDir() && fi.Mode().Perm() != want {
			bad = append(bad, fmt.Sprintf("%s: mode %v", path, fi.Mode()))
		}
		data := []byte(path)
		if !d.IsDir() {
			content, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			data = append(data, content...)
		}
		for _, n := range needles {
			for _, e := range encodings([]byte(n)) {
				if bytes.Contains(data, []byte(e)) {
					bad = append(bad, fmt.Sprintf("%s holds %q", path, e))
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return bad
}

// TestNothingOnDisk: neither a value nor its owner is found on disk in any
// encoding; files are 0600 in a 0700 directory; a Secret marshals without
// its value.
func TestNothingOnDisk(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "secrets")
	const owner = "owner-9f8e7d6c5b4a39281706"
	value := "sk-live-0123456789abcdefghijklmnopqrstuvwxyz-TOPSECRET"
	s := newStore(t, Dir(dir), testKey(7))
	put(t, s, owner, "LLM_KEY", value, "api.example.com")
	put(t, s, owner, "GH", value+"2", "github.com")
	if bad := leaks(t, dir, value, owner); len(bad) > 0 {
		t.Fatalf("leaks: %v", bad)
	}
	got, err := s.Get(owner, []string{"LLM_KEY"})
	if err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(got)
	if bytes.Contains(js, []byte(value)) || !bytes.Contains(js, []byte("LLM_KEY")) {
		t.Fatalf("marshaled: %s", js)
	}

	// The check itself finds a value written in base64 at an odd offset,
	// and a file readable by others.
	enc := base64.StdEncoding.EncodeToString([]byte("x" + value))
	if err := os.WriteFile(filepath.Join(dir, "plain"), []byte(`{"v":"`+enc+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "plain"), 0o644); err != nil {
		t.Fatal(err)
	}
	if bad := fmt.Sprint(leaks(t, dir, value, owner)); !strings.Contains(bad, "plain: mode") || !strings.Contains(bad, "plain holds") {
		t.Fatalf("the check misses a leak: %v", bad)
	}
}

// recordFile returns the one record file in dir.
func recordFile(t *testing.T, dir string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) != 1 {
		t.Fatalf("record files: %v %v", files, err)
	}
	return files[0]
}

// TestReopen: a new store over the same directory and key reads the
// secrets back; under another key, Get and List fail rather than return
// garbage.
func TestReopen(t *testing.T) {
	dir := t.TempDir()
	put(t, newStore(t, Dir(dir), testKey(1)), "a", "TOKEN", "value", "example.com")
	got, err := newStore(t, Dir(dir), testKey(1)).Get("a", []string{"TOKEN"})
	if err != nil || got[0].Value != "value" {
		t.Fatalf("reopened: %+v %v", got, err)
	}
	other := newStore(t, Dir(dir), testKey(2))
	if got, err := other.Get("a", []string{"TOKEN"}); err == nil || !strings.Contains(err.Error(), "another server key") {
		t.Fatalf("get under another key: %+v %v", got, err)
	}
	if _, err := other.List("a"); err == nil {
		t.Fatal("list under another key")
	}
	if _, err := other.Put("a", Secret{Name: "X", Value: "x", Hosts: []string{"example.com"}}); err == nil {
		t.Fatal("put under another key overwrote the record")
	}
	// A key id forged to match still fails: the values do not open.
	path := recordFile(t, dir)
	data, _ := os.ReadFile(path)
	var rec record
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	rec.Key = other.keyID
	data, _ = json.Marshal(rec)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Get("a", []string{"TOKEN"}); err == nil || !strings.Contains(err.Error(), "does not authenticate") {
		t.Fatalf("get with a forged key id: %v", err)
	}
}

// TestTampered: a record with any one byte changed fails to open, and so
// does one whose sealed value was moved to another owner or secret, or
// whose hosts or header were rewritten.
func TestTampered(t *testing.T) {
	d := t.TempDir()
	s := newStore(t, Dir(d), testKey(1))
	put(t, s, "a", "TOKEN", "value", "example.com")
	if _, err := s.Put("a", Secret{Name: "ZED", Value: "zz", Hosts: []string{"z.example.com"}, Header: &Header{Name: "X-Key"}}); err != nil {
		t.Fatal(err)
	}
	path := recordFile(t, d)
	orig, _ := os.ReadFile(path)
	for i := range orig {
		data := bytes.Clone(orig)
		data[i] ^= 0xff
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Get("a", []string{"TOKEN"}); err == nil {
			t.Fatalf("byte %d (%q) flipped: got %+v", i, orig[i], got)
		}
		if _, err := s.List("a"); err == nil {
			t.Fatalf("byte %d flipped: list", i)
		}
	}
	for name, data := range map[string][]byte{"truncated": orig[:len(orig)-1], "trailing": append(bytes.Clone(orig), "{}"...)} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := s.List("a"); err == nil {
			t.Fatalf("%s record: no error", name)
		}
	}

	edits := map[string]func(*record){
		"renamed":         func(r *record) { r.Secrets[0].Name = "TOKEN2" },
		"hosts rewritten": func(r *record) { r.Secrets[0].Hosts = []string{"evil.example.net"} },
		"header added":    func(r *record) { r.Secrets[0].Header = &Header{Name: "X-Leak"} },
		"header changed":  func(r *record) { r.Secrets[1].Header.Name = "X-Other" },
		"times changed":   func(r *record) { r.Secrets[0].Created = r.Secrets[0].Created.Add(time.Second) },
		"values swapped":  func(r *record) { r.Secrets[0].Sealed, r.Secrets[1].Sealed = r.Secrets[1].Sealed, r.Secrets[0].Sealed },
		"value cut":       func(r *record) { r.Secrets[0].Sealed = r.Secrets[0].Sealed[:5] },
		"out of order":    func(r *record) { r.Secrets[0], r.Secrets[1] = r.Secrets[1], r.Secrets[0] },
		"version":         func(r *record) { r.Version = 2 },
	}
	for name, edit := range edits {
		var rec record
		if err := json.Unmarshal(orig, &rec); err != nil {
			t.Fatal(err)
		}
		edit(&rec)
		data, _ := json.Marshal(rec)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if got, err := s.List("a"); err == nil {
			t.Fatalf("%s: %+v", name, got)
		}
	}

	// The record moved to another owner's file does not open there.
	if err := os.WriteFile(path, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(Dir(d).(dir).file("b"), orig, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get("b", []string{"TOKEN"}); err == nil || errors.Is(err, ErrNotFound) {
		t.Fatalf("a's record as b's: %+v %v", got, err)
	}
	if got, err := s.Get("a", []string{"TOKEN"}); err != nil || got[0].Value != "value" {
		t.Fatalf("restored: %+v %v", got, err)
	}
}

// TestFull: an owner holds at most MaxSecrets; it may still replace one.
func TestFull(t *testing.T) {
	s := newStore(t, memory{}, testKey(1))
	for i := range MaxSecrets {
		put(t, s, "a", fmt.Sprintf("S%03d", i), "v", "example.com")
	}
	if _, err := s.Put("a", Secret{Name: "MORE", Value: "v", Hosts: []string{"example.com"}}); !errors.Is(err, ErrFull) || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "at most 100") {
		t.Fatalf("past the limit: %v", err)
	}
	put(t, s, "a", "S000", "w", "example.com")
	put(t, s, "b", "MORE", "v", "example.com")
}

// TestConcurrent: parallel Puts for one owner all land, while others list
// and get.
func TestConcurrent(t *testing.T) {
	s := newStore(t, Dir(t.TempDir()), testKey(1))
	put(t, s, "a", "FIRST", "v", "example.com")
	const n = 40
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if _, err := s.Put("a", Secret{Name: fmt.Sprintf("S%02d", i), Value: fmt.Sprint(i), Hosts: []string{"example.com"}}); err != nil {
				t.Error(err)
			}
		})
		wg.Go(func() {
			if _, err := s.Get("a", []string{"FIRST"}); err != nil {
				t.Error(err)
			}
			if _, err := s.List("a"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	list, err := s.List("a")
	if err != nil || len(list) != n+1 {
		t.Fatalf("%d secrets, want %d: %v", len(list), n+1, err)
	}
	got, err := s.Get("a", []string{"S07", "S33"})
	if err != nil || got[0].Value != "7" || got[1].Value != "33" {
		t.Fatalf("%+v %v", got, err)
	}
}

// memory is a Backend in memory.
type memory map[string][]byte

func (m memory) Load(owner string) ([]byte, error) { return m[owner], nil }
func (m memory) Save(owner string, data []byte) error {
	if len(data) == 0 {
		delete(m, owner)
	} else {
		m[owner] = data
	}
	return nil
}

// failing is a Backend that fails.
type failing struct{ load, save error }

func (f failing) Load(string) ([]byte, error) { return nil, f.load }
func (f failing) Save(string, []byte) error   { return f.save }

// TestBackendErrors: the backend's errors are the store's.
func TestBackendErrors(t *testing.T) {
	boom := errors.New("boom")
	s := newStore(t, failing{load: boom}, testKey(1))
	if _, err := s.List("a"); !errors.Is(err, boom) {
		t.Fatalf("list: %v", err)
	}
	if _, err := s.Put("a", Secret{Name: "A", Value: "v", Hosts: []string{"example.com"}}); !errors.Is(err, boom) {
		t.Fatalf("put: %v", err)
	}
	if _, err := s.Get("a", []string{"A"}); !errors.Is(err, boom) {
		t.Fatalf("get: %v", err)
	}
	if err := s.Delete("a", "A"); !errors.Is(err, boom) {
		t.Fatalf("delete: %v", err)
	}
	s = newStore(t, failing{save: boom}, testKey(1))
	if _, err := s.Put("a", Secret{Name: "A", Value: "v", Hosts: []string{"example.com"}}); !errors.Is(err, boom) {
		t.Fatalf("put: %v", err)
	}
}

// TestNew: New refuses a key of the wrong size and no backend.
func TestNew(t *testing.T) {
	if _, err := New(memory{}, make([]byte, 16)); err == nil {
		t.Fatal("a 16-byte key")
	}
	if _, err := New(nil, testKey(1)); err == nil {
		t.Fatal("no backend")
	}
}

// TestDirErrors: Dir reports a directory it cannot make, and deleting an
// owner's missing file is no error.
func TestDirErrors(t *testing.T) {
	base := t.TempDir()
	if err := os.WriteFile(filepath.Join(base, "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	d := Dir(filepath.Join(base, "file", "sub"))
	if err := d.Save("a", []byte("x")); err == nil {
		t.Fatal("save under a file")
	}
	if err := Dir(filepath.Join(base, "none")).Save("a", nil); err != nil {
		t.Fatalf("delete in a missing directory: %v", err)
	}
	if data, err := Dir(filepath.Join(base, "none")).Load("a"); data != nil || err != nil {
		t.Fatalf("load from a missing directory: %q %v", data, err)
	}
	// An existing directory is made 0700.
	loose := filepath.Join(base, "loose")
	if err := os.Mkdir(loose, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Dir(loose).Save("a", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(loose); fi.Mode().Perm() != 0o700 {
		t.Fatalf("directory mode %v", fi.Mode())
	}
}

// shared is a Shared backend in memory, as two servers see it: every
// record has a revision, and a save at a stale one conflicts. conflicts
// counts them.
type shared struct {
	mu        sync.Mutex
	data      map[string][]byte
	rev       map[string]uint64
	conflicts int
	// between, when set, runs after a LoadRev (another server's write).
	between func()
}

func (m *shared) Load(owner string) ([]byte, error) {
	d, _, err := m.LoadRev(owner)
	return d, err
}

func (m *shared) Save(owner string, data []byte) error {
	panic("Store saves a Shared backend's records with SaveRev")
}

func (m *shared) LoadRev(owner string) ([]byte, uint64, error) {
	m.mu.Lock()
	d, r, between := m.data[owner], m.rev[owner], m.between
	m.between = nil
	m.mu.Unlock()
	if between != nil {
		between()
	}
	return d, r, nil
}

func (m *shared) SaveRev(owner string, data []byte, rev uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rev[owner] != rev {
		m.conflicts++
		return fmt.Errorf("owner's record is at %d: %w", m.rev[owner], ErrConflict)
	}
	m.data[owner] = data
	m.rev[owner] = rev + 1
	return nil
}

// TestSharedConflict: two servers' stores on one Shared backend lose
// neither's change: a save that another server's overtook is redone on
// the record as it now is.
func TestSharedConflict(t *testing.T) {
	b := &shared{data: map[string][]byte{}, rev: map[string]uint64{}}
	one, two := newStore(t, b, testKey(1)), newStore(t, b, testKey(1))
	if one.KeyID() != two.KeyID() || one.KeyID() == newStore(t, memory{}, testKey(2)).KeyID() {
		t.Fatal("KeyID does not tell keys apart")
	}
	put := func(s *Store, name string) {
		t.Helper()
		if _, err := s.Put("k", Secret{Name: name, Value: "v-" + name, Hosts: []string{"example.com"}}); err != nil {
			t.Fatal(err)
		}
	}
	put(one, "A")
	// Server one reads the record; server two changes it before one saves.
	b.between = func() { put(two, "B") }
	put(one, "C")
	if b.conflicts != 1 {
		t.Fatalf("%d conflicts, want 1", b.conflicts)
	}
	b.between = func() {
		if err := two.Delete("k", "A"); err != nil {
			t.Error(err)
		}
	}
	if err := one.Delete("k", "C"); err != nil {
		t.Fatal(err)
	}
	got, err := two.Get("k", []string{"B"})
	if err != nil || got[0].Value != "v-B" {
		t.Fatalf("%+v %v", got, err)
	}
	if list, _ := one.List("k"); len(list) != 1 || list[0].Name != "B" {
		t.Fatalf("after both deletes: %+v", list)
	}
	// A record that never stops changing: the store gives up.
	var again func()
	again = func() { put(two, "D"); b.between = again }
	b.between = again
	if _, err := one.Put("k", Secret{Name: "E", Value: "v", Hosts: []string{"example.com"}}); !errors.Is(err, ErrConflict) {
		t.Fatalf("put under endless conflict: %v", err)
	}
}
