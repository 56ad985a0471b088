package jobs

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/lib/records"
	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// Config sets up a Manager.
type Config struct {
	// App is the application's configuration: the store's directory
	// (data_dir), how many jobs run at once (workers), the shutdown grace
	// period, the limits of the queue and of the stored results (async_*,
	// max_result_bytes, result_*), and whether there are API keys (each
	// key is a tenant; without, every job is one tenant's).
	App config.Config
	// Run runs a job.
	Run RunFunc
	// Notifier delivers callbacks; without one they fail.
	Notifier Notifier
	Log      *slog.Logger
}

// RunFunc runs a job's request for keyID, within ctx (when it ends, the
// run is killed). It calls onRun once a worker is free, just before the
// run starts. When the run cannot start now for want of room (the worker
// pool's queue is full, the host's sandboxes are busy), it returns
// ErrNoRoom, or an error wrapping it: the job waits and tries again. Any
// other error is the job's failure, reported as its result.
type RunFunc func(ctx context.Context, req *wire.ExecuteRequest, keyID string, onRun func()) (*wire.Result, error)

// ErrNoRoom says that a run could not start now, but may later.
var ErrNoRoom = errors.New("no room to run the job now")

// Notifier delivers a finished job's callback.
type Notifier interface {
	// Deliver sends body, the result of job id, to url until it is
	// accepted, given up or ctx ends, calling report after every attempt
	// that ctx did not cut short. It returns the attempts made (0: it
	// refused to try) and, when the delivery failed, why.
	Deliver(ctx context.Context, url, id string, body []byte, report func(Attempt)) (attempts int, err error)
}

// Attempt is what one delivery attempt came to.
type Attempt struct {
	At         time.Time
	HTTPStatus int           // the receiver's answer; 0 when there was none
	Err        error         // nil when the receiver accepted the delivery
	Retry      time.Duration // when Err is not nil: the wait before the next attempt; 0 for none
}

// Kind classifies why a job was not taken or cannot be looked up: the one
// kind every layer shares (wire.ErrorKind).
type Kind = wire.ErrorKind

// The kinds of Error, as the job store names them.
const (
	// Unavailable: the store is not open (before Serve, after it, or it
	// failed to open) or failed. Retry later.
	Unavailable = wire.KindUnavailable
	// Invalid: the request cannot be stored.
	Invalid = wire.KindInvalid
	// QueueFull: async_queue jobs are queued. Retry later.
	QueueFull = wire.KindQueueFull
	// KeyQueueFull: the key has async_queue_per_key jobs queued. Retry
	// when some have run.
	KeyQueueFull = wire.KindRateLimited
	// ResultQuotaFull: the key's stored results, or all of them, fill
	// their quota. Retry when results have expired.
	ResultQuotaFull = wire.KindFull
)

// Error is a submission refused, or a store that cannot answer
// (wire.Error).
type Error = wire.Error

func unavailable(err error) *Error { return &Error{Kind: Unavailable, Msg: err.Error(), Err: err} }

// queuedJob is a job in the queue, and its key.
type queuedJob struct{ id, key string }

// jobUsage is what one key holds of the async machinery.
type jobUsage struct {
	queued      int   // jobs queued, and places reserved by submissions being stored
	resultBytes int64 // bytes of the stored results
}

// Manager is the async machinery of one process: its queue, its store
// (open while Serve runs), its dispatchers and its janitor.
type Manager struct {
	cfg  config.Config
	log  *slog.Logger
	run  RunFunc
	hook Notifier

	ready   chan struct{} // closed once the store is open, or failed to open
	serving atomic.Bool   // Serve has started (once per manager)

	mu       sync.Mutex
	cond     *sync.Cond  // signals fifo changes and stopping
	st       *store      // nil until ready and after Serve returns
	stErr    error       // why st is nil
	fifo     []queuedJob // queued jobs, oldest first
	reserved int         // queue places taken by submissions being stored
	stopping bool        // the drain began: dispatchers take no more jobs
	waiters  map[string]chan struct{}
	kinds    map[string]KindHooks
	// usage is by key id ("" without API keys); resultBytes is of all keys.
	usage       map[string]*jobUsage
	resultBytes int64

	// drainCtx ends when the drain begins; runCtx when running jobs are
	// killed; hookCtx when callback deliveries stop.
	drainCtx, runCtx, hookCtx context.Context
	drain, cancelRuns, unhook context.CancelFunc
	hookWG                    sync.WaitGroup
}

