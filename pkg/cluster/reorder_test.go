package cluster

import (
	"fmt"
	"slices"
	"testing"

	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

func TestReorder(t *testing.T) {
	var got []string
	r := reorder{next: 1, pending: map[uint64]wire.Event{}, emit: func(ev wire.Event) { got = append(got, ev.Data) }}
	ev := func(s string) wire.Event { return wire.Event{Data: s} }
	r.add(2, ev("b"))
	r.add(1, ev("a"))
	r.add(1, ev("a again")) // a repeat (redelivered run)
	r.add(3, ev("c"))
	r.add(5, ev("e")) // 4 lost
	if want := []string{"a", "b", "c"}; !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	r.flush() // the result came: the gap is skipped
	if want := []string{"a", "b", "c", "e"}; !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	r.add(4, ev("late")) // behind: dropped
	if len(got) != 4 {
		t.Fatalf("got %q", got)
	}

	// Past maxReorder held back, a gap is skipped without waiting for the
	// result.
	got = nil
	r = reorder{next: 1, pending: map[uint64]wire.Event{}, emit: func(ev wire.Event) { got = append(got, ev.Data) }}
	for i := uint64(2); i <= maxReorder+2; i++ {
		r.add(i, ev(fmt.Sprint(i)))
	}
	if len(got) != maxReorder+1 || got[0] != "2" || len(r.pending) != 0 {
		t.Fatalf("%d delivered (first %q), %d held", len(got), got[:min(1, len(got))], len(r.pending))
	}
}
