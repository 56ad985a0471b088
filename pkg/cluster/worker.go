package cluster

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// RunFunc runs one job on a worker. ctx ends when the API side cancels
// the run or the job's deadline passes. emit sends an event to the API
// side (safe from several goroutines; a no-op once RunFunc returned). An
// error is sent back as a *RunError (KindInternal unless it is one) and
// the job is not run again.
type RunFunc func(ctx context.Context, job Job, emit func(wire.Event)) (*wire.Result, error)

// fetchWait bounds one waiting pull: how long a stopping worker may wait
// for the pull it has out, and an async job for an idle worker.
const fetchWait = 250 * time.Millisecond

// Work takes jobs and runs them with run, at most slots at a time: it
// asks for a job only when a slot is free. It announces itself in
// SR_WORKERS while it works. When ctx ends it stops taking jobs, gives
// back (Nak) a job it took but did not start, lets the running ones
// finish (each is bounded by its deadline), removes its entry and returns
// nil. It returns an error when it cannot work at all (slots < 1, the
// connection closed).
func (c *Conn) Work(ctx context.Context, slots int, run RunFunc) error {
	return c.WorkWith(ctx, WorkOptions{Slots: slots, Run: run})
}

// WorkOptions says how a worker works.
type WorkOptions struct {
	// Slots is how many jobs run at once; Run runs one.
	Slots int
	Run   RunFunc
	// Notify sends async jobs' callbacks; without it they fail.
	Notify Notifier
	// MaxResultBytes caps an async job's stored result (within what one
	// NATS message carries); 0 for that bound alone.
	MaxResultBytes int64
	Log            *slog.Logger
	// Sessions is the executor's session side: a worker without one
	// refuses sessions' operations.
	Sessions SessionHost
	// OnStart, when set, is called with the worker's id once it works.
	OnStart func(id string)
	// ID is the worker's id (NewWorkerID: one made before it works, for
	// what it serves besides jobs); "" makes one.
	ID string
}

// NewWorkerID is a fresh id for a worker of c (WorkOptions.ID).
func (c *Conn) NewWorkerID() string { return workerID(c.name) }

// WorkWith is Work with all its options.
func (c *Conn) WorkWith(ctx context.Context, o WorkOptions) error {
	slots, run := o.Slots, o.Run
	if slots < 1 {
		return fmt.Errorf("cluster: %d worker slots", slots)
	}
	w := &worker{
		c: c, run: run, opts: o, notify: o.Notify,
		info:    WorkerInfo{ID: cmp.Or(o.ID, workerID(c.name)), Version: c.version, Slots: slots, Free: slots, Started: time.Now().UTC()},
		changed: make(chan struct{}, 1),
	}
	free := make(chan struct{}, slots) // a token per busy slot
	var running sync.WaitGroup
	// Sessions' runs come straight to this worker, and take a slot too.
	direct, err := w.serveDirect(func(job Job) {
		running.Add(1)
		defer running.Done()
		select {
		case free <- struct{}{}:
		case <-time.After(untilOr(job.Deadline, time.Hour)):
			w.reply(job, replyMsg{Worker: w.info.ID, Attempt: 1, Error: &RunError{Kind: KindDeadline, Msg: "the run's deadline passed before its session's worker was free"}})
			return
		}
		w.setFree(-1)
		defer func() { w.setFree(+1); <-free }()
		w.runSync(job, directDelivery{w, job})
	}, o.Sessions)
	if err != nil {
		return fmt.Errorf("cluster: work: %w", err)
	}
	// Announced only once it answers what is sent straight to it.
	if o.OnStart != nil {
		o.OnStart(w.info.ID)
	}
	presenceDone := make(chan struct{})
	pctx, stopPresence := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		defer close(presenceDone)
		w.announce(pctx)
	}()
	for ctx.Err() == nil {
		if c.nc.IsClosed() {
			err = errors.New("cluster: work: the connection is closed")
			break
		}
		select {
		case free <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		msg, ferr := w.fetch(ctx)
		if msg == nil || ferr != nil {
			<-free
			if ferr != nil {
				sleep(ctx, 250*time.Millisecond) // reconnecting, or the stream is electing a leader
			}
			continue
		}
		if ctx.Err() != nil {
			_ = msg.Nak()
			<-free
			break
		}
		w.setFree(-1)
		running.Add(1)
		go func() {
			defer running.Done()
			defer func() { w.setFree(+1); <-free }()
			w.handle(msg)
		}()
	}
	_ = direct.Unsubscribe()
	running.Wait()
	w.hooks.Wait()
	stopPresence()
	<-presenceDone
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_ = c.kv.Purge(dctx, w.info.ID)
	return err
}