var (
	errStoreNotOpen = errors.New("the job store is not open (async executions run while the server serves)")
	errStoreClosed  = errors.New("the server has stopped")
	errNoNotifier   = errors.New("this process delivers no callbacks")
)

// New builds a Manager; cfg.App must have passed Validate. Nothing runs
// until Serve.
func New(cfg Config) *Manager {
	m := &Manager{cfg: cfg.App, log: cfg.Log, run: cfg.Run, hook: cfg.Notifier, ready: make(chan struct{}),
		waiters: map[string]chan struct{}{}, usage: map[string]*jobUsage{}}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	m.cond = sync.NewCond(&m.mu)
	m.drainCtx, m.drain = context.WithCancel(context.Background())
	m.runCtx, m.cancelRuns = context.WithCancel(context.Background())
	m.hookCtx, m.unhook = context.WithCancel(context.Background())
	return m
}

// validID says whether id can be a job's.
func validID(id string) bool {
	rest, ok := strings.CutPrefix(id, "exec_")
	if !ok || len(rest) == 0 || len(rest) > 64 {
		return false
	}
	_, err := hex.DecodeString(rest)
	return err == nil
}

func jobNow() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// store waits (briefly) for the job store and returns it.
func (m *Manager) store(ctx context.Context) (*store, error) {
	t := time.NewTimer(3 * time.Second)
	defer t.Stop()
	select {
	case <-m.ready:
	case <-t.C:
		return nil, unavailable(errStoreNotOpen)
	case <-ctx.Done():
		return nil, unavailable(ctx.Err())
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.st == nil {
		return nil, unavailable(m.stErr)
	}
	return m.st, nil
}

// Available waits briefly for the store (it opens when Serve starts) and
// returns an Unavailable *Error when jobs cannot be taken.
func (m *Manager) Available(ctx context.Context) error {
	_, err := m.store(ctx)
	return err
}

// Options are what a transport keeps with a job of its own (Record's Kind,
// Meta and Runs).
type Options struct {
	Kind string
	Meta json.RawMessage
	Runs int
}

// KindHooks are how a transport's jobs are told: Body is a finished job's
// callback body, sent by Notifier.
type KindHooks struct {
	Body     func(rec *Record) []byte
	Notifier Notifier
}

// SetKind makes jobs of kind send their callbacks as hooks say. Call it
// before Serve.
func (m *Manager) SetKind(kind string, hooks KindHooks) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.kinds == nil {
		m.kinds = map[string]KindHooks{}
	}
	m.kinds[kind] = hooks
}

// Submit queues a job of keyID's (admitted and checked: language is the
// name its language resolved to) and returns its status. A job that is not
// taken returns an *Error.
func (m *Manager) Submit(ctx context.Context, keyID, language string, req *wire.ExecuteRequest) (wire.JobStatus, error) {
	return m.SubmitWith(ctx, keyID, language, req, Options{})
}

// SubmitWith is Submit of a job that opt says more of.
func (m *Manager) SubmitWith(ctx context.Context, keyID, language string, req *wire.ExecuteRequest, opt Options) (wire.JobStatus, error) {
	st, err := m.store(ctx)
	if err != nil {
		return wire.JobStatus{}, err
	}
	request, err := json.Marshal(req)
	if err != nil {
		return wire.JobStatus{}, &Error{Kind: Invalid, Msg: "request: " + err.Error(), Err: err}
	}

	m.mu.Lock()
	if len(m.fifo)+m.reserved >= m.cfg.AsyncQueue {
		m.mu.Unlock()
		return wire.JobStatus{}, &Error{Kind: QueueFull, Msg: fmt.Sprintf("the async queue is full (%d executions waiting); retry later", m.cfg.AsyncQueue)}
	}
	if err := m.admitLocked(keyID); err != nil {
		m.mu.Unlock()
		return wire.JobStatus{}, err
	}
	m.reserved++
	m.usageOf(keyID).queued++
	m.mu.Unlock()

	rec := &Record{ID: records.NewID("exec_"), KeyID: keyID, Language: language, State: jobQueued,
		CreatedAt: jobNow(), CallbackURL: req.CallbackURL, Kind: opt.Kind, Meta: opt.Meta, Runs: opt.Runs}
	err = st.create(rec, request)
	m.mu.Lock()
	m.reserved--
	if err == nil {
		m.fifo = append(m.fifo, queuedJob{rec.ID, keyID})
		m.cond.Signal()
	} else {
		m.usageOf(keyID).queued--
	}
	pos := len(m.fifo)
	m.mu.Unlock()
	if err != nil {
		m.log.Error("async execution not stored", "error", err)
		return wire.JobStatus{}, unavailable(err)
	}
	attrs := []any{"execution_id", rec.ID, "language", language}
	if rec.KeyID != "" {
		attrs = append(attrs, "key_id", rec.KeyID)
	}
	m.log.Info("async execution queued", attrs...)
	return wire.JobStatus{ExecutionID: rec.ID, Status: string(jobQueued), CreatedAt: rec.CreatedAt,
		QueuePosition: pos, Callback: pendingCallback(rec)}, nil
}

