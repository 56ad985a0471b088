package cluster

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// eventMsg is what travels on sandbox-run.out.<id>.
type eventMsg struct {
	Seq   uint64     `json:"seq"`
	Event wire.Event `json:"event"`
}

// replyMsg is what travels on sandbox-run.reply.<id>.
type replyMsg struct {
	Result *wire.Result `json:"result,omitempty"`
	Error  *RunError    `json:"error,omitempty"`
	// Events is how many events the worker sent before it.
	Events  uint64 `json:"events"`
	Worker  string `json:"worker"`
	Attempt int    `json:"attempt"`
	// Large names the object in SR_LARGE that holds the whole reply, when
	// it is larger than one message may be.
	Large string `json:"large,omitempty"`
}

// maxReorder bounds the events held back waiting for a missing one (a
// core NATS message lost in a reconnect): past it the gap is skipped.
const maxReorder = 1024

// Run submits job and waits for its result, calling onEvent (when not
// nil) with its events in order, from Run's goroutine. When ctx ends
// first, Run tells the worker to cancel the run, withdraws the job if no
// worker took it yet, and returns ctx.Err(). An error the worker reported
// is a *RunError.
//
// The job is published with its id as the message id: submitting the
// same id again within two minutes (a retry) does not run it twice; a
// second Run of an id that is still queued or running gets its result
// too, but one of an id that already finished waits until ctx ends (the
// result is not kept here: a caller that retries must look it up where
// results are stored). When a job is run
// again (its worker died), the events the caller already had are not
// repeated (they are told apart by sequence number only, so a second
// attempt that produced different output shows only what goes past the
// first one's) and only the first result counts.
func (c *Conn) Run(ctx context.Context, job Job, onEvent func(wire.Event)) (*wire.Result, error) {
	return c.run(ctx, job, onEvent, func(ctx context.Context, data []byte) (uint64, error) {
		ack, err := c.submit(ctx, job.ID, job.Async, data)
		if err != nil {
			return 0, err
		}
		return ack.Sequence, nil
	})
}

// run is Run with the job handed over by send (which returns its stream
// sequence, or 0 when it is not in the stream).
func (c *Conn) run(ctx context.Context, job Job, onEvent func(wire.Event), send func(context.Context, []byte) (uint64, error)) (*wire.Result, error) {
	submitted := sync.OnceFunc(func() {
		if job.OnSubmitted != nil {
			job.OnSubmitted()
		}
	})
	defer submitted()
	if err := validID(job.ID); err != nil {
		return nil, err
	}
	// One subscription for the run's reply and events: they reach the
	// caller in the order the worker sent them.
	sub, err := c.nc.SubscribeSync(runWildcard + job.ID)
	if err != nil {
		return nil, fmt.Errorf("cluster: subscribe: %w", err)
	}
	defer sub.Unsubscribe()
	_ = sub.SetPendingLimits(-1, 256<<20)
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = c.nc.FlushWithContext(fctx)
	cancel()
	if err != nil {
		return nil, c.abandon(ctx, job.ID, 0, err)
	}
	data, err := c.sealJob(&job)
	if err != nil {
		return nil, err
	}
	seq, err := send(ctx, data)
	submitted()
	if err != nil {
		return nil, c.abandon(ctx, job.ID, 0, err)
	}
	if job.Interactive && job.Stdin != nil {
		sctx, stopStdin := context.WithCancel(ctx)
		defer stopStdin()
		go c.sendStdin(sctx, job.ID, job.Stdin)
	}
	ord := reorder{next: 1, pending: map[uint64]wire.Event{}, emit: onEvent}
	bind := bindSeq(job.ID, seq) // what this run's events and reply are signed for
	for {
		msg, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return nil, c.abandon(ctx, job.ID, seq, err)
		}
		switch {
		case strings.HasPrefix(msg.Subject, pingPrefix):
			_ = msg.Respond(nil) // still waiting
		case strings.HasPrefix(msg.Subject, outPrefix):
			var ev eventMsg
			if data, ok := c.open(kindEvent, bind, msg.Data); ok && json.Unmarshal(data, &ev) == nil {
				ord.add(ev.Seq, ev.Event)
			}
		case strings.HasPrefix(msg.Subject, replyPrefix):
			var r replyMsg
			data, ok := c.open(kindReply, bind, msg.Data)
			if !ok {
				continue // not a worker's answer to this run: the caller waits on
			}
			if err := json.Unmarshal(data, &r); err != nil {
				continue
			}
			if r.Large != "" {
				if r, err = c.getLarge(ctx, r.Large, bind); err != nil {
					r = replyMsg{Error: &RunError{Kind: KindInternal, Msg: "result: " + err.Error()}}
				}
			}
			if msg.Reply != "" {
				_ = msg.Respond(nil)
			}
			ord.flush()
			if r.Error != nil {
				return nil, r.Error
			}
			if r.Result == nil {
				return nil, &RunError{Kind: KindInternal, Msg: "worker sent no result"}
			}
			return r.Result, nil
		}
	}
}