type worker struct {
	c      *Conn
	run    RunFunc
	opts   WorkOptions
	notify Notifier
	// snapshot copies a session's files to the cluster (serveDirect).
	snapshot func(id string)
	hooks    sync.WaitGroup // callbacks being sent

	mu      sync.Mutex
	info    WorkerInfo
	changed chan struct{}
}

// fetch asks for one job: a sync run if one waits, else an async job if
// one waits, else a sync run waiting at most fetchWait (an idle worker
// sees an async job within fetchWait); (nil, nil) when there was none.
func (w *worker) fetch(ctx context.Context) (jetstream.Msg, error) {
	for _, try := range []func() (jetstream.MessageBatch, error){
		func() (jetstream.MessageBatch, error) { return w.c.cons.FetchNoWait(1) },
		func() (jetstream.MessageBatch, error) { return w.c.acons.FetchNoWait(1) },
		func() (jetstream.MessageBatch, error) { return w.c.cons.Fetch(1, jetstream.FetchMaxWait(fetchWait)) },
	} {
		if m, err := w.take(ctx, try); m != nil || err != nil {
			return m, err
		}
	}
	return nil, nil
}

// take makes one pull and returns the message it got.
func (w *worker) take(ctx context.Context, pull func() (jetstream.MessageBatch, error)) (jetstream.Msg, error) {
	batch, err := pull()
	if err != nil {
		return nil, err
	}
	var got jetstream.Msg
	for m := range batch.Messages() {
		if got != nil { // never with a batch of 1; give back, do not lose
			_ = m.Nak()
			continue
		}
		got = m
	}
	if got == nil && batch.Error() != nil && ctx.Err() == nil {
		return nil, batch.Error()
	}
	return got, nil
}

// handle runs one job and reports its events and result, then
// acknowledges it.
func (w *worker) handle(msg jetstream.Msg) {
	var seq uint64
	md, mdErr := msg.Metadata()
	if mdErr == nil {
		seq = md.Sequence.Stream
	}
	job, ok, err := w.c.openJob(msg.Data(), seq)
	if !ok {
		_ = msg.TermWithReason("sandbox-run: not a job of this cluster's API nodes")
		return
	}
	if err != nil {
		// A job this worker cannot read (a newer API node's request
		// field, say): tell the caller rather than leave it waiting.
		w.reply(job, replyMsg{Worker: w.info.ID, Error: &RunError{Kind: KindInvalid, Msg: "the worker cannot read the job: " + err.Error()}})
		_ = msg.TermWithReason("sandbox-run: not a job")
		return
	}
	if mdErr == nil {
		job.Attempt = int(md.NumDelivered)
	}
	if job.Async {
		w.handleAsync(msg, job)
		return
	}
	reply := replyMsg{Worker: w.info.ID, Attempt: job.Attempt}
	if !job.Deadline.IsZero() && !time.Now().Before(job.Deadline) {
		reply.Error = &RunError{Kind: KindDeadline, Msg: "the run's deadline passed before a worker was free"}
		w.reply(job, reply)
		_ = msg.TermWithReason("sandbox-run: deadline passed")
		return
	}

	if job.Interactive && job.Attempt > 1 {
		// Its stdin went to the worker that died: it cannot be run again.
		w.reply(job, replyMsg{Worker: w.info.ID, Attempt: job.Attempt, Error: &RunError{Kind: KindInternal,
			Msg: "the worker running this interactive run died (its stdin went with it)"}})
		_ = msg.TermWithReason("sandbox-run: interactive run lost")
		return
	}
	w.runSync(job, jsDelivery{w, msg})
}

// delivery is how a sync job came: from the stream (acknowledged when
// done) or straight to this worker (a session's run).
type delivery interface {
	inProgress()
	// settle ends the delivery (errKind "" when the run has a result)
	// before the reply is sent; wait is called after it was.
	settle(errKind string) (wait func())
}

// directDelivery is a session's run sent straight to this worker: when
// it has a result, the session's files are copied to the cluster before
// the reply goes.
type directDelivery struct {
	w   *worker
	job Job
}

func (d directDelivery) inProgress() {}

func (d directDelivery) settle(errKind string) func() {
	if id := d.job.Request.SessionID; errKind == "" && id != "" {
		d.w.snapshot(id)
	}
	return func() {}
}

type jsDelivery struct {
	w   *worker
	msg jetstream.Msg
}

