package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/secrets"
)

// TestSecretsStore: SR_SECRETS keeps each owner's record under its hash,
// saved only at the revision read (a stale save conflicts); a worker's
// backend reads and never writes; a watcher hears of each change by the
// owner's key, and the key check refuses another key.
func TestSecretsStore(t *testing.T) {
	e := newEnv(t)
	api, wk := e.conn("api-1"), e.conn("worker-1")
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()
	changed := make(chan string, 8)
	wctx, stopWatch := context.WithCancel(ctx)
	watched := make(chan error, 1)
	go func() {
		watched <- wk.WatchSecrets(wctx, func(k string) {
			select {
			case changed <- k:
			default: // heard enough
			}
		})
	}()
	defer func() { stopWatch(); <-watched }()

	ab, wb := api.SecretBackend(false), wk.SecretBackend(true)
	key := make([]byte, secrets.KeySize)
	st, err := secrets.New(ab, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := api.CheckSecretsKey(ctx, ab, st.KeyID()); err != nil {
		t.Fatal(err)
	}
	other, _ := secrets.New(wb, append([]byte{1}, key[1:]...))
	if err := wk.CheckSecretsKey(ctx, wb, other.KeyID()); !errors.Is(err, ErrSecretsKey) {
		t.Fatalf("a worker with another key: %v", err)
	}

	// The watch may start after the first write: write until it hears.
	for deadline := time.Now().Add(bounded); ; {
		if _, err := st.Put("team", secrets.Secret{Name: "A", Value: "v", Hosts: []string{"example.com"}}); err != nil {
			t.Fatal(err)
		}
		select {
		case k := <-changed:
			if k != SecretOwnerKey("team") || k == "team" {
				t.Fatalf("the watch heard %q", k)
			}
		case <-time.After(time.Second):
			if time.Now().After(deadline) {
				t.Fatal("the watch heard no change")
			}
			continue
		}
		break
	}
	data, rev, err := ab.LoadRev("team")
	if err != nil || len(data) == 0 || rev == 0 {
		t.Fatalf("LoadRev: %d bytes at %d, %v", len(data), rev, err)
	}
	if err := ab.SaveRev("team", data, rev-1); !errors.Is(err, secrets.ErrConflict) {
		t.Fatalf("a save at a stale revision: %v", err)
	}
	if err := ab.SaveRev("other", data, 0); err != nil {
		t.Fatal(err)
	}
	if err := ab.SaveRev("other", data, 0); !errors.Is(err, secrets.ErrConflict) {
		t.Fatalf("a create over a record: %v", err)
	}
	if err := wb.Save("team", nil); err == nil {
		t.Fatal("a worker's backend saved")
	}
	ws, _ := secrets.New(wb, key)
	if got, err := ws.Get("team", []string{"A"}); err != nil || got[0].Value != "v" {
		t.Fatalf("the worker reads %+v, %v", got, err)
	}
	if err := st.Delete("team", "A"); err != nil {
		t.Fatal(err)
	}
	if data, _, err := wb.LoadRev("team"); err != nil || data != nil {
		t.Fatalf("after the delete: %q, %v", data, err)
	}
}