// submit publishes job id (sealed: data) to the stream, again while the
// stream has no leader (a node died), until ctx ends. The message id makes
// retries harmless.
func (c *Conn) submit(ctx context.Context, id string, async bool, data []byte) (*jetstream.PubAck, error) {
	subject := syncSubject
	if async {
		subject = asyncSubject
	}
	for {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ack, err := c.js.Publish(pctx, subject, data, jetstream.WithMsgID(id),
			jetstream.WithExpectStream(StreamName), jetstream.WithRetryAttempts(10))
		cancel()
		if err == nil {
			return ack, nil
		}
		if ctx.Err() != nil || !retryable(err) {
			return nil, fmt.Errorf("cluster: submit: %w", err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("cluster: submit: %w", err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// errCodeNoPeers is JetStream's "no suitable peers for placement": a
// cluster starting, or a node just gone, until the others see it.
const errCodeNoPeers jetstream.ErrorCode = 10005

// errCodeMsgIDInProcess is JetStream's "duplicate message id is in
// process": a retried submit reached the stream's leader while the first
// was proposed but not yet applied there (a worker may already run it).
// Asked again shortly, the leader answers a duplicate (or, had the first
// failed, stores this one).
const errCodeMsgIDInProcess jetstream.ErrorCode = 10158

func retryable(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.Code >= 500 || apiErr.ErrorCode == errCodeNoPeers || apiErr.ErrorCode == errCodeMsgIDInProcess) {
		return true // the cluster is electing a leader, has no quorum yet, does not see all its peers yet, or is applying the same job
	}
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return true // another node made the stream between our update and create: bind it next time
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrConnectionReconnecting)
}

// abandon handles the end of a Run without a result: when ctx ended it
// tells a worker to cancel the run and deletes the job if it is still
// queued (seq 0: never stored), and returns ctx.Err(); otherwise err.
func (c *Conn) abandon(ctx context.Context, id string, seq uint64, err error) error {
	if ctx.Err() == nil {
		if strings.HasPrefix(err.Error(), "cluster:") {
			return err
		}
		return fmt.Errorf("cluster: %w", err)
	}
	_ = c.nc.Publish(cancelPrefix+id, nil)
	if seq != 0 {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		_ = c.stream.DeleteMsg(dctx, seq) // fails when a worker already took and acked it
		cancel()
	}
	_ = c.nc.Flush()
	return ctx.Err()
}

// reorder delivers sequence-numbered events in order, once each.
type reorder struct {
	next    uint64
	pending map[uint64]wire.Event
	emit    func(wire.Event)
}

func (r *reorder) add(seq uint64, ev wire.Event) {
	if seq < r.next {
		return // a repeat: seen already, or a redelivered run's
	}
	r.pending[seq] = ev
	for {
		ev, ok := r.pending[r.next]
		if !ok {
			break
		}
		delete(r.pending, r.next)
		r.next++
		if r.emit != nil {
			r.emit(ev)
		}
	}
	if len(r.pending) > maxReorder {
		r.skipGap()
		r.add(r.next, r.pending[r.next])
	}
}

// skipGap moves next to the lowest held-back sequence.
func (r *reorder) skipGap() {
	keys := make([]uint64, 0, len(r.pending))
	for k := range r.pending {
		keys = append(keys, k)
	}
	r.next = slices.Min(keys)
}

// flush delivers what is held back, in order, skipping gaps.
func (r *reorder) flush() {
	for len(r.pending) > 0 {
		r.skipGap()
		r.add(r.next, r.pending[r.next])
	}
}

// WorkerInfo is a live worker as it announces itself in SR_WORKERS (or an
// API node, Role "api", with no slots).
type WorkerInfo struct {
	ID      string    `json:"id"`
	Role    string    `json:"role,omitempty"`
	Version string    `json:"version,omitempty"`
	Slots   int       `json:"slots"`
	Free    int       `json:"free"`
	Started time.Time `json:"started"`
}

// Workers lists the live workers (those that refreshed their entry in
// the last WorkerTTL), by id. The entries come from a watch of the
// bucket, on its stream's leader: a KV get may be answered by a replica
// that has not applied the latest write, which would miss a worker just
// announced (and have its claim on a callback taken over: a second
// delivery).
func (c *Conn) Workers(ctx context.Context) ([]WorkerInfo, error) {
	all, err := c.Nodes(ctx)
	return slices.DeleteFunc(all, func(w WorkerInfo) bool { return w.Role == RoleAPI }), err
}

// Nodes lists the live workers and API nodes, by id.
func (c *Conn) Nodes(ctx context.Context) ([]WorkerInfo, error) {
	var out []WorkerInfo
	err := currentEntries(ctx, c.kv, func(e jetstream.KeyValueEntry) {
		var w WorkerInfo
		if data, ok := c.open(kindPresence, e.Key(), e.Value()); ok && json.Unmarshal(data, &w) == nil {
			out = append(out, w)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: workers: %w", err)
	}
	slices.SortFunc(out, func(a, b WorkerInfo) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// currentEntries calls each with every current entry of kv, read through
// a watch: a consumer of the bucket's stream, on its leader. A KV get is a
// direct get that any replica may answer, one that has not applied the
// latest write among them: a count or a listing made of gets can miss
// what another node just wrote.
func currentEntries(ctx context.Context, kv jetstream.KeyValue, each func(jetstream.KeyValueEntry)) error {
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return cmp.Or(ctx.Err(), errors.New("the watch ended early"))
			}
			if e == nil {
				return nil // the current entries are all in
			}
			each(e)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Pending is how many sync runs are waiting for a worker or running
// (taken, not yet acknowledged).
func (c *Conn) Pending(ctx context.Context) (int, error) { return pending(ctx, c.cons) }

// PendingJobs is the same for async jobs.
func (c *Conn) PendingJobs(ctx context.Context) (int, error) { return pending(ctx, c.acons) }

func pending(ctx context.Context, cons jetstream.Consumer) (int, error) {
	info, err := cons.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("cluster: pending: %w", err)
	}
	return int(info.NumPending) + info.NumAckPending, nil
}