func (d jsDelivery) inProgress() { _ = d.msg.InProgress() }

// settle acknowledges the job before the reply (a caller's next run should
// not find this one still counted as running: Admission), confirmed while
// the reply travels.
func (d jsDelivery) settle(errKind string) func() {
	acked := make(chan struct{})
	go func() {
		defer close(acked)
		if errKind != "" {
			_ = d.msg.TermWithReason("sandbox-run: " + errKind)
		} else {
			d.w.ack(d.msg)
		}
	}()
	return func() { <-acked }
}

// runSync runs a job whose caller waits, sending its events and then its
// reply.
func (w *worker) runSync(job Job, d delivery) {
	c := w.c
	reply := replyMsg{Worker: w.info.ID, Attempt: job.Attempt}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if !job.Deadline.IsZero() {
		ctx, cancel = context.WithDeadline(ctx, job.Deadline)
		defer cancel()
	}
	if job.Interactive {
		stdin, end, err := c.receiveStdin(job.ID)
		if err != nil {
			reply.Error = &RunError{Kind: KindInternal, Msg: "stdin: " + err.Error()}
			wait := d.settle(reply.Error.Kind.String())
			w.reply(job, reply)
			wait()
			return
		}
		defer end()
		job.Stdin = stdin
	}
	var callerGone atomic.Bool // nobody waits for the result any more
	// A cancel sent before the server has this subscription is missed;
	// the pings below catch a caller gone by then.
	csub, err := c.nc.Subscribe(cancelPrefix+job.ID, func(*nats.Msg) { callerGone.Store(true); cancel() })
	if err == nil {
		defer csub.Unsubscribe()
	}

	// Signs of life while the run lasts, so the job is not given to
	// another worker; and a ping to the API side, so a run whose caller
	// is gone (a cancel message lost, the API node dead) is canceled.
	alive := make(chan struct{})
	aliveDone := make(chan struct{})
	go func() {
		defer close(aliveDone)
		every := min(10*time.Second, c.ackWait/3)
		t := time.NewTicker(every)
		defer t.Stop()
		gone := 0
		for {
			select {
			case <-alive:
				return
			case <-t.C:
				d.inProgress()
				_, err := c.nc.Request(pingPrefix+job.ID, nil, every)
				if errors.Is(err, nats.ErrNoResponders) {
					if gone++; gone >= 2 {
						callerGone.Store(true)
						cancel()
					}
				} else {
					gone = 0
				}
			}
		}
	}()

	var mu sync.Mutex
	var seq uint64
	done := false
	emit := func(ev wire.Event) {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return
		}
		seq++
		data, _ := json.Marshal(eventMsg{Seq: seq, Event: ev})
		_ = c.nc.Publish(outPrefix+job.ID, c.seal(kindEvent, bindSeq(job.ID, job.Seq), data))
	}
	res, runErr := w.run(ctx, job, emit)
	mu.Lock()
	done = true
	reply.Events = seq
	mu.Unlock()
	close(alive)
	<-aliveDone

	if runErr != nil {
		var re *RunError
		if !errors.As(runErr, &re) {
			re = &RunError{Kind: KindInternal, Msg: runErr.Error()}
		}
		reply.Error = re
	} else if res == nil {
		reply.Error = &RunError{Kind: KindInternal, Msg: "the worker produced no result"}
	} else {
		res.Worker = w.info.ID
		reply.Result = res
	}
	kind := ""
	if reply.Error != nil {
		kind = reply.Error.Kind.String()
	}
	wait := d.settle(kind)
	if !callerGone.Load() {
		w.reply(job, reply)
	}
	wait()
}

// handleAsync runs an async job (asyncRun) while telling the server it
// is alive, and acknowledges it once its result and callback are done
// with.
func (w *worker) handleAsync(msg jetstream.Msg, job Job) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if !job.Deadline.IsZero() {
		ctx, cancel = context.WithDeadline(ctx, job.Deadline)
		defer cancel()
	}
	stop := w.keepAlive(msg)
	hook := w.asyncRun(ctx, job, func(ctx context.Context) (*wire.Result, error) {
		res, err := w.run(ctx, job, func(wire.Event) {})
		if err == nil && res == nil {
			err = errors.New("the worker produced no result")
		}
		return res, err
	})
	if !hook {
		stop()
		w.ack(msg)
		return
	}
	// The callback is sent without holding the slot (a slow receiver
	// must not keep runs waiting), the job acknowledged once it is: a
	// worker that dies first leaves it to the next delivery.
	w.hooks.Add(1)
	go func() {
		defer w.hooks.Done()
		err := w.callback(job.ID)
		stop()
		if err != nil {
			// Not acknowledged: the job comes again once its ack wait is over.
			w.log().Error("async job: cannot claim its callback; it is tried again", "execution_id", job.ID, "error", err)
			return
		}
		w.ack(msg)
	}()
}

