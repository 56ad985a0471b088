package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sandbox-run/sandbox-run/internal/lib/records"
	"github.com/sandbox-run/sandbox-run/pkg/jobs"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// Async jobs in a cluster. The job's entry in SR_JOBS (pkg/jobs' Record,
// so its answers are a single node's) is made before the job is
// published, so any API node can answer it from the start; the worker
// that runs it marks it running, stores its result, and then sends its
// callback. The API node that took it has no part after that: it may die.
//
// Once per job: a job delivered again (its worker died) whose result is
// stored already is not run again; the callback is claimed in the entry
// (compare-and-set on its revision) by the one worker that sends it, and a
// claim by a worker that is no longer alive is taken over. A worker that
// dies after the receiver accepted the callback but before it recorded
// that can cause a second delivery: callbacks carry the execution id
// (X-Sandbox-Run-Execution-Id) for receivers to deduplicate.

// jobEntry is a job as SR_JOBS keeps it.
type jobEntry struct {
	*jobs.Record
	// Sender is the worker that claimed the callback's delivery.
	Sender string `json:"sender,omitempty"`
	// Worker, Attempt and AttemptAt are the delivery that runs the job
	// now: a job whose last delivery's worker is gone is given up by any
	// API node (Jobs.Serve).
	Worker    string    `json:"worker,omitempty"`
	Attempt   int       `json:"attempt,omitempty"`
	AttemptAt time.Time `json:"attempt_at,omitzero"`
	// Seq is the job's sequence in the stream.
	Seq uint64 `json:"seq,omitempty"`
}

// hookPending says whether the job has a callback that is neither
// delivered nor given up.
func (e *jobEntry) hookPending() bool {
	return e.CallbackURL != "" && e.Callback.Status == jobs.CallbackPending
}

// entryHistory is how many revisions of a job's entry SR_JOBS keeps: an
// entry a node of the cluster did not write is passed over for the last
// one that one did.
const entryHistory = 8

// JobsConfig sets up the async jobs of an API node.
type JobsConfig struct {
	// Queue is how many async jobs may wait for a worker (past it
	// QueueFull); 0 for no bound.
	Queue int
	// ResultTTL is how long a finished job's result is kept.
	ResultTTL time.Duration
	Log       *slog.Logger
}

// Jobs is the async jobs of a cluster as an API node serves them: the
// same methods as pkg/jobs' Manager.
type Jobs struct {
	c   *Conn
	cfg JobsConfig
}

// Jobs is the cluster's async jobs for an API node.
func (c *Conn) Jobs(cfg JobsConfig) *Jobs {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Jobs{c: c, cfg: cfg}
}

