package api

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/records"
	"github.com/sandbox-run/sandbox-run/pkg/executor"
)

// Async executions.
//
//	POST /api/sandbox/execute with "async": true, or POST /api/sandbox/executions
//	  → 202 {"execution_id", "status": "queued", "created_at"}, Location: the job.
//	GET /api/sandbox/executions/{id}[?wait=true[&timeout=SECONDS]]
//	  → {"execution_id", "status": "queued"|"running", ...} until the run is
//	    over, then the result as the synchronous call answers it, plus
//	    created_at, started_at and finished_at. wait=true holds the answer
//	    until the run is over or timeout (at most max_wait_seconds) passes.
//
// A job belongs to the key that submitted it: other keys get 404. Jobs wait
// in a bounded queue (async_queue; past it 503), of which one key may hold
// async_queue_per_key (past it 429), drained by one dispatcher per worker;
// each run goes through Server.execute, so the worker pool bounds
// synchronous and async runs together. Results are kept for
// result_ttl_seconds, each cut down to max_result_bytes and to what is left
// of the key's (result_quota_bytes_per_key) and the server's
// (result_quota_bytes) quotas of stored result bytes (see resultcap.go);
// a key whose stored results fill its quota, or a server whose results fill
// its own, is refused new jobs (507) until results expire. Without API
// keys every request is one tenant: only the server's limits apply. A
// callback_url receives the result when it is ready (see webhook.go); the
// delivery's state is the "callback" object of the job's answers.
//
// Jobs live in a bbolt store, <data_dir>/jobs.db (see jobstore.go), opened
// when Serve starts and closed when it returns: until it is open (or when it
// cannot be), async requests answer 503. Queued jobs survive a restart and
// run after it. A job still running at the end of the shutdown grace period
// is killed and reported as failed (status error_setup, error "the server
// stopped while this execution was running"); after a crash the next start
// reports it so. Jobs are never run twice, and never lost.

// queuedJob is a job in the queue, and its key.
type queuedJob struct{ id, key string }

// jobUsage is what one key holds of the async machinery.
type jobUsage struct {
	queued      int   // jobs queued, and places reserved by submissions being stored
	resultBytes int64 // bytes of the stored results
}

// jobManager is a server's async machinery. It holds no reference to its
// Server (see jobManagers).
type jobManager struct {
	cfg   Config
	log   *slog.Logger
	hooks *webhookSender

	ready   chan struct{} // closed once the store is open, or failed to open
	serving atomic.Bool   // runJobs has started (once per server)

	mu       sync.Mutex
	cond     *sync.Cond  // signals fifo changes and stopping
	st       *jobStore   // nil until ready and after Serve returns
	stErr    error       // why st is nil
	fifo     []queuedJob // queued jobs, oldest first
	reserved int         // queue places taken by submissions being stored
	stopping bool        // the server drains: dispatchers take no more jobs
	waiters  map[string]chan struct{}
	// usage is by key id ("" without API keys); resultBytes is of all keys.
	usage       map[string]*jobUsage
	resultBytes int64

	// drainCtx ends when the server starts draining; runCtx when running
	// jobs are killed; hookCtx when callback deliveries stop.
	drainCtx, runCtx, hookCtx context.Context
	drain, cancelRuns, unhook context.CancelFunc
	hookWG                    sync.WaitGroup
}

var (
	errJobStoreNotOpen = errors.New("the job store is not open (async executions run while the server serves)")
	errJobStoreClosed  = errors.New("the server has stopped")
)

func (s *Server) registerJobs() {
	j := &jobManager{cfg: s.cfg, log: s.log, hooks: newWebhookSender(&s.cfg), ready: make(chan struct{}),
		waiters: map[string]chan struct{}{}, usage: map[string]*jobUsage{}}
	j.cond = sync.NewCond(&j.mu)
	j.drainCtx, j.drain = context.WithCancel(context.Background())
	j.runCtx, j.cancelRuns = context.WithCancel(context.Background())
	j.hookCtx, j.unhook = context.WithCancel(context.Background())
	s.jobMgr = j

	s.route("POST /api/sandbox/executions", ScopeExecute, s.handleExecute)
	s.route("GET /api/sandbox/executions/{id}", ScopeExecute, s.handleJob)
	s.background = append(s.background, func(ctx context.Context) { s.runJobs(ctx) })
}

