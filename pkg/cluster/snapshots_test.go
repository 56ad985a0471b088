package cluster

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/nats-io/nats.go/jetstream"
)

// TestSnapshots: a worker keeps a snapshot in SR_SNAPSHOTS, any node reads
// its record and bytes and lists it, an API node deletes it; a record no
// worker sealed (an API node's) is not there; a name that is not a
// subject token is none.
func TestSnapshots(t *testing.T) {
	e := newEnv(t)
	wk, api := e.conn("worker"), e.conn("api")
	ctx, cancel := context.WithTimeout(context.Background(), bounded)
	defer cancel()
	data := bytes.Repeat([]byte("snapshot bytes "), 100000) // past one chunk
	// The first upload finds no stream to answer (as one to a store just
	// made, or to a stream changing leaders, may): it is made again.
	opened := 0
	open := func() io.Reader {
		opened++
		if opened == 1 {
			return io.MultiReader(bytes.NewReader(data[:1000]), iotest.ErrReader(jetstream.ErrNoStreamResponse))
		}
		return bytes.NewReader(data)
	}
	if err := wk.PutSnapshot(ctx, "snap1", []byte(`{"id":"snap1"}`), open); err != nil || opened != 2 {
		t.Fatalf("PutSnapshot: %v, after %d uploads", err, opened)
	}
	if rec, err := api.SnapshotRecord(ctx, "snap1"); err != nil || string(rec) != `{"id":"snap1"}` {
		t.Fatalf("the record from an API node: %q %v", rec, err)
	}
	var got bytes.Buffer
	if err := api.GetSnapshot(ctx, "snap1", &got); err != nil || !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("the bytes: %d of %d, %v", got.Len(), len(data), err)
	}
	// An API node may not make a snapshot's record: it is dropped.
	if err := api.PutSnapshot(ctx, "forged", []byte(`{"id":"forged"}`), func() io.Reader { return strings.NewReader("x") }); err != nil {
		t.Fatal(err)
	}
	if _, err := wk.SnapshotRecord(ctx, "forged"); !errors.Is(err, ErrNoSnapshot) {
		t.Errorf("a record an API node sealed: %v", err)
	}
	all, err := api.Snapshots(ctx)
	if err != nil || len(all) != 1 || all[0].ID != "snap1" || all[0].Size != uint64(len(data)) {
		t.Fatalf("the list: %+v %v", all, err)
	}
	for _, bad := range []string{"a.b", "", "a b"} {
		if _, err := api.SnapshotRecord(ctx, bad); !errors.Is(err, ErrNoSnapshot) {
			t.Errorf("snapshot %q: %v", bad, err)
		}
	}
	if err := api.DeleteSnapshot(ctx, "snap1"); err != nil {
		t.Fatal(err)
	}
	if _, err := wk.SnapshotRecord(ctx, "snap1"); !errors.Is(err, ErrNoSnapshot) {
		t.Errorf("a deleted snapshot's record: %v", err)
	}
	if err := api.GetSnapshot(ctx, "snap1", &got); !errors.Is(err, ErrNoSnapshot) {
		t.Errorf("a deleted snapshot's bytes: %v", err)
	}
	if err := api.DeleteSnapshot(ctx, "snap1"); !errors.Is(err, ErrNoSnapshot) {
		t.Errorf("a second delete: %v", err)
	}
}
