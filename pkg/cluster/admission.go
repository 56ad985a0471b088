package cluster

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Admission bounds the sync runs an API node sends to the cluster: no more
// than the live workers' slots plus a queue may be waiting or running at
// once (counted by the cluster, so every API node sees the others' runs),
// and a run past that is refused at once, as a full single node refuses
// it.
type Admission struct {
	c     *Conn
	queue int

	// turn is held from the count to the run's publication (or its
	// refusal): one admission at a time on this node, so that no run is
	// counted twice (as being sent and as in the stream) or not at all.
	turn    chan struct{}
	slots   int
	slotsAt time.Time
}

// Admission is the bound for an API node whose queue is queue runs.
func (c *Conn) Admission(queue int) *Admission {
	return &Admission{c: c, queue: max(queue, 0), turn: make(chan struct{}, 1)}
}

// slotsEvery is how long the workers' slots are taken as known.
const slotsEvery = time.Second

// FullError is a run refused because the cluster is full.
type FullError struct{ Slots, Queued int }

func (e *FullError) Error() string {
	return fmt.Sprintf("all %d worker slots of the cluster are busy and %d executions are queued; retry later", e.Slots, e.Queued)
}

// Admit takes a place for one run, or refuses it with a *FullError (or
// the error that kept it from counting). sent must be called once the run
// is in the stream (Job.OnSubmitted) or will not be: the next run on this
// node is counted only then.
func (a *Admission) Admit(ctx context.Context) (sent func(), err error) {
	select {
	case a.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	release := func() { <-a.turn }
	if time.Since(a.slotsAt) > slotsEvery {
		ws, err := a.c.Workers(ctx)
		if err == nil && len(ws) == 0 && a.slots > 0 {
			// Every worker gone at once is rare; a listing through a
			// watch came back empty under load once (CI): read it again
			// before refusing every run.
			ws, err = a.c.Workers(ctx)
		}
		if err != nil {
			release()
			return nil, err
		}
		a.slots = 0
		for _, w := range ws {
			a.slots += w.Slots
		}
		a.slotsAt = time.Now()
	}
	n, err := a.c.Pending(ctx)
	if err != nil {
		release()
		return nil, err
	}
	if n >= a.slots+a.queue {
		release()
		return nil, &FullError{Slots: a.slots, Queued: max(0, n-a.slots)}
	}
	return sync.OnceFunc(release), nil
}
