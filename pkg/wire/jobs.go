package wire

import "time"

// JobStatus is the answer about an async execution that is not over.
type JobStatus struct {
	ExecutionID   string    `json:"execution_id"`
	Status        string    `json:"status"` // queued or running
	CreatedAt     time.Time `json:"created_at"`
	StartedAt     time.Time `json:"started_at,omitzero"`
	QueuePosition int       `json:"queue_position,omitempty"` // 1 is next
	// Callback is the callback's delivery state, for a job with a
	// callback_url (pending until the execution is over).
	Callback *CallbackStatus `json:"callback,omitempty"`
}

// CallbackStatus is the state of an async execution's callback delivery,
// stored with the job after every attempt and shown as the "callback"
// object of GET /api/sandbox/executions/{id}.
type CallbackStatus struct {
	// Status is pending (the execution is not over, or the delivery is
	// under way), delivered, or failed (given up: a refused answer, or the
	// retries used up).
	Status   string `json:"status"`
	Attempts int    `json:"attempts"`
	// LastHTTPStatus is the receiver's answer to the last attempt (absent
	// when it did not answer); Error why the last attempt failed.
	LastHTTPStatus int       `json:"last_http_status,omitempty"`
	Error          string    `json:"error,omitempty"`
	LastAttemptAt  time.Time `json:"last_attempt_at,omitzero"`
	NextAttemptAt  time.Time `json:"next_attempt_at,omitzero"` // the retry's time, while one is due
	DeliveredAt    time.Time `json:"delivered_at,omitzero"`
	FailedAt       time.Time `json:"failed_at,omitzero"` // when it was given up
}

// ToolchainCache is where one of a server's toolchain caches (Go's build
// cache) stands, as /readyz says: "preparing" (for ElapsedSeconds),
// "ready" or "failed" (Error says why; runs compile without it).
type ToolchainCache struct {
	Language       string  `json:"language"`
	Quick          bool    `json:"quick,omitempty"` // the cache of the common packages, made first
	State          string  `json:"state"`
	Error          string  `json:"error,omitempty"`
	ElapsedSeconds float64 `json:"elapsed_seconds,omitempty"`
}
