package clusternode

import (
	"context"
	"encoding/json"
	"errors"
	"io"

	"github.com/sandbox-run/sandbox-run/pkg/cluster"
	"github.com/sandbox-run/sandbox-run/pkg/live"
)

// snapshotStore keeps live sandboxes' snapshots in the cluster's
// SR_SNAPSHOTS (a live.SnapshotStore): each a tar stream of its directory
// (live.PackDir), its record the live.Snapshot as JSON.
type snapshotStore struct{ c *cluster.Conn }

func (s snapshotStore) Put(ctx context.Context, sn *live.Snapshot, dir string) error {
	record, err := json.Marshal(sn)
	if err != nil {
		return err
	}
	// Each upload packs the directory anew; one given up ends its packing.
	var last *io.PipeReader
	open := func() io.Reader {
		if last != nil {
			last.CloseWithError(errors.New("the snapshot's upload is made again"))
		}
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(live.PackDir(pw, dir)) }()
		last = pr
		return pr
	}
	err = s.c.PutSnapshot(ctx, sn.ID, record, open)
	if last != nil {
		last.CloseWithError(errors.New("the snapshot's upload ended"))
	}
	return err
}

func (s snapshotStore) Stat(ctx context.Context, owner, id string) (*live.Snapshot, error) {
	record, err := s.c.SnapshotRecord(ctx, id)
	if err != nil {
		return nil, snapshotError(err)
	}
	return snapshotFrom(record, owner, id)
}

// snapshotFrom is the snapshot record says, when it is owner's snapshot id.
func snapshotFrom(record []byte, owner, id string) (*live.Snapshot, error) {
	var sn live.Snapshot
	if json.Unmarshal(record, &sn) != nil || sn.ID != id || sn.Owner != owner {
		return nil, live.ErrNoSuchSnapshot
	}
	return &sn, nil
}

func (s snapshotStore) Fetch(ctx context.Context, sn *live.Snapshot, dir string) error {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(s.c.GetSnapshot(ctx, sn.ID, pw)) }()
	err := live.UnpackDir(pr, dir)
	pr.CloseWithError(errors.New("the snapshot's download ended"))
	return snapshotError(err)
}

func (s snapshotStore) List(ctx context.Context, owner string) ([]*live.Snapshot, error) {
	all, err := s.c.Snapshots(ctx)
	if err != nil {
		return nil, err
	}
	var out []*live.Snapshot
	for _, o := range all {
		if sn, err := snapshotFrom(o.Record, owner, o.ID); err == nil {
			out = append(out, sn)
		}
	}
	return out, nil
}

func (s snapshotStore) Delete(ctx context.Context, owner, id string) error {
	if _, err := s.Stat(ctx, owner, id); err != nil {
		return err
	}
	return snapshotError(s.c.DeleteSnapshot(ctx, id))
}

// snapshotError is err as pkg/live names a snapshot that is not there.
func snapshotError(err error) error {
	if errors.Is(err, cluster.ErrNoSnapshot) {
		return live.ErrNoSuchSnapshot
	}
	return err
}
