package cluster

import (
	"context"
	"errors"
	"io"
	"reflect"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestRebindingReads: a handle bound while the bucket's direct gets were
// on reads again once they are off. A plain jetstream handle bound then
// asks for direct gets no replica answers any more ("no responders" for
// ever: a CI failure of TestSecretsStore); ours binds again and reads.
// Whether the plain handle gets there in time is the servers' business
// (awaitNoResponders); TestRebindingCalls fails without the rebinding.
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
	awaitNoResponders(ctx, t, func(ctx context.Context) error { _, err := plain.Get(ctx, "k"); return err })
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
	awaitNoResponders(ctx, t, func(ctx context.Context) error { _, err := plain.GetBytes(ctx, "o"); return err })
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
	if infos, err := ours.List(ctx); !errors.Is(err, jetstream.ErrNoObjectsFound) {
		t.Fatalf("List after the delete: %v, %v", infos, err)
	}
}

// awaitNoResponders waits until read, with a plain handle bound while
// direct gets were on, finds nobody to ask: the replicas drop their direct
// subscriptions as they apply the update that turns them off. How soon
// (and whether, while a route between servers is made again) is the
// servers' business: a CI run saw the plain handle read for a minute. So
// this waits at most half of ctx, each read at most a few seconds, and
// then goes on; TestRebindingCalls checks the rebinding itself.
func awaitNoResponders(ctx context.Context, t *testing.T, read func(context.Context) error) {
	t.Helper()
	deadline, _ := ctx.Deadline()
	ctx, cancel := context.WithDeadline(ctx, time.Now().Add(time.Until(deadline)/2))
	defer cancel()
	for {
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		err := read(rctx)
		rcancel()
		if errors.Is(err, nats.ErrNoResponders) {
			return
		}
		if ctx.Err() != nil {
			t.Logf("the plain handle still reads (%v); going on", err)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stubKV and stubObjects answer "no responders" until bound again.
type stubKV struct {
	jetstream.KeyValue
	stale bool
	calls *int
}

func (s stubKV) Get(context.Context, string) (jetstream.KeyValueEntry, error) {
	*s.calls++
	if s.stale {
		return nil, nats.ErrNoResponders
	}
	return nil, jetstream.ErrKeyNotFound
}

type stubObjects struct {
	jetstream.ObjectStore
	stale bool
	calls *int
}

func (s stubObjects) GetInfo(context.Context, string, ...jetstream.GetObjectInfoOpt) (*jetstream.ObjectInfo, error) {
	*s.calls++
	if s.stale {
		return nil, nats.ErrNoResponders
	}
	return nil, jetstream.ErrObjectNotFound
}

// List is the real one's on a stale handle: it waits for its context.
func (s stubObjects) List(ctx context.Context, _ ...jetstream.ListObjectsOpt) ([]*jetstream.ObjectInfo, error) {
	*s.calls++
	if s.stale {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return nil, jetstream.ErrNoObjectsFound
}

func (s stubObjects) Put(context.Context, jetstream.ObjectMeta, io.Reader) (*jetstream.ObjectInfo, error) {
	*s.calls++
	if s.stale {
		return nil, nats.ErrNoResponders
	}
	return &jetstream.ObjectInfo{}, nil
}

// TestRebindingCalls: a call that finds no responders binds the handle
// again and is repeated on it once, unless it may not be repeated (a Put
// of a reader), and later calls use the new handle.
func TestRebindingCalls(t *testing.T) {
	ctx := context.Background()
	var calls, binds int
	kv := &rebindingKV{KeyValue: stubKV{stale: true, calls: &calls}, reads: &rebound[jetstream.KeyValue]{
		h: stubKV{stale: true, calls: &calls},
		bind: func(context.Context) (jetstream.KeyValue, error) {
			binds++
			return stubKV{calls: &calls}, nil
		}}}
	if _, err := kv.Get(ctx, "k"); !errors.Is(err, jetstream.ErrKeyNotFound) || calls != 2 || binds != 1 {
		t.Fatalf("Get: %v after %d calls, %d binds; want the fresh handle's answer after 2 calls, 1 bind", err, calls, binds)
	}
	if _, err := kv.Get(ctx, "k"); !errors.Is(err, jetstream.ErrKeyNotFound) || calls != 3 || binds != 1 {
		t.Fatalf("second Get: %v after %d calls, %d binds", err, calls, binds)
	}

	calls, binds = 0, 0
	obs := &rebindingObjects{calls: &rebound[jetstream.ObjectStore]{
		h: stubObjects{stale: true, calls: &calls},
		bind: func(context.Context) (jetstream.ObjectStore, error) {
			binds++
			return stubObjects{calls: &calls}, nil
		}}}
	if _, err := obs.Put(ctx, jetstream.ObjectMeta{}, nil); !errors.Is(err, nats.ErrNoResponders) || calls != 1 || binds != 1 {
		t.Fatalf("Put: %v after %d calls, %d binds; want no responders, not repeated, bound again", err, calls, binds)
	}
	if _, err := obs.Put(ctx, jetstream.ObjectMeta{}, nil); err != nil || calls != 2 {
		t.Fatalf("the next Put: %v after %d calls", err, calls)
	}

	// List of an empty store on a stale handle binds again rather than
	// waiting for its context.
	obs.calls.h = stubObjects{stale: true, calls: &calls}
	calls, binds = 0, 0
	lctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := obs.List(lctx); !errors.Is(err, jetstream.ErrNoObjectsFound) || binds != 1 {
		t.Fatalf("List: %v after %d binds; want the fresh handle's empty list", err, binds)
	}

	failing := &rebound[jetstream.KeyValue]{h: stubKV{stale: true, calls: &calls},
		bind: func(context.Context) (jetstream.KeyValue, error) { return nil, errors.New("down") }}
	calls = 0
	if _, err := (&rebindingKV{reads: failing}).Get(ctx, "k"); !errors.Is(err, nats.ErrNoResponders) || calls != 1 {
		t.Fatalf("Get when binding fails: %v after %d calls; want the first answer", err, calls)
	}
}

// noDirect turns direct gets off on stream (as an older sandbox-run did,
// after making a bucket with them on).
func (c *Conn) noDirect(ctx context.Context, stream string) error {
	s, err := c.js.Stream(ctx, stream)
	if err != nil {
		return err
	}
	cfg := s.CachedInfo().Config
	if !cfg.AllowDirect {
		return nil
	}
	cfg.AllowDirect = false
	_, err = c.js.UpdateStream(ctx, cfg)
	return err
}

// TestBucketStreams: the streams made here are jetstream's own but for
// direct gets, which are never on; a bucket jetstream made (or an older
// sandbox-run, with direct gets on) is updated to have them off.
func TestBucketStreams(t *testing.T) {
	c := newEnv(t).conn("api-1")
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()
	config := func(stream string) (cfg jetstream.StreamConfig) {
		t.Helper()
		err := retry(ctx, func(ctx context.Context) error {
			s, err := c.js.Stream(ctx, stream)
			if err == nil {
				cfg = s.CachedInfo().Config
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	same := func(what string, theirs, ours jetstream.StreamConfig) {
		t.Helper()
		if !theirs.AllowDirect || ours.AllowDirect {
			t.Fatalf("%s: direct gets %v in jetstream's, %v in ours", what, theirs.AllowDirect, ours.AllowDirect)
		}
		theirs.Name, theirs.Subjects, theirs.AllowDirect = ours.Name, ours.Subjects, false
		theirs.Metadata, ours.Metadata = nil, nil
		if !reflect.DeepEqual(theirs, ours) {
			t.Fatalf("%s: jetstream makes\n%+v\nwe make\n%+v", what, theirs, ours)
		}
	}

	kv := jetstream.KeyValueConfig{Description: "d", TTL: time.Hour, History: 3, Replicas: c.replicas}
	theirs, ours := kv, kv
	theirs.Bucket, ours.Bucket = "SR_TEST_THEIRS", "SR_TEST_OURS"
	err := retry(ctx, func(ctx context.Context) error {
		if _, err := c.js.CreateOrUpdateKeyValue(ctx, theirs); err != nil {
			return err
		}
		_, err := c.kvBucket(ctx, ours, false)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	same("KV", config("KV_SR_TEST_THEIRS"), config("KV_SR_TEST_OURS"))
	if err := retry(ctx, func(ctx context.Context) error { _, err := c.kvBucket(ctx, theirs, false); return err }); err != nil {
		t.Fatal(err)
	}
	if config("KV_SR_TEST_THEIRS").AllowDirect {
		t.Fatal("a KV bucket jetstream made keeps direct gets")
	}

	obj := jetstream.ObjectStoreConfig{Description: "d", TTL: time.Hour, Storage: jetstream.FileStorage, Replicas: c.replicas}
	otheirs, oours := obj, obj
	otheirs.Bucket, oours.Bucket = "SR_TEST_THEIRS", "SR_TEST_OURS"
	err = retry(ctx, func(ctx context.Context) error {
		if _, err := c.js.CreateOrUpdateObjectStore(ctx, otheirs); err != nil {
			return err
		}
		_, err := c.objectBucket(ctx, oours)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	same("object store", config("OBJ_SR_TEST_THEIRS"), config("OBJ_SR_TEST_OURS"))
	if err := retry(ctx, func(ctx context.Context) error { _, err := c.objectBucket(ctx, otheirs); return err }); err != nil {
		t.Fatal(err)
	}
	if config("OBJ_SR_TEST_THEIRS").AllowDirect {
		t.Fatal("an object store jetstream made keeps direct gets")
	}
	// Ours work as jetstream's do.
	o, err := c.objectBucket(ctx, oours)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.PutBytes(ctx, "x", []byte("y")); err != nil {
		t.Fatal(err)
	}
	if got, err := o.GetBytes(ctx, "x"); err != nil || string(got) != "y" {
		t.Fatalf("GetBytes: %q, %v", got, err)
	}
}
