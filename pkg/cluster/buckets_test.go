package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestRebindingReads: a handle bound while the bucket's direct gets were
// on reads again once they are off. A plain jetstream handle bound then
// asks for direct gets no replica answers any more ("no responders" for
// ever: a CI failure of TestSecretsStore); ours binds again and reads.
func TestRebindingReads(t *testing.T) {
	c := newEnv(t).conn("api-1")
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()
	cfg := jetstream.KeyValueConfig{Bucket: "SR_TEST_REBIND", Replicas: c.replicas}
	err := retry(ctx, func(ctx context.Context) error {
		_, err := c.js.CreateOrUpdateKeyValue(ctx, cfg) // direct gets on
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var plain, ours jetstream.KeyValue
	err = retry(ctx, func(ctx context.Context) (err error) {
		if plain, err = c.js.KeyValue(ctx, cfg.Bucket); err != nil {
			return err
		}
		ours, err = c.kvBucket(ctx, cfg, true)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	err = retry(ctx, func(ctx context.Context) error {
		_, err := ours.Put(ctx, "k", []byte("v"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := retry(ctx, func(ctx context.Context) error { return c.noDirect(ctx, "KV_"+cfg.Bucket) }); err != nil {
		t.Fatal(err)
	}
	awaitNoResponders(ctx, t, func() error { _, err := plain.Get(ctx, "k"); return err })
	var e jetstream.KeyValueEntry
	err = retry(ctx, func(ctx context.Context) (err error) {
		e, err = ours.Get(ctx, "k")
		return err
	})
	if err != nil || string(e.Value()) != "v" {
		t.Fatalf("our handle read %v, %v", e, err)
	}
	if e, err := ours.GetRevision(ctx, "k", e.Revision()); err != nil || string(e.Value()) != "v" {
		t.Fatalf("GetRevision: %v, %v", e, err)
	}
}

// TestRebindingObjects: the same for an object store.
func TestRebindingObjects(t *testing.T) {
	c := newEnv(t).conn("api-1")
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()
	cfg := jetstream.ObjectStoreConfig{Bucket: "SR_TEST_REBIND_OBJ", Replicas: c.replicas}
	var plain, ours jetstream.ObjectStore
	err := retry(ctx, func(ctx context.Context) (err error) {
		if plain, err = c.js.CreateOrUpdateObjectStore(ctx, cfg); err != nil { // direct gets on
			return err
		}
		ours = c.rebindingObjects(plain, cfg.Bucket)
		_, err = ours.PutBytes(ctx, "o", []byte("v"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := retry(ctx, func(ctx context.Context) error { return c.noDirect(ctx, "OBJ_"+cfg.Bucket) }); err != nil {
		t.Fatal(err)
	}
	awaitNoResponders(ctx, t, func() error { _, err := plain.GetBytes(ctx, "o"); return err })
	var got []byte
	err = retry(ctx, func(ctx context.Context) (err error) {
		got, err = ours.GetBytes(ctx, "o")
		return err
	})
	if err != nil || string(got) != "v" {
		t.Fatalf("our handle read %q, %v", got, err)
	}
	if _, err := ours.GetInfo(ctx, "o"); err != nil {
		t.Fatal(err)
	}
	if err := ours.Delete(ctx, "o"); err != nil {
		t.Fatal(err)
	}
	if _, err := ours.Get(ctx, "o"); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Fatalf("after the delete: %v", err)
	}
}

// awaitNoResponders waits until read, with a plain handle bound while
// direct gets were on, finds nobody to ask: the replicas drop their direct
// subscriptions as they apply the update that turns them off.
func awaitNoResponders(ctx context.Context, t *testing.T, read func() error) {
	t.Helper()
	for {
		err := read()
		if errors.Is(err, nats.ErrNoResponders) {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("the plain handle still reads (%v): direct gets were never turned off", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
