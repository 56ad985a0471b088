package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Live sandboxes in a cluster. Each lives on one worker, which keeps it as
// a single server does (pkg/live) and serves its calls over tunnels
// (ListenTunnels). KV SR_LIVE has one entry per sandbox, sealed by the
// worker that holds it (its id, owner and worker): put when the sandbox is
// created or taken over after the worker's restart, deleted when it ends,
// and put again while it lives (Keep: the bucket's entries expire, so
// that a dead worker's go with it). An API node finds a sandbox's worker
// there (Locate) and sends the sandbox's calls to it through a tunnel
// (DialTunnel); a create goes to the live worker that holds the fewest
// sandboxes (Place). A sandbox whose worker no longer announces itself is
// gone with it: Locate says so (an error for which IsWorkerGone is true)
// until its entry expires.

// LiveBucket is the KV bucket of the cluster's live sandboxes.
const LiveBucket = "SR_LIVE"

// LiveTTL is how long an entry of SR_LIVE lasts unless its worker puts it
// again; liveKeepEvery is how often a worker does.
var (
	LiveTTL       = 2 * time.Minute
	liveKeepEvery = 30 * time.Second
)

// LiveEntry is a live sandbox as SR_LIVE keeps it.
type LiveEntry struct {
	ID      string    `json:"id"`
	Owner   string    `json:"owner"`
	Worker  string    `json:"worker"`
	Created time.Time `json:"created"`
}

// ErrNoLiveSandbox is a sandbox SR_LIVE does not have.
var ErrNoLiveSandbox = errors.New("cluster: no such live sandbox")

// Live is the cluster's live sandboxes, as SR_LIVE keeps them.
type Live struct {
	c  *Conn
	kv jetstream.KeyValue
}

// Live makes (or finds) SR_LIVE.
func (c *Conn) Live(ctx context.Context) (*Live, error) {
	l := &Live{c: c}
	err := retry(ctx, func(ctx context.Context) (err error) {
		l.kv, err = c.kvBucket(ctx, jetstream.KeyValueConfig{Bucket: LiveBucket,
			Description: "sandbox-run: live sandboxes and the worker that holds each", TTL: LiveTTL, Replicas: c.replicas}, false)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: bucket %s: %w", LiveBucket, err)
	}
	return l, nil
}

// Put records e, a sandbox this worker holds.
func (l *Live) Put(ctx context.Context, e LiveEntry) error {
	if err := validID(e.ID); err != nil {
		return err
	}
	data, err := json.Marshal(e)
	if err != nil {
		return err
	}
	_, err = l.kv.Put(ctx, e.ID, l.c.seal(kindLive, e.ID, data))
	return err
}

// Delete forgets sandbox id (it ended).
func (l *Live) Delete(ctx context.Context, id string) error {
	if validID(id) != nil {
		return nil
	}
	err := l.kv.Delete(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	return err
}

// open reads an entry of SR_LIVE: ok is false for one not sealed by a
// worker (dropped and counted).
func (l *Live) open(key string, value []byte) (LiveEntry, bool) {
	data, ok := l.c.open(kindLive, key, value)
	var e LiveEntry
	if !ok || json.Unmarshal(data, &e) != nil || e.ID != key {
		return LiveEntry{}, false
	}
	return e, true
}

// Locate finds sandbox id: ErrNoLiveSandbox when SR_LIVE has no entry for
// it, and an error for which IsWorkerGone is true (with the entry) when
// its worker is gone.
func (l *Live) Locate(ctx context.Context, id string) (LiveEntry, error) {
	if validID(id) != nil {
		return LiveEntry{}, ErrNoLiveSandbox
	}
	kve, err := l.kv.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return LiveEntry{}, ErrNoLiveSandbox
	}
	if err != nil {
		return LiveEntry{}, err
	}
	e, ok := l.open(id, kve.Value())
	if !ok {
		return LiveEntry{}, ErrNoLiveSandbox
	}
	if !l.c.workerAlive(ctx, e.Worker) {
		return e, fmt.Errorf("live sandbox %s was on worker %s: %w", id, e.Worker, errWorkerGone)
	}
	return e, nil
}

// Entries lists the sandboxes of owner's (every sandbox's with all) whose
// workers are alive.
func (l *Live) Entries(ctx context.Context, owner string, all bool) ([]LiveEntry, error) {
	workers, err := l.c.Workers(ctx)
	if err != nil {
		return nil, err
	}
	alive := map[string]bool{}
	for _, w := range workers {
		alive[w.ID] = true
	}
	var out []LiveEntry
	err = currentEntries(ctx, l.kv, func(kve jetstream.KeyValueEntry) {
		if e, ok := l.open(kve.Key(), kve.Value()); ok && alive[e.Worker] && (all || e.Owner == owner) {
			out = append(out, e)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: live sandboxes: %w", err)
	}
	slices.SortFunc(out, func(a, b LiveEntry) int { return a.Created.Compare(b.Created) })
	return out, nil
}

// Place chooses the worker a new sandbox goes to: of the live workers,
// the one that holds the fewest live sandboxes.
func (l *Live) Place(ctx context.Context) (string, error) {
	workers, err := l.c.Workers(ctx)
	if err != nil {
		return "", err
	}
	if len(workers) == 0 {
		return "", fmt.Errorf("no worker is in the cluster to hold a live sandbox: %w", errWorkerGone)
	}
	held := map[string]int{}
	entries, err := l.Entries(ctx, "", true)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		held[e.Worker]++
	}
	best := workers[0].ID
	for _, w := range workers[1:] {
		if held[w.ID] < held[best] {
			best = w.ID
		}
	}
	return best, nil
}

// Keep puts the entries of the sandboxes this worker holds (held lists
// them) again every little while, until ctx ends, so that they outlast
// the bucket's TTL.
func (l *Live) Keep(ctx context.Context, held func() []LiveEntry) {
	t := time.NewTicker(liveKeepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, e := range held() {
			l.Put(ctx, e)
		}
	}
}
