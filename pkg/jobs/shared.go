package jobs

import (
	"encoding/json"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// What another store of jobs (pkg/cluster's, in JetStream) needs to keep
// and answer jobs exactly as this package does.

// The states of a Record.
const (
	StateQueued  = string(jobQueued)
	StateRunning = string(jobRunning)
	StateDone    = string(jobDone)
)

// Callback delivery states of wire.CallbackStatus.
const (
	CallbackPending   = callbackPending
	CallbackDelivered = callbackDelivered
	CallbackFailed    = callbackFailed
)

// NewRecord is a queued job of keyID's, created now.
func NewRecord(id, keyID, language, callbackURL string) *Record {
	rec := &Record{ID: id, KeyID: keyID, Language: language, State: jobQueued, CreatedAt: jobNow(), CallbackURL: callbackURL}
	if callbackURL != "" {
		rec.Callback = wire.CallbackStatus{Status: callbackPending}
	}
	return rec
}

// Start marks rec running, now.
func (rec *Record) Start() { rec.State, rec.StartedAt = jobRunning, jobNow() }

// Finish marks rec done with result, now.
func (rec *Record) Finish(result json.RawMessage) { finishRecord(rec, jobNow(), result) }

// Done says whether rec's run is over.
func (rec *Record) Done() bool { return rec.State == jobDone }

// StateName is rec's state: queued, running or done.
func (rec *Record) StateName() string { return string(rec.State) }

// Expired says whether rec's result has outlived ttl.
func (rec *Record) Expired(ttl time.Duration) bool {
	return rec.State == jobDone && time.Since(rec.FinishedAt) > ttl
}

// Answer is what rec's owner is told of it (its queue position unknown).
func (rec *Record) Answer() Answer {
	if rec.State == jobDone {
		return Answer{Done: true, Result: doneBody(rec, true), Record: rec}
	}
	return Answer{Status: wire.JobStatus{ExecutionID: rec.ID, Status: string(rec.State), CreatedAt: rec.CreatedAt,
		StartedAt: rec.StartedAt, Callback: pendingCallback(rec)}, Record: rec}
}

// CallbackBody is the body of rec's callback: its result with its times.
func (rec *Record) CallbackBody() []byte { return doneBody(rec, false) }

// CapResult returns result if it fits in limit bytes, else result cut down
// to fit (result_truncated says so, with why).
func CapResult(result json.RawMessage, limit int64, why string) json.RawMessage {
	return capResult(result, limit, why)
}

// FailedResult is the result of a job that could not run to its end for a
// reason of the server's: status error_setup, with the reason.
func FailedResult(id, language, reason string) json.RawMessage {
	return failedResult(id, language, reason)
}

// ApplyAttempt records one delivery attempt in cb.
func ApplyAttempt(cb *wire.CallbackStatus, a Attempt) {
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
}
