package sessions

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

var quiet = slog.New(slog.DiscardHandler)

func session(owner string, ttl float64) *Session {
	now := time.Now()
	return &Session{ID: NewID(), Owner: owner, Language: "python", TTLSeconds: ttl, Created: now, LastUsed: now}
}

// TestOwnersAndQuotas: an owner sees only its sessions, has at most max
// of them, and all owners together at most maxAll.
func TestOwnersAndQuotas(t *testing.T) {
	st := Open("", time.Minute, quiet)
	a, b := session("k", 60), session("k", 60)
	for _, s := range []*Session{a, b} {
		if err := st.Add(s, 2, 3); err != nil {
			t.Fatal(err)
		}
	}
	var full *FullError
	if err := st.Add(session("k", 60), 2, 3); !errors.As(err, &full) {
		t.Fatalf("a third session of one owner: %v", err)
	}
	if err := st.Add(session("other", 60), 2, 3); err != nil {
		t.Fatalf("another owner's session: %v", err)
	}
	if err := st.Add(session("third", 60), 2, 3); !errors.As(err, &full) {
		t.Fatalf("a fourth session on the server: %v", err)
	}
	if _, ok := st.Get(a.ID, "other"); ok {
		t.Fatal("another owner sees the session")
	}
	if st.End(a.ID, "other", false) {
		t.Fatal("another owner ended the session")
	}
	if got := st.List("k"); len(got) != 2 || got[0].ID != a.ID {
		t.Fatalf("owner k lists %+v", got)
	}
	if !st.End(a.ID, "k", false) {
		t.Fatal("the owner could not end its session")
	}
	if _, ok := st.Get(a.ID, "k"); ok {
		t.Fatal("an ended session is still there")
	}
}

type files struct{ busy, deleted []string }

func (f *files) SessionBusy(id string) bool { return slices.Contains(f.busy, id) }
func (f *files) TryDeleteSession(id string) error {
	f.deleted = append(f.deleted, id)
	return nil
}

// TestSweep: sessions idle past their TTL end (unless a run of one goes
// on) and their files are removed; live ones stay.
func TestSweep(t *testing.T) {
	st := Open("", time.Minute, quiet)
	idle, busy, live := session("k", 0.05), session("k", 0.05), session("k", 60)
	for _, s := range []*Session{idle, busy, live} {
		if err := st.Add(s, 10, 10); err != nil {
			t.Fatal(err)
		}
	}
	f := &files{busy: []string{busy.ID}}
	st.Sweep(f, func(error) bool { return false }, time.Now().Add(time.Second))
	if _, ok := st.Get(live.ID, "k"); !ok {
		t.Error("a live session ended")
	}
	if ids := st.IDs(); !slices.Contains(ids, busy.ID) || slices.Contains(ids, idle.ID) {
		t.Errorf("after the sweep: %v (want the busy one kept, the idle one gone)", ids)
	}
	if !slices.Equal(f.deleted, []string{idle.ID}) {
		t.Errorf("files removed: %v, want the idle session's", f.deleted)
	}
}

// TestPersisted: a store with a directory keeps its sessions across a
// restart and drops expired and damaged ones.
func TestPersisted(t *testing.T) {
	dir := t.TempDir()
	st := Open(dir, time.Minute, quiet)
	kept, short := session("k", 60), session("k", 0.01)
	for _, s := range []*Session{kept, short} {
		if err := st.Add(s, 10, 10); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, NewID()+".json"), []byte("{not json"), 0o600)
	time.Sleep(20 * time.Millisecond)
	again := Open(dir, time.Minute, quiet)
	if ids := again.IDs(); !slices.Equal(ids, []string{kept.ID}) {
		t.Fatalf("after a restart: %v, want only %s", ids, kept.ID)
	}
}