func validJobID(id string) bool {
	rest, ok := strings.CutPrefix(id, "exec_")
	if !ok || len(rest) == 0 || len(rest) > 64 {
		return false
	}
	_, err := hex.DecodeString(rest)
	return err == nil
}

func jobNow() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }

// store waits (briefly) for the job store and returns it.
func (j *jobManager) store(ctx context.Context) (*jobStore, error) {
	t := time.NewTimer(3 * time.Second)
	defer t.Stop()
	select {
	case <-j.ready:
	case <-t.C:
		return nil, errJobStoreNotOpen
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.st, j.stErr
}

func jobStoreUnavailable(w http.ResponseWriter, err error) {
	retryAfter(w, 5*time.Second)
	writeError(w, http.StatusServiceUnavailable, "async executions are unavailable: "+err.Error())
}

// submitJob queues an admitted, prepared request and answers 202.
func (s *Server) submitJob(w http.ResponseWriter, r *http.Request, req *ExecuteRequest, key *apiKey) {
	j := s.jobMgr
	st, err := j.store(r.Context())
	if err != nil {
		s.metrics.Rejected.WithLabelValues("async_unavailable").Inc()
		jobStoreUnavailable(w, err)
		return
	}
	language, err := checkJobLanguage(s.x.Registry(), req.Language, req.Version)
	if err != nil {
		s.reject(w, err, "invalid")
		return
	}
	if req.CallbackURL != "" {
		if j.cfg.CallbackSecret == "" {
			s.reject(w, badRequest("callback_url: this server has no callback_secret configured to sign callbacks with"), "invalid")
			return
		}
		if err := j.hooks.policy.checkURL(r.Context(), req.CallbackURL); err != nil {
			s.reject(w, err, "callback_refused")
			return
		}
	}
	request, err := json.Marshal(req)
	if err != nil {
		s.reject(w, badRequest("request: %v", err), "invalid")
		return
	}

	keyID := key.id()
	j.mu.Lock()
	if len(j.fifo)+j.reserved >= j.cfg.AsyncQueue {
		j.mu.Unlock()
		retryAfter(w, time.Second)
		s.reject(w, &requestError{http.StatusServiceUnavailable, fmt.Sprintf("the async queue is full (%d executions waiting); retry later", j.cfg.AsyncQueue)}, "async_queue_full")
		return
	}
	if err := j.admitLocked(keyID); err != nil {
		j.mu.Unlock()
		if err.status == http.StatusTooManyRequests {
			retryAfter(w, time.Second)
		}
		s.reject(w, err, "async_quota")
		return
	}
	j.reserved++
	j.usageOf(keyID).queued++
	j.mu.Unlock()

	rec := &jobRecord{ID: records.NewID("exec_"), KeyID: key.id(), Language: language, State: jobQueued,
		CreatedAt: jobNow(), CallbackURL: req.CallbackURL}
	err = st.create(rec, request)
	j.mu.Lock()
	j.reserved--
	if err == nil {
		j.fifo = append(j.fifo, queuedJob{rec.ID, keyID})
		j.cond.Signal()
	} else {
		j.usageOf(keyID).queued--
	}
	pos := len(j.fifo)
	j.mu.Unlock()
	if err != nil {
		s.log.Error("async execution not stored", "error", err)
		s.metrics.Rejected.WithLabelValues("async_unavailable").Inc()
		jobStoreUnavailable(w, err)
		return
	}
	attrs := []any{"execution_id", rec.ID, "language", language}
	if rec.KeyID != "" {
		attrs = append(attrs, "key_id", rec.KeyID)
	}
	s.log.Info("async execution queued", attrs...)
	w.Header().Set("Location", "/api/sandbox/executions/"+rec.ID)
	writeJSON(w, http.StatusAccepted, JobStatus{ExecutionID: rec.ID, Status: string(jobQueued), CreatedAt: rec.CreatedAt,
		QueuePosition: pos, Callback: pendingCallback(rec)})
}

// keyed says whether requests come with API keys; without, every request
// is one tenant, and only the server's limits apply.
func (j *jobManager) keyed() bool { return len(j.cfg.Keys) > 0 }

// usageOf returns keyID's usage; j.mu is held.
func (j *jobManager) usageOf(keyID string) *jobUsage {
	u := j.usage[keyID]
	if u == nil {
		u = &jobUsage{}
		j.usage[keyID] = u
	}
	return u
}

// admitLocked refuses a new job of keyID's when the key has
// async_queue_per_key jobs queued (429), or no room left in its quota of
// stored result bytes or the server's (507). j.mu is held.
func (j *jobManager) admitLocked(keyID string) *requestError {
	u := j.usageOf(keyID)
	if j.keyed() {
		if u.queued >= j.cfg.AsyncQueuePerKey {
			return &requestError{http.StatusTooManyRequests, fmt.Sprintf("key %s has %d async executions queued, at its limit of %d (async_queue_per_key); retry when some have run", keyID, u.queued, j.cfg.AsyncQueuePerKey)}
		}
		if q := j.cfg.ResultQuotaBytesPerKey; q-u.resultBytes < minResultBytes {
			return &requestError{http.StatusInsufficientStorage, fmt.Sprintf("key %s's stored async results use %d bytes of its %d-byte quota (result_quota_bytes_per_key); results are removed result_ttl_seconds (%gs) after their execution finished", keyID, u.resultBytes, q, j.cfg.ResultTTLSeconds)}
		}
	}
	if q := j.cfg.ResultQuotaBytes; q-j.resultBytes < minResultBytes {
		return &requestError{http.StatusInsufficientStorage, fmt.Sprintf("the stored async results use %d bytes of this server's %d-byte quota (result_quota_bytes); results are removed result_ttl_seconds (%gs) after their execution finished", j.resultBytes, q, j.cfg.ResultTTLSeconds)}
	}
	return nil
}

// capResult cuts result to max_result_bytes and to what is left of keyID's
// and the server's result quotas, and counts it as stored.
func (j *jobManager) capResult(keyID string, result json.RawMessage) json.RawMessage {
	// The room is reserved under the lock, the cutting (of up to
	// max_response_bytes of JSON) done outside it.
	j.mu.Lock()
	limit, why := j.resultLimitLocked(keyID, int64(len(result)))
	reserved := min(int64(len(result)), limit)
	j.countResultLocked(keyID, reserved)
	j.mu.Unlock()
	result = capResult(result, limit, why)
	j.mu.Lock()
	j.countResultLocked(keyID, int64(len(result))-reserved)
	j.mu.Unlock()
	return result
}

// resultLimitLocked is the most a result of n bytes of keyID's may take
// when stored, and why. j.mu is held.
func (j *jobManager) resultLimitLocked(keyID string, n int64) (int64, string) {
	u := j.usageOf(keyID)
	limit := j.cfg.MaxResultBytes
	why := fmt.Sprintf("the result was %d bytes, above max_result_bytes (%d)", n, limit)
	if room := j.cfg.ResultQuotaBytes - j.resultBytes; room < limit {
		limit = max(room, 0)
		why = fmt.Sprintf("the result was %d bytes, and the stored async results use %d bytes of this server's %d-byte quota (result_quota_bytes)", n, j.resultBytes, j.cfg.ResultQuotaBytes)
	}
	if room := j.cfg.ResultQuotaBytesPerKey - u.resultBytes; j.keyed() && room < limit {
		limit = max(room, 0)
		why = fmt.Sprintf("the result was %d bytes, and key %s's stored async results use %d bytes of its %d-byte quota (result_quota_bytes_per_key)", n, keyID, u.resultBytes, j.cfg.ResultQuotaBytesPerKey)
	}
	// Even with no room left a cut result is stored: its status and the
	// reason (a few hundred bytes, counted like any other).
	return max(limit, minResultBytes), why
}

// countResultLocked adds n stored result bytes of keyID's (n < 0 frees
// them). j.mu is held.
func (j *jobManager) countResultLocked(keyID string, n int64) {
	j.usageOf(keyID).resultBytes += n
	j.resultBytes += n
}

// pendingCallback is the callback state of a job that is not over.
func pendingCallback(rec *jobRecord) *CallbackStatus {
	if rec.CallbackURL == "" {
		return nil
	}
	cb := rec.Callback
	if cb.Status == "" {
		cb.Status = callbackPending
	}
	return &cb
}

// checkJobLanguage refuses, at submission, what the executor would refuse
// for its language, and returns the language's name.
func checkJobLanguage(reg *executor.Registry, name, version string) (string, error) {
	if reg == nil {
		return name, nil
	}
	lang, _, err := reg.Resolve(name, version)
	if err != nil {
		return "", badRequest("%s", err.Error())
	}
	return lang.Name, nil
}

// handleJob answers GET /api/sandbox/executions/{id}.
func (s *Server) handleJob(w http.ResponseWriter, r *http.Request) {
	j := s.jobMgr
	id := r.PathValue("id")
	q := r.URL.Query()
	wait := false
	if v := q.Get("wait"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("wait=%q: use true or false", v))
			return
		}
		wait = b
	}
	timeout := seconds(j.cfg.MaxWaitSeconds)
	if v := q.Get("timeout"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("timeout=%q: give a number of seconds", v))
			return
		}
		timeout = min(timeout, seconds(f))
	}
	notFound := func() { writeError(w, http.StatusNotFound, "no such execution: "+id) }
	if !validJobID(id) {
		notFound()
		return
	}
	st, err := j.store(r.Context())
	if err != nil {
		jobStoreUnavailable(w, err)
		return
	}
	rec, err := j.lookup(st, id, keyOf(r).id())
	if err == nil && wait && rec.State != jobDone && timeout > 0 {
		rec, err = j.wait(r.Context(), st, rec, timeout)
	}
	switch {
	case errors.Is(err, errNoJob):
		notFound()
	case err != nil:
		s.log.Error("job store", "error", err)
		jobStoreUnavailable(w, err)
	case rec.State == jobDone:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write(jobDoneBody(rec, true))
	default:
		writeJSON(w, http.StatusOK, j.status(rec))
	}
}

