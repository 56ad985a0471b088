// Package jobs runs async executions: a queue of jobs in a bbolt store
// that survives restarts, their runs, their results kept for a while, and
// their callbacks' bookkeeping. It knows nothing of HTTP: pkg/api admits
// requests and answers them, a RunFunc runs a job (the server's run
// service), a Notifier delivers its callback (pkg/webhook).
//
// The contract, as pkg/api serves it:
//
//	POST /api/sandbox/execute with "async": true, or POST /api/sandbox/executions
//	  → 202 {"execution_id", "status": "queued", "created_at"}, Location: the job.
//	  (Manager.Submit)
//	GET /api/sandbox/executions/{id}[?wait=true[&timeout=SECONDS]]
//	  → {"execution_id", "status": "queued"|"running", ...} until the run is
//	    over, then the result as the synchronous call answers it, plus
//	    created_at, started_at and finished_at. wait=true holds the answer
//	    until the run is over or timeout (at most max_wait_seconds) passes.
//	  (Manager.Get)
//
// A job belongs to the key that submitted it: other keys get 404
// (ErrNotFound). Jobs wait in a bounded queue (async_queue; past it 503,
// QueueFull), of which one key may hold async_queue_per_key (past it 429,
// KeyQueueFull), drained by one dispatcher per worker; each run goes
// through the RunFunc, the server's run service, so the worker pool bounds
// synchronous and async runs together: a job whose turn comes while the
// pool has no room (ErrNoRoom) waits for it, without counting as refused.
// Results are kept for result_ttl_seconds, each cut down to
// max_result_bytes and to what is left of the key's
// (result_quota_bytes_per_key) and the server's (result_quota_bytes)
// quotas of stored result bytes (see resultcap.go); a key whose stored
// results fill its quota, or a server whose results fill its own, is
// refused new jobs (507, ResultQuotaFull) until results expire. Without
// API keys every request is one tenant: only the server's limits apply. A
// callback_url receives the result when it is ready (the Notifier; see
// pkg/webhook); the delivery's state is the "callback" object of the job's
// answers.
//
// Jobs live in a bbolt store, <data_dir>/jobs.db (see store.go), opened
// when Serve starts and closed when it returns: until it is open (or when
// it cannot be), submissions and lookups fail with Unavailable (503).
// Queued jobs survive a restart and run after it. When the drain begins,
// dispatchers take no more jobs, and a job still waiting for a worker stays
// queued (it runs after the restart). A job still running at the end of
// the shutdown grace period is killed and reported as failed (status
// error_setup, error "the server stopped while this execution was
// running"); after a crash the next start reports it so. Jobs are never
// run twice, and never lost.
package jobs
