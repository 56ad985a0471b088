package cluster

import (
	"context"
	"errors"
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

// kvBucket makes (or updates) the KV bucket cfg and binds it with direct
// gets off; readOnly only binds it.
func (c *Conn) kvBucket(ctx context.Context, cfg jetstream.KeyValueConfig, readOnly bool) (jetstream.KeyValue, error) {
	if !readOnly && !c.settled(ctx, "KV_"+cfg.Bucket, cfg.TTL, max(1, int64(cfg.History))) {
		if _, err := c.js.CreateOrUpdateKeyValue(ctx, cfg); err != nil {
			return nil, err
		}
		if err := c.noDirect(ctx, "KV_"+cfg.Bucket); err != nil {
			return nil, err
		}
	}
	kv, err := c.js.KeyValue(ctx, cfg.Bucket)
	if err != nil {
		return nil, err
	}
	return &rebinding{KeyValue: kv, js: c.js, reads: kv}, nil
}

// rebinding is a bound KV bucket whose reads bind it again when no server
// answers them. A handle takes direct gets or the leader's from the
// stream's configuration as it is bound: one bound while direct gets were
// still on (a worker binding as an API node makes the bucket, or a stream
// whose update had not reached the server answering) asks for them after
// every replica stopped answering them, with "no responders" for ever.
type rebinding struct {
	jetstream.KeyValue // writes, watches and the rest: not direct gets
	js                 jetstream.JetStream

	mu    sync.Mutex
	reads jetstream.KeyValue
}

func (r *rebinding) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	return r.read(ctx, func(kv jetstream.KeyValue) (jetstream.KeyValueEntry, error) { return kv.Get(ctx, key) })
}

func (r *rebinding) GetRevision(ctx context.Context, key string, rev uint64) (jetstream.KeyValueEntry, error) {
	return r.read(ctx, func(kv jetstream.KeyValue) (jetstream.KeyValueEntry, error) { return kv.GetRevision(ctx, key, rev) })
}

func (r *rebinding) read(ctx context.Context, get func(jetstream.KeyValue) (jetstream.KeyValueEntry, error)) (jetstream.KeyValueEntry, error) {
	r.mu.Lock()
	kv := r.reads
	r.mu.Unlock()
	e, err := get(kv)
	if !errors.Is(err, nats.ErrNoResponders) {
		return e, err
	}
	fresh, berr := r.js.KeyValue(ctx, r.Bucket())
	if berr != nil {
		return e, err
	}
	r.mu.Lock()
	r.reads = fresh
	r.mu.Unlock()
	return get(fresh)
}

// objectBucket makes (or updates) the object store cfg and binds it with
// direct gets off.
func (c *Conn) objectBucket(ctx context.Context, cfg jetstream.ObjectStoreConfig) (jetstream.ObjectStore, error) {
	if c.settled(ctx, "OBJ_"+cfg.Bucket, cfg.TTL, 0) {
		return c.js.ObjectStore(ctx, cfg.Bucket)
	}
	if _, err := c.js.CreateOrUpdateObjectStore(ctx, cfg); err != nil {
		return nil, err
	}
	if err := c.noDirect(ctx, "OBJ_"+cfg.Bucket); err != nil {
		return nil, err
	}
	return c.js.ObjectStore(ctx, cfg.Bucket)
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

// noDirect turns direct gets off on stream.
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
