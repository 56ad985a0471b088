package filestore

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var quiet = slog.New(slog.DiscardHandler)

func quotas() Quotas {
	return Quotas{Bytes: 100, OwnerBytes: 60, Files: 4, OwnerFiles: 3, PerOwner: true}
}

// TestPutGetRemove: a file is stored with its hash, read back whole by its
// owner only, listed, and removed.
func TestPutGetRemove(t *testing.T) {
	st := New(t.TempDir(), 50, quotas(), time.Hour, quiet)
	f, err := st.Put(strings.NewReader("hello"), "k", "a.txt", "text/plain", 0)
	if err != nil {
		t.Fatal(err)
	}
	if f.Size != 5 || f.SHA256 != "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824" || !IDPattern.MatchString(f.ID) {
		t.Fatalf("%+v", f)
	}
	if st.Get(f.ID, "other") != nil {
		t.Fatal("another owner sees the file")
	}
	if _, data, err := st.Read(f.ID, "k"); err != nil || string(data) != "hello" {
		t.Fatalf("read: %q %v", data, err)
	}
	if list := st.List("k"); len(list) != 1 || list[0].FileID != f.ID || list[0].Name != "a.txt" {
		t.Fatalf("list: %+v", list)
	}
	if st.Remove(f.ID, "other") || !st.Remove(f.ID, "k") || st.Get(f.ID, "k") != nil {
		t.Fatal("remove")
	}
	if _, _, err := st.Open(f.ID, "k"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("open of a removed file: %v", err)
	}
}

// TestQuotas: the per-file cap, each owner's quotas and the store's hold;
// one owner filling its quota leaves room for others.
func TestQuotas(t *testing.T) {
	st := New(t.TempDir(), 50, quotas(), time.Hour, quiet)
	if _, err := st.Put(strings.NewReader(strings.Repeat("x", 51)), "k", "", "", 0); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a file above the cap: %v", err)
	}
	for range 2 {
		if _, err := st.Put(strings.NewReader(strings.Repeat("x", 30)), "k", "", "", 0); err != nil {
			t.Fatal(err)
		}
	}
	var quota *QuotaError
	if _, err := st.Put(strings.NewReader("x"), "k", "", "", 0); !errors.As(err, &quota) || !strings.Contains(err.Error(), "file_quota_bytes_per_key") {
		t.Fatalf("past the owner's bytes: %v", err)
	}
	if err := st.Room(1, "other"); err != nil {
		t.Fatalf("another owner: %v", err)
	}
	if _, err := st.Put(strings.NewReader(strings.Repeat("y", 40)), "other", "", "", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(strings.NewReader(strings.Repeat("z", 40)), "third", "", "", 0); !errors.As(err, &quota) || !strings.Contains(err.Error(), "file store is full") {
		t.Fatalf("past the store's bytes: %v", err)
	}
}

// TestQuotasOfLeaveRoom: with only the store's quota set below the default
// per-key one, one owner filling what it may hold still leaves room for
// another (a key may hold the store less one largest file); the defaults
// are kept.
func TestQuotasOfLeaveRoom(t *testing.T) {
	if q := QuotasOf(1<<30, 32<<20, 10000, true, 256<<20, 1000); q.OwnerBytes != 256<<20 || q.OwnerFiles != 1000 {
		t.Fatalf("the defaults changed: %+v", q)
	}
	if q := QuotasOf(100, 40, 10, false, 256<<20, 1000); q.OwnerBytes != 256<<20 {
		t.Fatalf("without keys nothing is per owner: %+v", q)
	}
	st := New(t.TempDir(), 40, QuotasOf(100, 40, 10, true, 256<<20, 1000), time.Hour, quiet)
	var quota *QuotaError
	n := 0
	for ; n < 10; n++ {
		if _, err := st.Put(strings.NewReader(strings.Repeat("x", 30)), "a", "", "", 0); err != nil {
			if !errors.As(err, &quota) {
				t.Fatal(err)
			}
			break
		}
	}
	if n != 2 {
		t.Fatalf("owner a stored %d files of 30 bytes in a 100-byte store of files up to 40 (60 for one: 2)", n)
	}
	if _, err := st.Put(strings.NewReader(strings.Repeat("y", 30)), "b", "", "", 0); err != nil {
		t.Fatalf("owner b, once a is refused: %v", err)
	}
}

// TestExpireAndReload: files expire; a restart keeps live files and drops
// damaged ones and unfinished uploads.
func TestExpireAndReload(t *testing.T) {
	dir := t.TempDir()
	st := New(dir, 50, quotas(), time.Hour, quiet)
	short, err := st.Put(strings.NewReader("short"), "k", "", "", 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	kept, _ := st.Put(strings.NewReader("kept"), "k", "", "", 0)
	damaged, _ := st.Put(strings.NewReader("damaged"), "k", "", "", 0)
	os.WriteFile(filepath.Join(dir, damaged.ID+".bin"), []byte("changed size"), 0o600)
	os.WriteFile(filepath.Join(dir, ".upload-123"), []byte("half"), 0o600)
	time.Sleep(20 * time.Millisecond)
	if n := st.Expire(time.Now()); n != 1 || st.Get(short.ID, "k") != nil {
		t.Fatalf("expired %d", n)
	}
	again := New(dir, 50, quotas(), time.Hour, quiet)
	if again.Get(kept.ID, "k") == nil || again.Get(damaged.ID, "k") != nil {
		t.Fatal("after a restart: want the kept file and not the damaged one")
	}
	if _, err := os.Stat(filepath.Join(dir, ".upload-123")); !errors.Is(err, fs.ErrNotExist) {
		t.Error("an unfinished upload survived the restart")
	}
}