// lookup finds a job of keyID's that has not expired.
func (j *jobManager) lookup(st *jobStore, id, keyID string) (*jobRecord, error) {
	rec, err := st.get(id)
	if err != nil {
		return nil, err
	}
	if rec.KeyID != keyID || (rec.State == jobDone && time.Since(rec.FinishedAt) > seconds(j.cfg.ResultTTLSeconds)) {
		return nil, errNoJob
	}
	return rec, nil
}

// wait holds until the job is done, d passes, the client leaves or the
// server drains, and returns the job as it then is.
func (j *jobManager) wait(ctx context.Context, st *jobStore, rec *jobRecord, d time.Duration) (*jobRecord, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		j.mu.Lock()
		ch, ok := j.waiters[rec.ID]
		if !ok {
			ch = make(chan struct{})
			j.waiters[rec.ID] = ch
		}
		j.mu.Unlock()
		// Registered first, read second: a job finishing in between has
		// closed ch.
		cur, err := st.get(rec.ID)
		if err != nil {
			return nil, err
		}
		if cur.State == jobDone {
			return cur, nil
		}
		select {
		case <-ch:
		case <-t.C:
			return cur, nil
		case <-ctx.Done():
			return cur, nil
		case <-j.drainCtx.Done():
			return cur, nil
		}
	}
}

