package cluster

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Every bucket here is read right after another node wrote to it: a job's
// state, a file just uploaded, a session just created or moved. KV buckets
// and object stores come with direct gets on, which any replica answers,
// possibly before it has caught up with the latest write (an upload on one
// API node was seen missing on another). With them off, reads go to the
// stream's leader and see every write acknowledged before them.
//
// So the buckets' streams are made here, as jetstream would make them but
// with direct gets off from the start. Made with them on and then turned
// off, a handle bound in between kept asking replicas for direct gets: in
// CI such a handle's reads still did not fail a minute after the update
// (answered or hung), and a lagging replica answered with an entry from
// before a session moved.

// kvBucket makes (or updates) the KV bucket cfg and binds it with direct
// gets off; readOnly only binds it.
func (c *Conn) kvBucket(ctx context.Context, cfg jetstream.KeyValueConfig, readOnly bool) (jetstream.KeyValue, error) {
	if !readOnly && !c.settled(ctx, "KV_"+cfg.Bucket, cfg.TTL, max(1, int64(cfg.History))) {
		if _, err := c.js.CreateOrUpdateStream(ctx, kvStream(cfg)); err != nil {
			return nil, err
		}
	}
	kv, err := c.js.KeyValue(ctx, cfg.Bucket)
	if err != nil {
		return nil, err
	}
	return c.rebindingKV(kv), nil
}

// A handle takes direct gets or the leader's from its stream's
// configuration as it is bound. A bucket an older sandbox-run made (with
// direct gets on) has them turned off by the first node of this one that
// starts; a handle bound before that asks for them after every replica
// stopped answering them: "no responders", for ever. The handles here
// bind again when a call finds no responders.

// rebound holds a handle and binds it again on "no responders".
type rebound[H any] struct {
	mu   sync.Mutex
	h    H
	bind func(context.Context) (H, error)
}

// call calls f with the handle; when it finds no responders, the handle is
// bound again and, if repeat (f is safe to call twice), f called again.
func call[H, T any](r *rebound[H], ctx context.Context, repeat bool, f func(H) (T, error)) (T, error) {
	r.mu.Lock()
	h := r.h
	r.mu.Unlock()
	v, err := f(h)
	if !errors.Is(err, nats.ErrNoResponders) {
		return v, err
	}
	fresh, berr := r.bind(ctx)
	if berr != nil {
		return v, err
	}
	r.mu.Lock()
	r.h = fresh
	r.mu.Unlock()
	if !repeat {
		return v, err
	}
	return f(fresh)
}

// rebindingKV is a KV bucket whose reads bind it again (writes, watches
// and the rest take no direct gets).
type rebindingKV struct {
	jetstream.KeyValue
	reads *rebound[jetstream.KeyValue]
}

func (c *Conn) rebindingKV(kv jetstream.KeyValue) jetstream.KeyValue {
	bucket := kv.Bucket()
	return &rebindingKV{KeyValue: kv, reads: &rebound[jetstream.KeyValue]{h: kv,
		bind: func(ctx context.Context) (jetstream.KeyValue, error) { return c.js.KeyValue(ctx, bucket) }}}
}

func (r *rebindingKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	return call(r.reads, ctx, true, func(kv jetstream.KeyValue) (jetstream.KeyValueEntry, error) { return kv.Get(ctx, key) })
}

func (r *rebindingKV) GetRevision(ctx context.Context, key string, rev uint64) (jetstream.KeyValueEntry, error) {
	return call(r.reads, ctx, true, func(kv jetstream.KeyValue) (jetstream.KeyValueEntry, error) {
		return kv.GetRevision(ctx, key, rev)
	})
}

// rebindingObjects is an object store whose calls that read an object's
// info bind it again. A Put that found no responders is not repeated (its
// reader may be read): the next one uses the new handle.
type rebindingObjects struct {
	jetstream.ObjectStore
	calls *rebound[jetstream.ObjectStore]
}

func (c *Conn) rebindingObjects(obs jetstream.ObjectStore, bucket string) jetstream.ObjectStore {
	return &rebindingObjects{ObjectStore: obs, calls: &rebound[jetstream.ObjectStore]{h: obs,
		bind: func(ctx context.Context) (jetstream.ObjectStore, error) { return c.js.ObjectStore(ctx, bucket) }}}
}

func (r *rebindingObjects) Get(ctx context.Context, name string, opts ...jetstream.GetObjectOpt) (jetstream.ObjectResult, error) {
	return call(r.calls, ctx, true, func(o jetstream.ObjectStore) (jetstream.ObjectResult, error) { return o.Get(ctx, name, opts...) })
}

func (r *rebindingObjects) GetBytes(ctx context.Context, name string, opts ...jetstream.GetObjectOpt) ([]byte, error) {
	return call(r.calls, ctx, true, func(o jetstream.ObjectStore) ([]byte, error) { return o.GetBytes(ctx, name, opts...) })
}

func (r *rebindingObjects) GetInfo(ctx context.Context, name string, opts ...jetstream.GetObjectInfoOpt) (*jetstream.ObjectInfo, error) {
	return call(r.calls, ctx, true, func(o jetstream.ObjectStore) (*jetstream.ObjectInfo, error) { return o.GetInfo(ctx, name, opts...) })
}

func (r *rebindingObjects) PutBytes(ctx context.Context, name string, data []byte) (*jetstream.ObjectInfo, error) {
	return call(r.calls, ctx, true, func(o jetstream.ObjectStore) (*jetstream.ObjectInfo, error) { return o.PutBytes(ctx, name, data) })
}