// keepAlive tells the server every while that msg's job is in progress,
// until stop is called.
func (w *worker) keepAlive(msg jetstream.Msg) (stop func()) {
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(min(10*time.Second, w.c.ackWait/3))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = msg.InProgress()
			}
		}
	}()
	return func() { close(done); <-stopped }
}

// reply sends r, the answer to job, to the API side as a request, so a
// reply lost in a reconnect is sent again. It gives up when nobody has
// listened for a while (the caller is gone) or after a bounded number of
// tries.
func (w *worker) reply(job Job, r replyMsg) {
	id, bind := job.ID, bindSeq(job.ID, job.Seq)
	data, err := json.Marshal(r)
	if err == nil && int64(len(data)) > w.c.nc.MaxPayload()-replySlack {
		// Too big for one message: the result goes by the object store.
		data, err = w.c.putLarge(id, bind, data)
	}
	if err != nil {
		r = replyMsg{Error: &RunError{Kind: KindInternal, Msg: "result: " + err.Error()}, Worker: r.Worker, Attempt: r.Attempt, Events: r.Events}
		data, _ = json.Marshal(r)
	}
	data = w.c.seal(kindReply, bind, data)
	noResponders := 0
	for try := 0; try < 8; try++ {
		_, err := w.c.nc.Request(replyPrefix+id, data, 2*time.Second)
		if err == nil || errors.Is(err, nats.ErrConnectionClosed) {
			return
		}
		// No responders right away can also be the caller's interest
		// not having reached this server yet: try a few times.
		if errors.Is(err, nats.ErrNoResponders) {
			if noResponders++; noResponders >= 4 {
				return
			}
		}
		time.Sleep(time.Duration(try+1) * 200 * time.Millisecond)
	}
}

// ack acknowledges msg and waits for the server to confirm, trying again
// for a while (a node may be electing a new leader); if it still fails
// the job runs again elsewhere and the caller keeps the first result.
func (w *worker) ack(msg jetstream.Msg) {
	for try := 0; try < 10; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := msg.DoubleAck(ctx)
		cancel()
		if err == nil || errors.Is(err, jetstream.ErrMsgAlreadyAckd) || errors.Is(err, nats.ErrConnectionClosed) {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (w *worker) log() *slog.Logger {
	if w.opts.Log != nil {
		return w.opts.Log
	}
	return slog.New(slog.DiscardHandler)
}

func (w *worker) setFree(delta int) {
	w.mu.Lock()
	w.info.Free += delta
	w.mu.Unlock()
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// announce keeps the worker's entry in SR_WORKERS: now, on every change
// of its free slots, and every PresenceEvery, until ctx ends.
func (w *worker) announce(ctx context.Context) {
	w.c.present(ctx, w.info.ID, func() WorkerInfo {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.info
	}, w.changed)
}

// present keeps the entry id of SR_WORKERS as info says: now, when changed
// says so, and every PresenceEvery, until ctx ends.
func (c *Conn) present(ctx context.Context, id string, info func() WorkerInfo, changed <-chan struct{}) {
	t := time.NewTicker(PresenceEvery)
	defer t.Stop()
	for {
		data, _ := json.Marshal(info())
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, _ = c.kv.Put(pctx, id, c.seal(kindPresence, id, data))
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-changed:
		}
	}
}

// Announce keeps an API node's entry in SR_WORKERS (no slots, role "api"),
// so that `cluster status` lists it, until ctx ends; then removes it.
func (c *Conn) Announce(ctx context.Context) {
	info := WorkerInfo{ID: "api-" + workerID(c.name), Role: RoleAPI, Version: c.version, Started: time.Now().UTC()}
	c.present(ctx, info.ID, func() WorkerInfo { return info }, nil)
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_ = c.kv.Purge(dctx, info.ID)
}

var notKeyChar = regexp.MustCompile(`[^-_=a-zA-Z0-9]`)

// workerID is name, made a valid KV key, and a random suffix.
func workerID(name string) string {
	return notKeyChar.ReplaceAllString(name, "_") + "-" + randomSuffix()
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// untilOr is the time until t, or d when t is zero.
func untilOr(t time.Time, d time.Duration) time.Duration {
	if t.IsZero() {
		return d
	}
	return time.Until(t)
}