// keyed says whether requests come with API keys; without, every request
// is one tenant, and only the server's limits apply.
func (m *Manager) keyed() bool { return len(m.cfg.Keys) > 0 }

// usageOf returns keyID's usage; m.mu is held.
func (m *Manager) usageOf(keyID string) *jobUsage {
	u := m.usage[keyID]
	if u == nil {
		u = &jobUsage{}
		m.usage[keyID] = u
	}
	return u
}

// admitLocked refuses a new job of keyID's when the key has
// async_queue_per_key jobs queued, or no room left in its quota of stored
// result bytes or the server's. m.mu is held.
func (m *Manager) admitLocked(keyID string) *Error {
	u := m.usageOf(keyID)
	if m.keyed() {
		if u.queued >= m.cfg.AsyncQueuePerKey {
			return &Error{Kind: KeyQueueFull, Msg: fmt.Sprintf("key %s has %d async executions queued, at its limit of %d (async_queue_per_key); retry when some have run", keyID, u.queued, m.cfg.AsyncQueuePerKey)}
		}
		if q := m.cfg.ResultQuotaBytesPerKey; q-u.resultBytes < minResultBytes {
			return &Error{Kind: ResultQuotaFull, Msg: fmt.Sprintf("key %s's stored async results use %d bytes of its %d-byte quota (result_quota_bytes_per_key); results are removed result_ttl_seconds (%gs) after their execution finished", keyID, u.resultBytes, q, m.cfg.ResultTTLSeconds)}
		}
	}
	if q := m.cfg.ResultQuotaBytes; q-m.resultBytes < minResultBytes {
		return &Error{Kind: ResultQuotaFull, Msg: fmt.Sprintf("the stored async results use %d bytes of this server's %d-byte quota (result_quota_bytes); results are removed result_ttl_seconds (%gs) after their execution finished", m.resultBytes, q, m.cfg.ResultTTLSeconds)}
	}
	return nil
}

// capResult cuts result to max_result_bytes and to what is left of keyID's
// and the server's result quotas, and counts it as stored.
func (m *Manager) capResult(keyID string, result json.RawMessage) json.RawMessage {
	// The room is reserved under the lock, the cutting (of up to
	// max_response_bytes of JSON) done outside it.
	m.mu.Lock()
	limit, why := m.resultLimitLocked(keyID, int64(len(result)))
	reserved := min(int64(len(result)), limit)
	m.countResultLocked(keyID, reserved)
	m.mu.Unlock()
	result = capResult(result, limit, why)
	m.mu.Lock()
	m.countResultLocked(keyID, int64(len(result))-reserved)
	m.mu.Unlock()
	return result
}

// resultLimitLocked is the most a result of n bytes of keyID's may take
// when stored, and why. m.mu is held.
func (m *Manager) resultLimitLocked(keyID string, n int64) (int64, string) {
	u := m.usageOf(keyID)
	limit := m.cfg.MaxResultBytes
	why := fmt.Sprintf("the result was %d bytes, above max_result_bytes (%d)", n, limit)
	if room := m.cfg.ResultQuotaBytes - m.resultBytes; room < limit {
		limit = max(room, 0)
		why = fmt.Sprintf("the result was %d bytes, and the stored async results use %d bytes of this server's %d-byte quota (result_quota_bytes)", n, m.resultBytes, m.cfg.ResultQuotaBytes)
	}
	if room := m.cfg.ResultQuotaBytesPerKey - u.resultBytes; m.keyed() && room < limit {
		limit = max(room, 0)
		why = fmt.Sprintf("the result was %d bytes, and key %s's stored async results use %d bytes of its %d-byte quota (result_quota_bytes_per_key)", n, keyID, u.resultBytes, m.cfg.ResultQuotaBytesPerKey)
	}
	// Even with no room left a cut result is stored: its status and the
	// reason (a few hundred bytes, counted like any other).
	return max(limit, minResultBytes), why
}