// notify wakes the waiters of a job.
func (j *jobManager) notify(id string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if ch, ok := j.waiters[id]; ok {
		close(ch)
		delete(j.waiters, id)
	}
}

func (j *jobManager) status(rec *jobRecord) JobStatus {
	js := JobStatus{ExecutionID: rec.ID, Status: string(rec.State), CreatedAt: rec.CreatedAt, StartedAt: rec.StartedAt,
		Callback: pendingCallback(rec)}
	if rec.State == jobQueued {
		j.mu.Lock()
		for i, q := range j.fifo {
			if q.id == rec.ID {
				js.QueuePosition = i + 1
				break
			}
		}
		j.mu.Unlock()
	}
	return js
}

// jobDoneBody is the answer for a finished job (withCallback: with its
// callback's delivery state), and its callback's body (without): the result
// with the job's times added.
func jobDoneBody(rec *jobRecord, withCallback bool) []byte {
	res := bytes.TrimSpace(rec.Result)
	if len(res) < 2 || res[len(res)-1] != '}' {
		return append(res, '\n')
	}
	var b bytes.Buffer
	inner := bytes.TrimSpace(res[:len(res)-1])
	b.Write(inner)
	if len(inner) > 1 {
		b.WriteByte(',')
	}
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	fmt.Fprintf(&b, `"created_at":%q,"started_at":%q,"finished_at":%q`, ts(rec.CreatedAt), ts(rec.StartedAt), ts(rec.FinishedAt))
	if withCallback && rec.CallbackURL != "" {
		cb, _ := json.Marshal(pendingCallback(rec))
		b.WriteString(`,"callback":`)
		b.Write(cb)
	}
	b.WriteString("}\n")
	return b.Bytes()
}

