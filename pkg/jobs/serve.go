package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// Serve opens the store, recovers what the last process left, and
// dispatches jobs, one dispatcher per worker, until the drain begins: when
// draining (if set; it is polled) says so, or when ctx ends. It returns
// once ctx has ended and the running jobs are over: they have the rest of
// the shutdown grace period (from the drain's beginning), then they are
// killed and reported failed. Then it closes the store. Call it once.
func (m *Manager) Serve(ctx context.Context, draining func() bool) {
	if m.serving.Swap(true) {
		m.log.Error("async executions: Serve was called twice on one server; jobs run under the first only")
		return
	}
	st, err := openStore(m.cfg.DataDir, 2*time.Second)
	var rc *recovery
	if err == nil {
		if rc, err = st.recover(jobNow()); err != nil {
			st.close()
		}
	}
	m.mu.Lock()
	if err != nil {
		m.stErr = err
	} else {
		m.st = st
		for _, rec := range rc.queued {
			m.fifo = append(m.fifo, queuedJob{rec.ID, rec.KeyID})
			m.usageOf(rec.KeyID).queued++
		}
		for keyID, n := range rc.resultBytes {
			m.countResultLocked(keyID, n)
		}
	}
	m.mu.Unlock()
	close(m.ready)
	if err != nil {
		m.log.Error("async executions unavailable: the job store did not open", "error", err)
		return
	}
	if len(rc.queued)+len(rc.failed)+len(rc.callbacks) > 0 {
		m.log.Info("async executions recovered", "queued", len(rc.queued), "failed", len(rc.failed), "callbacks", len(rc.callbacks))
	}
	if len(rc.unreadable) > 0 {
		m.log.Error("job store: unreadable records left alone", "ids", rc.unreadable)
	}
	for _, rec := range rc.failed {
		m.log.Warn("async execution failed", "execution_id", rec.ID, "error", reasonServerStopped)
	}
	for _, rec := range rc.callbacks {
		m.deliver(st, rec)
	}

	var dispatchers sync.WaitGroup
	for range m.cfg.Workers {
		dispatchers.Add(1)
		go func() {
			defer dispatchers.Done()
			for {
				id, ok := m.next()
				if !ok {
					return
				}
				m.runJob(st, id)
			}
		}()
	}
	janitorDone := make(chan struct{})
	go func() {
		defer close(janitorDone)
		m.janitor(st)
	}()

	// A server's Serve does not tell its tasks when it starts draining,
	// only when it has stopped serving: watch for the former.
	tick := time.NewTicker(50 * time.Millisecond)
watch:
	for {
		select {
		case <-ctx.Done():
			break watch
		case <-tick.C:
			if draining != nil && draining() {
				break watch
			}
		}
	}
	tick.Stop()
	drainAt := time.Now()
	m.mu.Lock()
	m.stopping = true
	m.cond.Broadcast()
	m.mu.Unlock()
	m.drain()
	<-ctx.Done()

	// Running jobs have the grace period that began with the draining.
	done := make(chan struct{})
	go func() {
		dispatchers.Wait()
		close(done)
	}()
	grace := time.NewTimer(max(0, seconds(m.cfg.ShutdownGraceSeconds)-time.Since(drainAt)))
	select {
	case <-done:
	case <-grace.C:
		m.log.Warn("grace period over: killing running async executions")
		m.cancelRuns()
		<-done
	}
	grace.Stop()
	m.unhook()
	m.hookWG.Wait()
	<-janitorDone

	m.mu.Lock()
	m.st, m.stErr = nil, errStoreClosed
	m.mu.Unlock()
	if err := st.close(); err != nil {
		m.log.Error("job store close", "error", err)
	}
}

// next takes the oldest queued job; false once the drain began.
func (m *Manager) next() (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for len(m.fifo) == 0 && !m.stopping {
		m.cond.Wait()
	}
	if m.stopping {
		return "", false
	}
	q := m.fifo[0]
	m.fifo[0] = queuedJob{}
	m.fifo = m.fifo[1:]
	m.usageOf(q.key).queued--
	return q.id, true
}