// countResultLocked adds n stored result bytes of keyID's (n < 0 frees
// them). m.mu is held.
func (m *Manager) countResultLocked(keyID string, n int64) {
	m.usageOf(keyID).resultBytes += n
	m.resultBytes += n
}

// pendingCallback is the callback state of a job that is not over.
func pendingCallback(rec *Record) *wire.CallbackStatus {
	if rec.CallbackURL == "" {
		return nil
	}
	cb := rec.Callback
	if cb.Status == "" {
		cb.Status = callbackPending
	}
	return &cb
}

// Answer is what a job's owner is told of it.
type Answer struct {
	// Done says the job is over: Result is then the answer's JSON (ending
	// in a newline), the stored result with the job's times and its
	// callback's state; until then Status says where the job is.
	Done   bool
	Status wire.JobStatus
	Result []byte
	// Record is the job as stored, for a transport that answers it in its
	// own words (Record.Kind).
	Record *Record
}

// Get answers job id of keyID's. With wait > 0 it holds until the job is
// over, wait passes, ctx ends or the drain begins. It fails with
// ErrNotFound (no such job, or another key's, or expired), or an
// Unavailable *Error.
func (m *Manager) Get(ctx context.Context, id, keyID string, wait time.Duration) (Answer, error) {
	if !validID(id) {
		return Answer{}, ErrNotFound
	}
	st, err := m.store(ctx)
	if err != nil {
		return Answer{}, err
	}
	rec, err := m.lookup(st, id, keyID)
	if err == nil && rec.State != jobDone && wait > 0 {
		rec, err = m.wait(ctx, st, rec, wait)
	}
	switch {
	case errors.Is(err, ErrNotFound):
		return Answer{}, ErrNotFound
	case err != nil:
		m.log.Error("job store", "error", err)
		return Answer{}, unavailable(err)
	case rec.State == jobDone:
		return Answer{Done: true, Result: doneBody(rec, true), Record: rec}, nil
	}
	return Answer{Status: m.status(rec), Record: rec}, nil
}

// lookup finds a job of keyID's that has not expired.
func (m *Manager) lookup(st *store, id, keyID string) (*Record, error) {
	rec, err := st.get(id)
	if err != nil {
		return nil, err
	}
	if rec.KeyID != keyID || (rec.State == jobDone && time.Since(rec.FinishedAt) > seconds(m.cfg.ResultTTLSeconds)) {
		return nil, ErrNotFound
	}
	return rec, nil
}

// wait holds until the job is done, d passes, the client leaves or the
// drain begins, and returns the job as it then is.
func (m *Manager) wait(ctx context.Context, st *store, rec *Record, d time.Duration) (*Record, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		m.mu.Lock()
		ch, ok := m.waiters[rec.ID]
		if !ok {
			ch = make(chan struct{})
			m.waiters[rec.ID] = ch
		}
		m.mu.Unlock()
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
		case <-m.drainCtx.Done():
			return cur, nil
		}
	}
}

// notify wakes the waiters of a job.
func (m *Manager) notify(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ch, ok := m.waiters[id]; ok {
		close(ch)
		delete(m.waiters, id)
	}
}

func (m *Manager) status(rec *Record) wire.JobStatus {
	js := wire.JobStatus{ExecutionID: rec.ID, Status: string(rec.State), CreatedAt: rec.CreatedAt, StartedAt: rec.StartedAt,
		Callback: pendingCallback(rec)}
	if rec.State == jobQueued {
		m.mu.Lock()
		for i, q := range m.fifo {
			if q.id == rec.ID {
				js.QueuePosition = i + 1
				break
			}
		}
		m.mu.Unlock()
	}
	return js
}

// doneBody is the answer for a finished job (withCallback: with its
// callback's delivery state), and its callback's body (without): the result
// with the job's times added.
func doneBody(rec *Record, withCallback bool) []byte {
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