// runJobs is the background task: it opens the store, recovers what the
// last server left, dispatches jobs until the server drains, gives running
// jobs the rest of the grace period, and closes the store.
func (s *Server) runJobs(ctx context.Context) {
	j := s.jobMgr
	if j.serving.Swap(true) {
		s.log.Error("async executions: Serve was called twice on one server; jobs run under the first only")
		return
	}
	st, err := openJobStore(j.cfg.DataDir, 2*time.Second)
	var rc *recovery
	if err == nil {
		if rc, err = st.recover(jobNow()); err != nil {
			st.close()
		}
	}
	j.mu.Lock()
	if err != nil {
		j.stErr = err
	} else {
		j.st = st
		for _, rec := range rc.queued {
			j.fifo = append(j.fifo, queuedJob{rec.ID, rec.KeyID})
			j.usageOf(rec.KeyID).queued++
		}
		for keyID, n := range rc.resultBytes {
			j.countResultLocked(keyID, n)
		}
	}
	j.mu.Unlock()
	close(j.ready)
	if err != nil {
		s.log.Error("async executions unavailable: the job store did not open", "error", err)
		return
	}
	if len(rc.queued)+len(rc.failed)+len(rc.callbacks) > 0 {
		s.log.Info("async executions recovered", "queued", len(rc.queued), "failed", len(rc.failed), "callbacks", len(rc.callbacks))
	}
	if len(rc.unreadable) > 0 {
		s.log.Error("job store: unreadable records left alone", "ids", rc.unreadable)
	}
	for _, rec := range rc.failed {
		s.log.Warn("async execution failed", "execution_id", rec.ID, "error", reasonServerStopped)
	}
	for _, rec := range rc.callbacks {
		j.deliver(st, rec)
	}

	var dispatchers sync.WaitGroup
	for range s.cfg.Workers {
		dispatchers.Add(1)
		go func() {
			defer dispatchers.Done()
			for {
				id, ok := j.next()
				if !ok {
					return
				}
				s.runJob(j, st, id)
			}
		}()
	}
	janitorDone := make(chan struct{})
	go func() {
		defer close(janitorDone)
		j.janitor(st)
	}()

	// Serve does not tell its tasks when it starts draining, only when it
	// has stopped serving: watch for the former.
	tick := time.NewTicker(50 * time.Millisecond)
watch:
	for {
		select {
		case <-ctx.Done():
			break watch
		case <-tick.C:
			if s.run.Draining() {
				break watch
			}
		}
	}
	tick.Stop()
	drainAt := time.Now()
	j.mu.Lock()
	j.stopping = true
	j.cond.Broadcast()
	j.mu.Unlock()
	j.drain()
	<-ctx.Done()

	// Running jobs have the grace period that began with the draining.
	done := make(chan struct{})
	go func() {
		dispatchers.Wait()
		close(done)
	}()
	grace := time.NewTimer(max(0, seconds(s.cfg.ShutdownGraceSeconds)-time.Since(drainAt)))
	select {
	case <-done:
	case <-grace.C:
		s.log.Warn("grace period over: killing running async executions")
		j.cancelRuns()
		<-done
	}
	grace.Stop()
	j.unhook()
	j.hookWG.Wait()
	<-janitorDone

	j.mu.Lock()
	j.st, j.stErr = nil, errJobStoreClosed
	j.mu.Unlock()
	if err := st.close(); err != nil {
		s.log.Error("job store close", "error", err)
	}
}