func (r *rebindingObjects) Put(ctx context.Context, meta jetstream.ObjectMeta, rd io.Reader) (*jetstream.ObjectInfo, error) {
	return call(r.calls, ctx, false, func(o jetstream.ObjectStore) (*jetstream.ObjectInfo, error) { return o.Put(ctx, meta, rd) })
}

func (r *rebindingObjects) Delete(ctx context.Context, name string) error {
	_, err := call(r.calls, ctx, true, func(o jetstream.ObjectStore) (struct{}, error) { return struct{}{}, o.Delete(ctx, name) })
	return err
}

func (r *rebindingObjects) UpdateMeta(ctx context.Context, name string, meta jetstream.ObjectMeta) error {
	_, err := call(r.calls, ctx, true, func(o jetstream.ObjectStore) (struct{}, error) {
		return struct{}{}, o.UpdateMeta(ctx, name, meta)
	})
	return err
}

// List first reads one object's info: a stale handle's List finds no
// responders for its empty-store check, takes that for objects to come and
// waits for its context; the read binds the handle again first.
func (r *rebindingObjects) List(ctx context.Context, opts ...jetstream.ListObjectsOpt) ([]*jetstream.ObjectInfo, error) {
	return call(r.calls, ctx, true, func(o jetstream.ObjectStore) ([]*jetstream.ObjectInfo, error) {
		if _, err := o.GetInfo(ctx, listProbe); errors.Is(err, nats.ErrNoResponders) {
			return nil, err
		}
		return o.List(ctx, opts...)
	})
}

// listProbe names the object List reads first (no object has this name).
const listProbe = "sandbox-run.list-probe"

// objectBucket makes (or updates) the object store cfg and binds it with
// direct gets off.
func (c *Conn) objectBucket(ctx context.Context, cfg jetstream.ObjectStoreConfig) (jetstream.ObjectStore, error) {
	if !c.settled(ctx, "OBJ_"+cfg.Bucket, cfg.TTL, 0) {
		if _, err := c.js.CreateOrUpdateStream(ctx, objectStream(cfg)); err != nil {
			return nil, err
		}
	}
	obs, err := c.js.ObjectStore(ctx, cfg.Bucket)
	if err != nil {
		return nil, err
	}
	return c.rebindingObjects(obs, cfg.Bucket), nil
}

// settled says whether a bucket's stream exists already with ttl, history
// (revisions kept of each key; 0: not checked) and direct gets off: then it
// is bound as it is. Updating it would turn direct
// gets on and off again at every node's start, and a stream whose
// configuration changes under its readers has been seen to list no keys
// for a moment.
func (c *Conn) settled(ctx context.Context, stream string, ttl time.Duration, history int64) bool {
	s, err := c.js.Stream(ctx, stream)
	if err != nil {
		return false
	}
	cfg := s.CachedInfo().Config
	return cfg.MaxAge == ttl && !cfg.AllowDirect && (history == 0 || cfg.MaxMsgsPerSubject == history)
}

// kvStream is the stream jetstream's CreateKeyValue makes for cfg (a
// bucket neither mirrored nor sourced), with direct gets off. Updating a
// bucket made by jetstream (or by an older sandbox-run) to it turns them
// off there.
func kvStream(cfg jetstream.KeyValueConfig) jetstream.StreamConfig {
	dup := 2 * time.Minute
	if cfg.TTL > 0 && cfg.TTL < dup {
		dup = cfg.TTL
	}
	return jetstream.StreamConfig{
		Name:              "KV_" + cfg.Bucket,
		Description:       cfg.Description,
		Subjects:          []string{"$KV." + cfg.Bucket + ".>"},
		MaxMsgsPerSubject: max(1, int64(cfg.History)),
		MaxBytes:          orUnlimited(cfg.MaxBytes),
		MaxAge:            cfg.TTL,
		MaxMsgSize:        orUnlimited(cfg.MaxValueSize),
		Storage:           cfg.Storage,
		Replicas:          max(1, cfg.Replicas),
		AllowRollup:       true,
		DenyDelete:        true,
		Duplicates:        dup,
		MaxMsgs:           -1,
		MaxConsumers:      -1,
		Discard:           jetstream.DiscardNew,
	}
}

// objectStream is the stream jetstream's CreateObjectStore makes for cfg,
// with direct gets off.
func objectStream(cfg jetstream.ObjectStoreConfig) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        "OBJ_" + cfg.Bucket,
		Description: cfg.Description,
		Subjects:    []string{"$O." + cfg.Bucket + ".C.>", "$O." + cfg.Bucket + ".M.>"},
		MaxAge:      cfg.TTL,
		MaxBytes:    orUnlimited(cfg.MaxBytes),
		Storage:     cfg.Storage,
		Replicas:    max(1, cfg.Replicas),
		Discard:     jetstream.DiscardNew,
		AllowRollup: true,
	}
}

// orUnlimited is n, or -1 (no limit) for 0.
func orUnlimited[N int32 | int64](n N) N {
	if n == 0 {
		return -1
	}
	return n
}

// lazyObjects is an object store made at its first use, once.
type lazyObjects struct {
	mu  sync.Mutex
	obs jetstream.ObjectStore
}

func (l *lazyObjects) get(ctx context.Context, c *Conn, cfg jetstream.ObjectStoreConfig) (jetstream.ObjectStore, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.obs != nil {
		return l.obs, nil
	}
	err := retry(ctx, func(ctx context.Context) (err error) {
		l.obs, err = c.objectBucket(ctx, cfg)
		return err
	})
	if err != nil {
		l.obs = nil
	}
	return l.obs, err
}