// runJob runs one job to its end. A job the drain catches before it starts
// stays queued in the store and runs after the restart.
func (m *Manager) runJob(st *store, id string) {
	rec, request, err := st.load(id)
	if err != nil {
		if !errors.Is(err, ErrNotFound) {
			m.log.Error("job store", "execution_id", id, "error", err)
		}
		return
	}
	if rec.State != jobQueued {
		return
	}
	var req wire.ExecuteRequest
	if err := json.Unmarshal(request, &req); err != nil {
		m.finish(st, rec.ID, rec.KeyID, failedResult(rec.ID, rec.Language, "the stored request is unreadable: "+err.Error()))
		return
	}

	ctx, cancel := context.WithCancel(m.runCtx)
	defer cancel()
	var mu sync.Mutex
	started, aborted := false, false
	// Draining cancels a job that waits for a worker, not one that runs.
	stop := context.AfterFunc(m.drainCtx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !started {
			aborted = true
			cancel()
		}
	})
	defer stop()
	onRun := func() {
		mu.Lock()
		if aborted || started { // started: a later run of the job's
			mu.Unlock()
			return
		}
		started = true
		mu.Unlock()
		if _, err := st.update(id, func(r *Record) { r.State, r.StartedAt = jobRunning, jobNow() }); err != nil {
			m.log.Error("job store", "execution_id", id, "error", err)
		}
	}
	var res *wire.Result
	var sum wire.Result // of the runs' times and memory
	runs := max(rec.Runs, 1)
	for i := 0; i < runs; i++ {
		again := req // each run gets the request as stored
		if res, err = m.runOnce(ctx, &again, rec.KeyID, onRun); err != nil || res == nil {
			if errors.Is(err, errDrained) && i > 0 {
				err = errors.New(reasonServerStopped)
			}
			break
		}
		sum.CPUTimeMs, sum.DurationMs, sum.MemoryUsedMB = sum.CPUTimeMs+res.CPUTimeMs, sum.DurationMs+res.DurationMs, sum.MemoryUsedMB+res.MemoryUsedMB
		if res.Status == wire.StatusCompileError || res.Status == wire.StatusSetupError || i == runs-1 {
			n := float64(i + 1)
			res.CPUTimeMs, res.DurationMs, res.MemoryUsedMB = sum.CPUTimeMs/n, sum.DurationMs/n, sum.MemoryUsedMB/n
			break
		}
	}
	if errors.Is(err, errDrained) {
		return // the drain caught it waiting for room: still queued
	}
	mu.Lock()
	ran := started
	mu.Unlock()
	var result json.RawMessage
	switch {
	case !ran:
		return // canceled by the drain before it started: still queued
	case m.runCtx.Err() != nil:
		result = failedResult(id, rec.Language, reasonServerStopped)
	case err != nil:
		result = failedResult(id, rec.Language, err.Error())
	default:
		res.ExecutionID = id // the job's id is the one its client knows
		if result, err = json.Marshal(res); err != nil {
			result = failedResult(id, rec.Language, "encode result: "+err.Error())
		}
	}
	m.finish(st, id, rec.KeyID, result)
}

// errDrained: the drain began while a job waited for room.
var errDrained = errors.New("draining")

// runOnce runs req once, waiting while the worker pool has no room (its
// queue is full of synchronous requests, say) until the drain begins.
func (m *Manager) runOnce(ctx context.Context, req *wire.ExecuteRequest, keyID string, onRun func()) (*wire.Result, error) {
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 2*time.Second) {
		res, err := m.run(ctx, req, keyID, onRun)
		if !errors.Is(err, ErrNoRoom) {
			return res, err
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-m.drainCtx.Done():
			t.Stop()
			return nil, errDrained
		}
	}
}

