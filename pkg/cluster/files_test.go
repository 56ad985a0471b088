package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sandbox-run/sandbox-run/internal/lib/records"
	"github.com/sandbox-run/sandbox-run/pkg/filestore"
)

const (
	kib = 1 << 10
	mib = 1 << 20
)

func fileStore(t *testing.T, c *Conn, q filestore.Quotas) *FileStore {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()
	s, err := c.FileStore(ctx, 2*mib, q, time.Hour, slog.New(slog.NewTextHandler(t.Output(), nil)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func put(t *testing.T, s *FileStore, data []byte, owner string, ttl time.Duration) *filestore.File {
	t.Helper()
	f, err := s.Put(bytes.NewReader(data), owner, "f.bin", "application/octet-stream", ttl)
	if err != nil {
		t.Fatalf("put of %d bytes for %s: %v", len(data), owner, err)
	}
	return f
}

func wantQuota(t *testing.T, err error, what, mention string) {
	t.Helper()
	var quota *filestore.QuotaError
	if !errors.As(err, &quota) || !strings.Contains(err.Error(), mention) {
		t.Fatalf("%s: want a quota error mentioning %s, got %v", what, mention, err)
	}
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(1, uint64(n)))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestFileStore: files stored through one node are seen, read, listed and
// removed through another, by their owner only; the per-file cap and the
// quotas, store-wide and per owner, hold across nodes; files expire; a
// file above NATS's max payload round-trips; an upload that was never
// committed stays invisible and is cleaned up.
func TestFileStore(t *testing.T) {
	e := newEnv(t)
	a, b := e.conn("api-a"), e.conn("api-b")
	q := filestore.Quotas{Bytes: 3*mib + 100, Files: 4, OwnerBytes: 2 * mib, OwnerFiles: 3, PerOwner: true}
	sa, sb := fileStore(t, a, q), fileStore(t, b, q)

	// Put on one node; Get, Read, Open, List on the other.
	f, err := sa.Put(strings.NewReader("hello"), "k", "a.txt", "text/plain", 0)
	if err != nil {
		t.Fatal(err)
	}
	if f.Size != 5 || f.SHA256 != "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824" ||
		!filestore.IDPattern.MatchString(f.ID) || f.Owner != "k" || f.Expires.Sub(f.Created) != time.Hour {
		t.Fatalf("put: %+v", f)
	}
	g := sb.Get(f.ID, "k")
	if g == nil || g.ID != f.ID || g.Name != "a.txt" || g.ContentType != "text/plain" || g.Size != 5 || g.SHA256 != f.SHA256 ||
		!g.Created.Equal(f.Created) || !g.Expires.Equal(f.Expires) {
		t.Fatalf("get on the other node: %+v, want %+v", g, f)
	}
	if got, data, err := sb.Read(f.ID, "k"); err != nil || string(data) != "hello" || got.SHA256 != f.SHA256 {
		t.Fatalf("read: %q %v", data, err)
	}
	got, rc, err := sb.Open(f.ID, "k")
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || string(data) != "hello" || got.Name != "a.txt" {
		t.Fatalf("open: %q %v", data, err)
	}
	if list := sb.List("k"); len(list) != 1 || list[0].FileID != f.ID || list[0].Name != "a.txt" || list[0].SHA256 != f.SHA256 || list[0].Size != 5 {
		t.Fatalf("list: %+v", list)
	}

	// Another owner, and ids that are not there, see nothing.
	if sb.Get(f.ID, "other") != nil {
		t.Fatal("another owner gets the file")
	}
	if _, _, err := sb.Open(f.ID, "other"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("another owner opens the file: %v", err)
	}
	if _, _, err := sb.Read(f.ID, "other"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("another owner reads the file: %v", err)
	}
	if list := sb.List("other"); list == nil || len(list) != 0 {
		t.Fatalf("another owner's list: %#v", list)
	}
	for _, id := range []string{"file_nope", "../" + f.ID, records.NewID("file_"), ""} {
		if sb.Get(id, "k") != nil || sb.Remove(id, "k") {
			t.Fatalf("id %q found", id)
		}
		if _, _, err := sb.Open(id, "k"); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("open of id %q: %v", id, err)
		}
	}

	// The per-file cap; the chunks of the refused upload are gone.
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()
	stored := func() uint64 {
		t.Helper()
		st, err := sa.obs.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	before := stored()
	if _, err := sa.Put(bytes.NewReader(make([]byte, 2*mib+1)), "k", "", "", 0); !errors.Is(err, filestore.ErrTooLarge) {
		t.Fatalf("a file above the cap: %v", err)
	}
	if after := stored(); after != before {
		t.Fatalf("a refused upload left %d bytes in the bucket", after-before)
	}

	// A file above NATS's max payload (1 MiB) round-trips, chunked.
	big := randomBytes(3 * mib / 2)
	fbig := put(t, sa, big, "k", 0)
	if fbig.Size != int64(len(big)) || fbig.SHA256 != hexSum(big) {
		t.Fatalf("big: %+v", fbig)
	}
	if got, data, err := sb.Read(fbig.ID, "k"); err != nil || !bytes.Equal(data, big) || got.SHA256 != hexSum(big) {
		t.Fatalf("read of the big file: %d bytes, %v", len(data), err)
	}
	if list := sb.List("k"); len(list) != 2 || list[0].FileID != f.ID || list[1].FileID != fbig.ID {
		t.Fatalf("list, oldest first: %+v", list)
	}
	// k: 2 files, 1.5 MiB + 5 bytes; the store: the same.

	// Quotas count the files of every node.
	_, err = sb.Put(bytes.NewReader(make([]byte, 600*kib)), "k", "", "", 0)
	wantQuota(t, err, "past the owner's bytes", "file_quota_bytes_per_key")
	if err := sb.Room(1, "o"); err != nil {
		t.Fatalf("room for another owner: %v", err)
	}
	wantQuota(t, sb.Room(600*kib, "k"), "room past the owner's bytes", "file_quota_bytes_per_key")
	put(t, sb, make([]byte, mib), "o", 0) // the store: 3 files, 2.5 MiB + 5 bytes
	_, err = sa.Put(bytes.NewReader(make([]byte, 700*kib)), "t", "", "", 0)
	wantQuota(t, err, "past the store's bytes", "(file_quota_bytes)")
	ft := put(t, sa, []byte("t1"), "t", 0) // the store: 4 files
	_, err = sa.Put(strings.NewReader("t2"), "t", "", "", 0)
	wantQuota(t, err, "past the store's files", "(file_quota_files)")
	// (Room trusts a listing of the last moments: sa's knows its Put.)
	wantQuota(t, sa.Room(1, "t"), "room past the store's files", "(file_quota_files)")

	// Remove frees room, on every node.
	if sb.Remove(ft.ID, "k") {
		t.Fatal("another owner removed the file")
	}
	if !sb.Remove(ft.ID, "t") {
		t.Fatal("remove")
	}
	if sa.Get(ft.ID, "t") != nil || sa.Remove(ft.ID, "t") {
		t.Fatal("the removed file is still there")
	}
	if _, _, err := sa.Open(ft.ID, "t"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("open of a removed file: %v", err)
	}
	if err := sb.Room(1, "t"); err != nil {
		t.Fatalf("room after a removal: %v", err)
	}
	put(t, sa, []byte("k3"), "k", 0) // k: 3 files
	_, err = sb.Put(strings.NewReader("k4"), "k", "", "", 0)
	wantQuota(t, err, "past the owner's files", "file_quota_files_per_key")

	// Without API keys only the store's quotas hold.
	sc := fileStore(t, b, filestore.Quotas{Bytes: 100 * mib, Files: 100})
	put(t, sc, []byte("k4"), "k", 0)
	empty := put(t, sc, nil, "k", 0)
	if _, data, err := sa.Read(empty.ID, "k"); err != nil || len(data) != 0 || empty.SHA256 != hexSum(nil) {
		t.Fatalf("an empty file: %q %v", data, err)
	}

	// A file expires after its ttl: invisible, then removed by Expire.
	short := put(t, sc, []byte("short"), "k", 2*time.Second)
	if short.Expires.Sub(short.Created) != 2*time.Second {
		t.Fatalf("ttl: %+v", short)
	}
	if sb.Get(short.ID, "k") == nil && time.Now().Before(short.Expires) {
		t.Fatal("the short-lived file is not there before its time")
	}
	eventually(t, "the file to expire", func() (bool, string) {
		return sb.Get(short.ID, "k") == nil, "still visible"
	})
	for _, fi := range sb.List("k") {
		if fi.FileID == short.ID {
			t.Fatal("an expired file is listed")
		}
	}
	if n := sb.Expire(time.Now()); n != 1 {
		t.Fatalf("expire removed %d files, want 1", n)
	}
	if _, err := sb.obs.GetInfo(ctx, short.ID); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Fatalf("the expired object: %v", err)
	}
	if n := sb.Expire(time.Now()); n != 0 {
		t.Fatalf("expire again removed %d", n)
	}

	// An upload whose node died before the commit: invisible, not
	// counted, removed once old.
	orphan := records.NewID("file_")
	if _, err := sa.obs.Put(ctx, jetstream.ObjectMeta{Name: orphan, Metadata: map[string]string{metaPending: "k"}}, bytes.NewReader(big)); err != nil {
		t.Fatal(err)
	}
	if sb.Get(orphan, "k") != nil || len(sb.List("k")) != 5 {
		t.Fatalf("an uncommitted upload is visible: %+v", sb.List("k"))
	}
	if n := sb.Expire(time.Now()); n != 0 {
		t.Fatalf("expire removed %d files", n)
	}
	if _, err := sb.obs.GetInfo(ctx, orphan); err != nil {
		t.Fatalf("a recent uncommitted upload was removed: %v", err)
	}
	if n := sb.Expire(time.Now().Add(filePendingMax + time.Minute)); n != 0 {
		t.Fatalf("expire removed %d files", n)
	}
	if _, err := sb.obs.GetInfo(ctx, orphan); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Fatalf("the old uncommitted upload: %v", err)
	}
	if got := sb.List("k"); len(got) != 5 {
		t.Fatalf("the live files after the cleanup: %+v", got)
	}
}
