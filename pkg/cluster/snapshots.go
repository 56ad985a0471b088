package cluster

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Snapshots of live sandboxes in a cluster: object store SR_SNAPSHOTS has
// one object per snapshot, named by its id: its directory's bytes (a tar
// stream the caller makes), its record (opaque here: the caller's JSON)
// sealed by the worker that took it in the object's metadata. Any worker
// starts sandboxes from it, any API node lists and deletes it. A record
// no node of the cluster sealed is not there.

// SnapshotsBucket is the object store of the live sandboxes' snapshots.
const SnapshotsBucket = "SR_SNAPSHOTS"

// metaSnapshot is the object metadata that holds a snapshot's sealed
// record (base64).
const metaSnapshot = "sandbox-run-snapshot"

// ErrNoSnapshot is a snapshot SR_SNAPSHOTS does not have.
var ErrNoSnapshot = errors.New("cluster: no such snapshot")

// SnapshotObject is a snapshot as SR_SNAPSHOTS lists it.
type SnapshotObject struct {
	ID     string
	Record []byte
	Size   uint64
}

func (c *Conn) snapshotStore(ctx context.Context) (jetstream.ObjectStore, error) {
	return c.snapshots.get(ctx, c, jetstream.ObjectStoreConfig{Bucket: SnapshotsBucket,
		Description: "sandbox-run: snapshots of live sandboxes", Storage: jetstream.FileStorage, Replicas: c.replicas})
}

// PutSnapshot keeps snapshot id: its record and the bytes open gives. A
// store just made, or a stream changing leaders, may answer none of a
// write ("no response from stream"): the upload is then made again, from a
// new reader of open, putAttempts times at most.
func (c *Conn) PutSnapshot(ctx context.Context, id string, record []byte, open func() io.Reader) error {
	if err := validID(id); err != nil {
		return err
	}
	obs, err := c.snapshotStore(ctx)
	if err != nil {
		return err
	}
	sealed := base64.StdEncoding.EncodeToString(c.seal(kindSnapshot, id, record))
	for attempt := 1; ; attempt++ {
		_, err = obs.Put(ctx, jetstream.ObjectMeta{Name: id, Metadata: map[string]string{metaSnapshot: sealed}}, open())
		if err == nil || attempt == putAttempts || ctx.Err() != nil || !retryable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt) * 250 * time.Millisecond):
		}
	}
}

// putAttempts bounds the uploads of one snapshot.
const putAttempts = 4

// SnapshotRecord is snapshot id's record (ErrNoSnapshot: none).
func (c *Conn) SnapshotRecord(ctx context.Context, id string) ([]byte, error) {
	if validID(id) != nil {
		return nil, ErrNoSnapshot
	}
	obs, err := c.snapshotStore(ctx)
	if err != nil {
		return nil, err
	}
	info, err := obs.GetInfo(ctx, id)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, ErrNoSnapshot
	}
	if err != nil {
		return nil, err
	}
	return c.snapshotOf(info)
}

// snapshotOf is the record of the snapshot info is the object of.
func (c *Conn) snapshotOf(info *jetstream.ObjectInfo) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(info.Metadata[metaSnapshot])
	if err != nil || info.Deleted {
		return nil, ErrNoSnapshot
	}
	record, ok := c.open(kindSnapshot, info.Name, raw)
	if !ok {
		return nil, ErrNoSnapshot // not sealed by a node of the cluster
	}
	return record, nil
}

// GetSnapshot writes snapshot id's bytes to w.
func (c *Conn) GetSnapshot(ctx context.Context, id string, w io.Writer) error {
	if validID(id) != nil {
		return ErrNoSnapshot
	}
	obs, err := c.snapshotStore(ctx)
	if err != nil {
		return err
	}
	res, err := obs.Get(ctx, id)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return ErrNoSnapshot
	}
	if err != nil {
		return err
	}
	defer res.Close()
	if _, err := io.Copy(w, res); err != nil {
		return fmt.Errorf("cluster: snapshot %s: %w", id, err)
	}
	return nil
}

// Snapshots lists the snapshots SR_SNAPSHOTS has.
func (c *Conn) Snapshots(ctx context.Context) ([]SnapshotObject, error) {
	obs, err := c.snapshotStore(ctx)
	if err != nil {
		return nil, err
	}
	infos, err := obs.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []SnapshotObject
	for _, info := range infos {
		if record, err := c.snapshotOf(info); err == nil {
			out = append(out, SnapshotObject{ID: info.Name, Record: record, Size: info.Size})
		}
	}
	return out, nil
}

// DeleteSnapshot deletes snapshot id (ErrNoSnapshot: none).
func (c *Conn) DeleteSnapshot(ctx context.Context, id string) error {
	if validID(id) != nil {
		return ErrNoSnapshot
	}
	obs, err := c.snapshotStore(ctx)
	if err != nil {
		return err
	}
	if _, err := obs.GetInfo(ctx, id); err != nil { // a deleted one is not found either
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			return ErrNoSnapshot
		}
		return err
	}
	err = obs.Delete(ctx, id)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return ErrNoSnapshot
	}
	return err
}