// next takes the oldest queued job; false once the server drains.
func (j *jobManager) next() (string, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for len(j.fifo) == 0 && !j.stopping {
		j.cond.Wait()
	}
	if j.stopping {
		return "", false
	}
	q := j.fifo[0]
	j.fifo[0] = queuedJob{}
	j.fifo = j.fifo[1:]
	j.usageOf(q.key).queued--
	return q.id, true
}

// runJob runs one job to its end. A job the drain catches before it starts
// stays queued in the store and runs after the restart.
func (s *Server) runJob(j *jobManager, st *jobStore, id string) {
	rec, request, err := st.load(id)
	if err != nil {
		if !errors.Is(err, errNoJob) {
			s.log.Error("job store", "execution_id", id, "error", err)
		}
		return
	}
	if rec.State != jobQueued {
		return
	}
	var req ExecuteRequest
	if err := json.Unmarshal(request, &req); err != nil {
		j.finish(st, rec.ID, rec.KeyID, failedResult(rec.ID, rec.Language, "the stored request is unreadable: "+err.Error()))
		return
	}

	ctx, cancel := context.WithCancel(j.runCtx)
	defer cancel()
	var mu sync.Mutex
	started, aborted := false, false
	// Draining cancels a job that waits for a worker, not one that runs.
	stop := context.AfterFunc(j.drainCtx, func() {
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
		if aborted {
			mu.Unlock()
			return
		}
		started = true
		mu.Unlock()
		if _, err := st.update(id, func(r *jobRecord) { r.State, r.StartedAt = jobRunning, jobNow() }); err != nil {
			s.log.Error("job store", "execution_id", id, "error", err)
		}
	}
	var res *executor.Result
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 2*time.Second) {
		// While the worker pool's queue is full of synchronous requests,
		// the job waits its turn here (without counting as refused).
		if s.run.HasRoom() {
			res, err = s.execute(ctx, "job", toExecutor(&req), rec.KeyID, onRun)
			var re *requestError
			if !errors.As(err, &re) || re.status != http.StatusServiceUnavailable {
				break
			}
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-j.drainCtx.Done():
			t.Stop()
			return
		}
	}
	mu.Lock()
	ran := started
	mu.Unlock()
	var result json.RawMessage
	var re *requestError
	switch {
	case !ran:
		return // canceled by the drain before it started: still queued
	case j.runCtx.Err() != nil:
		result = failedResult(id, rec.Language, reasonServerStopped)
	case errors.As(err, &re):
		result = failedResult(id, rec.Language, re.msg)
	case err != nil:
		result = failedResult(id, rec.Language, err.Error())
	default:
		res.ExecutionID = id // the job's id is the one its client knows
		if result, err = json.Marshal(res); err != nil {
			result = failedResult(id, rec.Language, "encode result: "+err.Error())
		}
	}
	j.finish(st, id, rec.KeyID, result)
}