// finish stores a job's result (cut down to its caps), wakes its waiters
// and sends its callback.
func (m *Manager) finish(st *store, id, keyID string, result json.RawMessage) {
	result = m.capResult(keyID, result)
	// A result that cannot be stored (the data dir is full) is retried
	// until it can be, or the drain begins: it must not be dropped while
	// the job shows as running forever.
	var rec *Record
	var err error
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		if rec, err = st.update(id, func(r *Record) { finishRecord(r, jobNow(), result) }); err == nil {
			break
		}
		m.log.Error("job store: cannot store a result, retrying", "execution_id", id, "error", err)
		select {
		case <-m.drainCtx.Done():
			m.mu.Lock()
			m.countResultLocked(keyID, -int64(len(result)))
			m.mu.Unlock()
			return
		case <-time.After(wait):
		}
	}
	var status struct {
		Status string `json:"status"`
		Error  string `json:"error"`
	}
	json.Unmarshal(result, &status)
	attrs := []any{"execution_id", id, "status", status.Status, "queued_ms", rec.StartedAt.Sub(rec.CreatedAt).Milliseconds(),
		"total_ms", rec.FinishedAt.Sub(rec.CreatedAt).Milliseconds()}
	if status.Error != "" {
		attrs = append(attrs, "error", status.Error)
	}
	m.log.Info("async execution finished", attrs...)
	m.notify(id)
	if rec.CallbackURL != "" {
		m.deliver(st, rec)
	}
}

// deliver sends a finished job's callback in the background, storing the
// delivery's state after every attempt. A delivery the shutdown interrupts
// stays pending and is made again after a restart.
func (m *Manager) deliver(st *store, rec *Record) {
	m.hookWG.Add(1)
	go func() {
		defer m.hookWG.Done()
		cb := rec.Callback // attempts before a restart count too
		cb.Status = callbackPending
		save := func() {
			state := cb
			if _, err := st.update(rec.ID, func(r *Record) { r.Callback = state }); err != nil && !errors.Is(err, ErrNotFound) {
				m.log.Error("job store", "execution_id", rec.ID, "error", err)
			}
		}
		report := func(a Attempt) {
			ApplyAttempt(&cb, a)
			save()
		}
		attempts, err := 0, errNoNotifier
		hook, body := m.hook, doneBody(rec, false)
		m.mu.Lock()
		k, ok := m.kinds[rec.Kind]
		m.mu.Unlock()
		if ok {
			hook, body = k.Notifier, k.Body(rec)
		}
		if hook != nil {
			attempts, err = hook.Deliver(m.hookCtx, rec.CallbackURL, rec.ID, body, report)
		}
		if err != nil && attempts == 0 {
			// Refused before any attempt (a restart can have removed the
			// secret callbacks are signed with): given up.
			cb.Status, cb.Error, cb.FailedAt = callbackFailed, err.Error(), jobNow()
			save()
		}
		if err != nil && m.hookCtx.Err() != nil {
			return
		}
		if err != nil {
			m.log.Warn("callback failed", "execution_id", rec.ID, "attempts", attempts, "error", err)
		} else {
			m.log.Info("callback delivered", "execution_id", rec.ID, "attempts", attempts)
		}
	}()
}

// janitor deletes results older than the TTL until the drain begins.
func (m *Manager) janitor(st *store) {
	ttl := seconds(m.cfg.ResultTTLSeconds)
	every := min(max(ttl/2, 50*time.Millisecond), time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if n, freed, err := st.expire(time.Now().Add(-ttl)); err != nil {
			m.log.Error("job store", "error", err)
		} else if n > 0 {
			m.mu.Lock()
			for keyID, b := range freed {
				m.countResultLocked(keyID, -b)
			}
			m.mu.Unlock()
			m.log.Info("async results expired", "count", n)
		}
		select {
		case <-t.C:
		case <-m.drainCtx.Done():
			return
		}
	}
}
