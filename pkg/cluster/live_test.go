package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// workerIDOf is the id of the live worker whose name starts with name.
func workerIDOf(t *testing.T, c *Conn, name string) string {
	t.Helper()
	var id string
	ok := waitFor(func() bool {
		ws, _ := c.Workers(context.Background())
		for _, w := range ws {
			if strings.HasPrefix(w.ID, name+"-") {
				id = w.ID
				return true
			}
		}
		return false
	})
	if !ok {
		t.Fatalf("worker %s did not announce itself", name)
	}
	return id
}

func waitFor(ok func() bool) bool {
	for deadline := time.Now().Add(bounded); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if ok() {
			return true
		}
	}
	return false
}

// TestLiveRegistry: workers record the live sandboxes they hold in
// SR_LIVE; an API node locates each, lists an owner's, and places a new
// one on the worker that holds the fewest; an entry no worker sealed is
// no sandbox; a sandbox whose worker is gone is gone; a worker keeps its
// entries past the bucket's TTL.
func TestLiveRegistry(t *testing.T) {
	e := newEnv(t)
	api, w1, w2 := e.conn("api"), e.conn("worker1"), e.conn("worker2")
	noRun := func(ctx context.Context, job Job, emit func(wire.Event)) (*wire.Result, error) {
		return nil, errors.New("no runs here")
	}
	e.work(w1, 1, noRun)
	ctx2, stop2 := context.WithCancel(context.Background())
	done2 := make(chan error, 1)
	go func() { done2 <- w2.Work(ctx2, 1, noRun) }()
	id1, id2 := workerIDOf(t, api, "worker1"), workerIDOf(t, api, "worker2")

	ctx := context.Background()
	l1, err := w1.Live(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l2, err := w2.Live(ctx)
	if err != nil {
		t.Fatal(err)
	}
	la, err := api.Live(ctx)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for _, p := range []struct {
		l *Live
		e LiveEntry
	}{
		{l1, LiveEntry{ID: "sbx-a", Owner: "k", Worker: id1, Created: now}},
		{l1, LiveEntry{ID: "sbx-b", Owner: "k", Worker: id1, Created: now.Add(time.Second)}},
		{l2, LiveEntry{ID: "sbx-c", Owner: "j", Worker: id2, Created: now}},
	} {
		if err := p.l.Put(ctx, p.e); err != nil {
			t.Fatal(err)
		}
	}
	if err := l1.Put(ctx, LiveEntry{ID: "bad.id", Worker: id1}); err == nil {
		t.Error("an id that is no subject token was recorded")
	}
	if got, err := la.Locate(ctx, "sbx-a"); err != nil || got.Worker != id1 || got.Owner != "k" {
		t.Fatalf("locate sbx-a: %+v %v", got, err)
	}
	if _, err := la.Locate(ctx, "sbx-none"); !errors.Is(err, ErrNoLiveSandbox) {
		t.Errorf("locate a sandbox nobody has: %v", err)
	}
	got, err := la.Entries(ctx, "k", false)
	if err != nil || len(got) != 2 || got[0].ID != "sbx-a" || got[1].ID != "sbx-b" {
		t.Fatalf("k's sandboxes: %+v %v", got, err)
	}
	if w, err := la.Place(ctx); err != nil || w != id2 {
		t.Errorf("placed on %q (%v), want %s: it holds the fewest", w, err, id2)
	}

	// An API node's entry is no worker's: dropped.
	if err := la.Put(ctx, LiveEntry{ID: "sbx-forged", Owner: "k", Worker: id1}); err != nil {
		t.Fatal(err)
	}
	if _, err := la.Locate(ctx, "sbx-forged"); !errors.Is(err, ErrNoLiveSandbox) {
		t.Errorf("an entry an API node sealed: %v", err)
	}
	if got, _ := la.Entries(ctx, "k", false); len(got) != 2 {
		t.Errorf("k's sandboxes with a forged entry: %+v", got)
	}

	// Worker 2 goes: its sandbox is gone, then forgotten.
	stop2()
	if err := <-done2; err != nil {
		t.Fatal(err)
	}
	if !waitFor(func() bool { return !api.workerAlive(ctx, id2) }) {
		t.Fatal("worker 2 still announced")
	}
	if _, err := la.Locate(ctx, "sbx-c"); !IsWorkerGone(err) || !strings.Contains(err.Error(), id2) {
		t.Errorf("a sandbox of a worker gone: %v", err)
	}
	if got, _ := la.Entries(ctx, "j", false); len(got) != 0 {
		t.Errorf("j's sandboxes with its worker gone: %+v", got)
	}
	if w, err := la.Place(ctx); err != nil || w != id1 {
		t.Errorf("placed on %q (%v) with one worker left", w, err)
	}
	if err := l1.Delete(ctx, "sbx-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := la.Locate(ctx, "sbx-a"); !errors.Is(err, ErrNoLiveSandbox) {
		t.Errorf("a sandbox that ended: %v", err)
	}
}

// TestLiveKeep: entries expire unless their worker puts them again.
func TestLiveKeep(t *testing.T) {
	ttl, every := LiveTTL, liveKeepEvery
	LiveTTL, liveKeepEvery = 2*time.Second, 200*time.Millisecond
	t.Cleanup(func() { LiveTTL, liveKeepEvery = ttl, every })
	e := newEnv(t)
	api, w := e.conn("api"), e.conn("worker1")
	e.work(w, 1, func(ctx context.Context, job Job, emit func(wire.Event)) (*wire.Result, error) {
		return nil, errors.New("no")
	})
	id := workerIDOf(t, api, "worker1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lw, err := w.Live(ctx)
	if err != nil {
		t.Fatal(err)
	}
	la, err := api.Live(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kept := LiveEntry{ID: "sbx-kept", Owner: "k", Worker: id}
	for _, id := range []string{"sbx-kept", "sbx-left"} {
		if err := lw.Put(ctx, LiveEntry{ID: id, Owner: "k", Worker: kept.Worker}); err != nil {
			t.Fatal(err)
		}
	}
	go lw.Keep(ctx, func() []LiveEntry { return []LiveEntry{kept} })
	if !waitFor(func() bool { _, err := la.Locate(ctx, "sbx-left"); return errors.Is(err, ErrNoLiveSandbox) }) {
		t.Fatal("an entry nobody keeps did not expire")
	}
	if _, err := la.Locate(ctx, "sbx-kept"); err != nil {
		t.Errorf("a kept entry: %v", err)
	}
}