// finish stores a job's result (cut down to its caps), wakes its waiters
// and sends its callback.
func (j *jobManager) finish(st *jobStore, id, keyID string, result json.RawMessage) {
	result = j.capResult(keyID, result)
	// A result that cannot be stored (the data dir is full) is retried
	// until it can be, or the server stops: it must not be dropped while
	// the job shows as running forever.
	var rec *jobRecord
	var err error
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		if rec, err = st.update(id, func(r *jobRecord) { finishRecord(r, jobNow(), result) }); err == nil {
			break
		}
		j.log.Error("job store: cannot store a result, retrying", "execution_id", id, "error", err)
		select {
		case <-j.drainCtx.Done():
			j.mu.Lock()
			j.countResultLocked(keyID, -int64(len(result)))
			j.mu.Unlock()
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
	j.log.Info("async execution finished", attrs...)
	j.notify(id)
	if rec.CallbackURL != "" {
		j.deliver(st, rec)
	}
}

// deliver sends a finished job's callback in the background, storing the
// delivery's state after every attempt. A delivery the shutdown interrupts
// stays pending and is made again after a restart.
func (j *jobManager) deliver(st *jobStore, rec *jobRecord) {
	j.hookWG.Add(1)
	go func() {
		defer j.hookWG.Done()
		cb := rec.Callback // attempts before a restart count too
		cb.Status = callbackPending
		save := func() {
			state := cb
			if _, err := st.update(rec.ID, func(r *jobRecord) { r.Callback = state }); err != nil && !errors.Is(err, errNoJob) {
				j.log.Error("job store", "execution_id", rec.ID, "error", err)
			}
		}
		report := func(a deliveryAttempt) {
			cb.Attempts++
			cb.LastHTTPStatus, cb.Error = a.HTTPStatus, ""
			cb.LastAttemptAt, cb.NextAttemptAt = a.At.UTC().Truncate(time.Millisecond), time.Time{}
			switch {
			case a.Err == nil:
				cb.Status, cb.DeliveredAt = callbackDelivered, jobNow()
			case a.Retry > 0:
				cb.Error = a.Err.Error()
				cb.NextAttemptAt = jobNow().Add(a.Retry)
			default:
				cb.Status, cb.Error, cb.FailedAt = callbackFailed, a.Err.Error(), jobNow()
			}
			save()
		}
		attempts, err := 0, error(nil)
		if len(j.hooks.secret) > 0 { // a restart can have removed it
			attempts, err = j.hooks.deliver(j.hookCtx, rec.CallbackURL, rec.ID, jobDoneBody(rec, false), report)
		} else {
			err = errors.New("no callback_secret is configured to sign the callback with")
			cb.Status, cb.Error, cb.FailedAt = callbackFailed, err.Error(), jobNow()
			save()
		}
		if err != nil && j.hookCtx.Err() != nil {
			return
		}
		if err != nil {
			j.log.Warn("callback failed", "execution_id", rec.ID, "attempts", attempts, "error", err)
		} else {
			j.log.Info("callback delivered", "execution_id", rec.ID, "attempts", attempts)
		}
	}()
}

// janitor deletes results older than the TTL until the server drains.
func (j *jobManager) janitor(st *jobStore) {
	ttl := seconds(j.cfg.ResultTTLSeconds)
	every := min(max(ttl/2, 50*time.Millisecond), time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if n, freed, err := st.expire(time.Now().Add(-ttl)); err != nil {
			j.log.Error("job store", "error", err)
		} else if n > 0 {
			j.mu.Lock()
			for keyID, b := range freed {
				j.countResultLocked(keyID, -b)
			}
			j.mu.Unlock()
			j.log.Info("async results expired", "count", n)
		}
		select {
		case <-t.C:
		case <-j.drainCtx.Done():
			return
		}
	}
}