// Serve gives up, until ctx ends, the jobs that JetStream stops
// delivering (maxDeliver workers died running them, or would not take
// them): their entries say so as their result, instead of running
// forever. JetStream says so once, when it happens (an advisory, taken by
// one API node of those serving: a queue group); a job given up while no
// API node was there to hear it is found by a sweep of the jobs still in
// the stream, which every API node makes every while.
func (j *Jobs) Serve(ctx context.Context, draining func() bool) {
	sub, err := j.c.nc.QueueSubscribe(maxDeliveriesAdvisory+AsyncConsumerName, "sandbox-run-api", func(m *nats.Msg) {
		var adv struct {
			StreamSeq uint64 `json:"stream_seq"`
		}
		if json.Unmarshal(m.Data, &adv) == nil && adv.StreamSeq > 0 {
			j.giveUp(adv.StreamSeq)
		}
	})
	if err != nil {
		j.cfg.Log.Error("cluster: cannot watch for jobs given up", "error", err)
	} else {
		defer sub.Unsubscribe()
	}
	every := min(max(j.c.ackWait/3, time.Second), 10*time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		j.sweep(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweepMax bounds the jobs one sweep looks at.
const sweepMax = 1000

// sweep gives up the async jobs still in the stream whose last delivery's
// worker is gone (dead, and its ack wait over), and removes those whose
// result is stored already.
func (j *Jobs) sweep(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	info, err := j.c.acons.Info(ctx)
	if err != nil || info.Delivered.Stream == 0 {
		return
	}
	si, err := j.c.stream.Info(ctx)
	if err != nil {
		return
	}
	var live map[string]bool
	for seq, n := si.State.FirstSeq, 0; seq <= info.Delivered.Stream && n < sweepMax; n++ {
		raw, err := j.c.stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(asyncSubject))
		if err != nil || raw.Sequence > info.Delivered.Stream {
			return
		}
		seq = raw.Sequence + 1
		job, ok, err := j.c.peekJob(raw.Data)
		if !ok || err != nil {
			continue
		}
		e, _, err := j.c.loadJob(ctx, job.ID)
		if err != nil {
			continue
		}
		if e.Done() {
			if !e.hookPending() {
				_ = j.c.stream.DeleteMsg(ctx, raw.Sequence) // its worker died before it acknowledged it
			}
			// A callback still to send stays: its next delivery sends it
			// (a dead sender's claim is taken over).
			continue
		}
		if e.Attempt < maxDeliver || e.Seq != raw.Sequence || time.Since(e.AttemptAt) < j.c.ackWait {
			continue
		}
		if live == nil {
			live = map[string]bool{}
			ws, err := j.c.Workers(ctx)
			if err != nil {
				return
			}
			for _, w := range ws {
				live[w.ID] = true
			}
		}
		if !live[e.Worker] {
			j.giveUp(raw.Sequence)
		}
	}
}

// maxDeliveriesAdvisory is the subject (and consumer) where JetStream says
// a message reached its consumer's MaxDeliver.
const maxDeliveriesAdvisory = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + StreamName + "."

// giveUp stores the failed result of the job at stream sequence seq, and
// removes the job from the stream.
func (j *Jobs) giveUp(seq uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	raw, err := j.c.stream.GetMsg(ctx, seq)
	if err != nil {
		return
	}
	job, ok, err := j.c.peekJob(raw.Data)
	if !ok || err != nil {
		return
	}
	reason := fmt.Sprintf("given up: %d workers died or failed running this execution", maxDeliver)
	_, changed, err := j.c.updateJob(ctx, job.ID, func(e *jobEntry) bool {
		if e.Done() {
			if !e.hookPending() {
				return false
			}
			// Its result is stored but no worker lived to send its callback.
			e.Callback.Status, e.Callback.Error, e.Callback.FailedAt = jobs.CallbackFailed, reason, time.Now().UTC()
			return true
		}
		e.Finish(jobs.FailedResult(job.ID, e.Language, reason))
		if e.CallbackURL != "" {
			e.Callback.Status, e.Callback.Error, e.Callback.FailedAt = jobs.CallbackFailed, reason, time.Now().UTC()
		}
		return true
	})
	if err == nil || errors.Is(err, jobs.ErrNotFound) {
		_ = j.c.stream.DeleteMsg(ctx, seq)
	}
	if changed {
		j.cfg.Log.Error("async execution given up", "execution_id", job.ID, "reason", reason)
	}
}

// Available says whether the cluster takes jobs now.
func (j *Jobs) Available(ctx context.Context) error {
	if !j.c.nc.IsConnected() {
		return &jobs.Error{Kind: jobs.Unavailable, Msg: "not connected to the NATS cluster"}
	}
	return nil
}

// Submit stores a queued job of keyID's and publishes it.
func (j *Jobs) Submit(ctx context.Context, keyID, language string, req *wire.ExecuteRequest) (wire.JobStatus, error) {
	return j.SubmitWith(ctx, keyID, language, req, jobs.Options{})
}

// SubmitWith is Submit of a job that opt says more of: its kind and the
// transport's record of it are kept with it. A worker runs it once
// (opt.Runs is not repeated on a cluster yet) and sends its callback in
// the native API's form.
func (j *Jobs) SubmitWith(ctx context.Context, keyID, language string, req *wire.ExecuteRequest, opt jobs.Options) (wire.JobStatus, error) {
	if j.cfg.Queue > 0 {
		n, err := j.c.PendingJobs(ctx)
		if err != nil {
			return wire.JobStatus{}, &jobs.Error{Kind: jobs.Unavailable, Msg: err.Error(), Err: err}
		}
		if n >= j.cfg.Queue {
			return wire.JobStatus{}, &jobs.Error{Kind: jobs.QueueFull, Msg: fmt.Sprintf("%d async executions are queued in the cluster; retry later", n)}
		}
	}
	rec := jobs.NewRecord(records.NewID("exec_"), keyID, language, req.CallbackURL)
	rec.Kind, rec.Meta = opt.Kind, opt.Meta
	data, err := json.Marshal(jobEntry{Record: rec})
	if err != nil {
		return wire.JobStatus{}, &jobs.Error{Kind: jobs.Invalid, Msg: err.Error(), Err: err}
	}
	data = j.c.seal(kindEntry, rec.ID, data)
	err = retry(ctx, func(ctx context.Context) error {
		_, err := j.c.jobs.Create(ctx, rec.ID, data)
		return err
	})
	if err != nil {
		return wire.JobStatus{}, &jobs.Error{Kind: jobs.Unavailable, Msg: "storing the job: " + err.Error(), Err: err}
	}
	job := Job{ID: rec.ID, Tenant: keyID, Request: *req, Async: true}
	sealed, err := j.c.sealJob(&job)
	if err == nil {
		_, err = j.c.submit(ctx, job.ID, true, sealed)
	}
	if err != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = j.c.jobs.Delete(dctx, rec.ID)
		cancel()
		return wire.JobStatus{}, &jobs.Error{Kind: jobs.Unavailable, Msg: err.Error(), Err: err}
	}
	j.cfg.Log.Info("async execution queued", "execution_id", rec.ID, "language", language, "key_id", keyID)
	return rec.Answer().Status, nil
}

// Get answers job id of keyID's, waiting up to wait for it to finish.
func (j *Jobs) Get(ctx context.Context, id, keyID string, wait time.Duration) (jobs.Answer, error) {
	if validID(id) != nil || len(id) > 64 {
		return jobs.Answer{}, jobs.ErrNotFound
	}
	e, rev, err := j.c.loadJob(ctx, id)
	if err == nil && !e.Done() && wait > 0 {
		e, err = j.c.waitJob(ctx, id, rev, wait)
	}
	switch {
	case errors.Is(err, jobs.ErrNotFound):
		return jobs.Answer{}, jobs.ErrNotFound
	case err != nil:
		return jobs.Answer{}, &jobs.Error{Kind: jobs.Unavailable, Msg: err.Error(), Err: err}
	case e.KeyID != keyID || e.Expired(j.cfg.ResultTTL):
		return jobs.Answer{}, jobs.ErrNotFound
	}
	return e.Answer(), nil
}

// loadJob reads job id's entry and its revision. An entry no node of the
// cluster wrote (forged) is passed over for the last one a node did, with
// the revision of the latest, so that the next update replaces it.
func (c *Conn) loadJob(ctx context.Context, id string) (jobEntry, uint64, error) {
	var kv jetstream.KeyValueEntry
	err := retry(ctx, func(ctx context.Context) (err error) {
		kv, err = c.jobs.Get(ctx, id)
		return err
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return jobEntry{}, 0, jobs.ErrNotFound
	}
	if err != nil {
		return jobEntry{}, 0, fmt.Errorf("cluster: job %s: %w", id, err)
	}
	e, ok, err := c.readEntry(id, kv.Value())
	if err != nil {
		return jobEntry{}, 0, err
	}
	if !ok {
		if e, ok = c.lastGoodEntry(ctx, id); !ok {
			return jobEntry{}, 0, jobs.ErrNotFound
		}
	}
	return e, kv.Revision(), nil
}

// readEntry reads an entry of SR_JOBS: ok is false when no node of the
// cluster wrote it (counted).
func (c *Conn) readEntry(id string, data []byte) (jobEntry, bool, error) {
	payload, ok := c.open(kindEntry, id, data)
	if !ok {
		return jobEntry{}, false, nil
	}
	e := jobEntry{Record: &jobs.Record{}}
	if err := json.Unmarshal(payload, &e); err != nil {
		return jobEntry{}, false, fmt.Errorf("cluster: job %s: %w", id, err)
	}
	return e, true, nil
}

// lastGoodEntry is the newest revision of job id's entry a node wrote.
func (c *Conn) lastGoodEntry(ctx context.Context, id string) (jobEntry, bool) {
	hist, err := c.jobs.History(ctx, id)
	if err != nil {
		return jobEntry{}, false
	}
	for i := len(hist) - 1; i >= 0; i-- {
		if hist[i].Operation() != jetstream.KeyValuePut {
			return jobEntry{}, false
		}
		payload, err := c.keys.Open(kindEntry, id, hist[i].Value())
		if err != nil {
			continue
		}
		e := jobEntry{Record: &jobs.Record{}}
		if json.Unmarshal(payload, &e) == nil {
			return e, true
		}
	}
	return jobEntry{}, false
}

// waitJob waits until job id is done or d passes, and returns it as it
// then is.
func (c *Conn) waitJob(ctx context.Context, id string, rev uint64, d time.Duration) (jobEntry, error) {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	w, err := c.jobs.Watch(wctx, id, jetstream.UpdatesOnly())
	if err == nil {
		defer w.Stop()
		// Read again: the job may have finished before the watch began.
		if e, _, err := c.loadJob(ctx, id); err != nil || e.Done() {
			return e, err
		}
		for {
			select {
			case kv := <-w.Updates():
				if kv == nil || kv.Operation() != jetstream.KeyValuePut {
					continue
				}
				if e, ok, err := c.readEntry(id, kv.Value()); ok && err == nil && e.Done() {
					return e, nil
				}
				continue
			case <-wctx.Done():
			}
			break
		}
	}
	e, _, err := c.loadJob(context.WithoutCancel(ctx), id)
	return e, err
}

// updateJob changes job id's entry with change, again on a conflict with
// another writer; change returns false to leave it as it is. It returns
// the entry as stored (or as found, when change declined).
func (c *Conn) updateJob(ctx context.Context, id string, change func(*jobEntry) bool) (jobEntry, bool, error) {
	for {
		e, rev, err := c.loadJob(ctx, id)
		if err != nil {
			return e, false, err
		}
		if !change(&e) {
			return e, false, nil
		}
		data, err := json.Marshal(e)
		if err != nil {
			return e, false, err
		}
		data = c.seal(kindEntry, id, data)
		err = retry(ctx, func(ctx context.Context) error {
			_, err := c.jobs.Update(ctx, id, data, rev)
			return err
		})
		if err == nil {
			return e, true, nil
		}
		var apiErr *jetstream.APIError
		if !(errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence) &&
			!errors.Is(err, jetstream.ErrKeyExists) {
			return e, false, fmt.Errorf("cluster: job %s: %w", id, err)
		}
		if ctx.Err() != nil {
			return e, false, ctx.Err()
		}
	}
}

// Notifier sends a finished job's callback (pkg/jobs' Notifier: the
// worker's pkg/webhook sender).
type Notifier = jobs.Notifier

// asyncRun runs an async job on the worker: once, its result stored in
// SR_JOBS. It says whether the job has a callback to send (callback).
func (w *worker) asyncRun(ctx context.Context, job Job, run func(context.Context) (*wire.Result, error)) (hook bool) {
	c := w.c
	bg := context.Background()
	e, _, err := c.updateJob(bg, job.ID, func(e *jobEntry) bool {
		if e.Done() {
			return false
		}
		e.Start()
		e.Worker, e.Attempt, e.AttemptAt, e.Seq = w.info.ID, job.Attempt, time.Now().UTC(), job.Seq
		return true
	})
	if err != nil {
		w.log().Error("async job: cannot read its entry", "execution_id", job.ID, "error", err)
		return false
	}
	if !e.Done() {
		res, err := run(ctx)
		var raw json.RawMessage
		switch {
		case err != nil:
			raw = jobs.FailedResult(job.ID, e.Language, err.Error())
		default:
			res.ExecutionID = job.ID
			raw, err = json.Marshal(res)
			if err != nil {
				raw = jobs.FailedResult(job.ID, e.Language, "result: "+err.Error())
			}
		}
		raw = jobs.CapResult(raw, w.maxResult(), "the result is larger than a cluster stores")
		// A result is stored until it is (or the entry is gone): never
		// dropped while the job shows as running.
		for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
			e, _, err = c.updateJob(bg, job.ID, func(e *jobEntry) bool {
				if e.Done() {
					return false // another delivery of the job stored one first
				}
				e.Finish(raw)
				return true
			})
			if err == nil || errors.Is(err, jobs.ErrNotFound) {
				break
			}
			w.log().Error("async job: cannot store its result, retrying", "execution_id", job.ID, "error", err)
			time.Sleep(wait)
		}
		if err != nil {
			return false
		}
		w.log().Info("async execution finished", "execution_id", job.ID, "attempt", job.Attempt)
	}
	return e.CallbackURL != ""
}

// callback claims and sends job id's callback, unless it is delivered,
// given up, or claimed by a live worker. An error says the entry could not
// be read or claimed: the job's next delivery tries again.
func (w *worker) callback(id string) error {
	c, bg := w.c, context.Background()
	live := map[string]bool{}
	if ws, err := c.Workers(bg); err == nil {
		for _, x := range ws {
			live[x.ID] = true
		}
	}
	e, claimed, err := c.updateJob(bg, id, func(e *jobEntry) bool {
		if !e.Done() || e.Callback.Status != jobs.CallbackPending {
			return false
		}
		if e.Sender != "" && e.Sender != w.info.ID && live[e.Sender] {
			return false
		}
		e.Sender = w.info.ID
		return true
	})
	if errors.Is(err, jobs.ErrNotFound) {
		return nil
	}
	if err != nil || !claimed {
		return err
	}
	if w.notify == nil {
		w.saveCallback(id, func(cb *wire.CallbackStatus) {
			cb.Status, cb.Error, cb.FailedAt = jobs.CallbackFailed, "this worker sends no callbacks", time.Now().UTC()
		})
		return nil
	}
	cb := e.Callback
	attempts, err := w.notify.Deliver(bg, e.CallbackURL, id, e.CallbackBody(), func(a jobs.Attempt) {
		jobs.ApplyAttempt(&cb, a)
		state := cb
		w.saveCallback(id, func(x *wire.CallbackStatus) { *x = state })
	})
	if err != nil && attempts == 0 {
		w.saveCallback(id, func(cb *wire.CallbackStatus) {
			cb.Status, cb.Error, cb.FailedAt = jobs.CallbackFailed, err.Error(), time.Now().UTC()
		})
	}
	return nil
}

func (w *worker) saveCallback(id string, change func(*wire.CallbackStatus)) {
	_, _, err := w.c.updateJob(context.Background(), id, func(e *jobEntry) bool {
		change(&e.Callback)
		return true
	})
	if err != nil && !errors.Is(err, jobs.ErrNotFound) {
		w.log().Error("async job: cannot store its callback's state", "execution_id", id, "error", err)
	}
}

// maxResult is the most a stored result may take: the worker's
// max_result_bytes, within what one NATS message carries.
func (w *worker) maxResult() int64 {
	limit := w.c.nc.MaxPayload() - 16<<10
	if w.opts.MaxResultBytes > 0 {
		limit = min(limit, w.opts.MaxResultBytes)
	}
	return limit
}
