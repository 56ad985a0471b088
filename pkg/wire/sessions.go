package wire

import "time"

// SessionLimits are the defaults of a session's executions, in the names
// of ExecuteRequest; an execution's own limits win.
type SessionLimits = Limits

// SessionRequest is the body of POST /api/sandbox/sessions.
type SessionRequest struct {
	Language string `json:"language"`
	// Interpreter makes the session a live interpreter: its executions are
	// cells run by one long-lived process (python), whose variables,
	// imports and functions persist from cell to cell.
	Interpreter bool `json:"interpreter,omitempty"`
	// Image runs every execution of the session in this OCI image (see
	// ExecuteRequest.Image; the server's images.allow decides).
	Image string `json:"image,omitempty"`
	// TTLSeconds is how long the session lives without executions
	// (default: the server's session_idle_seconds).
	TTLSeconds float64 `json:"ttl_seconds,omitempty"`
	// Network is the network access of the session's executions (see
	// ExecuteRequest.Network): their default, and an interpreter
	// session's interpreter's for its whole life.
	Network *NetworkRequest `json:"network,omitempty"`
	// Secrets are the secrets the session's executions use (see
	// ExecuteRequest.Secrets; they need Network with their hosts): their
	// default, and an interpreter session's interpreter's for its whole
	// life (its cells see the same placeholders; each cell's requests get
	// the values as the store has them when the cell starts).
	Secrets []string `json:"secrets,omitempty"`
	SessionLimits
}

// SessionInfo is a session as the API shows it; Files and BytesUsed only
// in GET /api/sandbox/sessions/{session_id}.
type SessionInfo struct {
	SessionID   string          `json:"session_id"`
	Language    string          `json:"language"`
	Image       string          `json:"image,omitempty"`
	Interpreter bool            `json:"interpreter,omitempty"`
	TTLSeconds  float64         `json:"ttl_seconds"`
	CreatedAt   time.Time       `json:"created_at"`
	LastUsedAt  time.Time       `json:"last_used_at"`
	ExpiresAt   time.Time       `json:"expires_at"`
	MaxBytes    int64           `json:"max_bytes"`
	Network     *NetworkRequest `json:"network,omitempty"`
	Secrets     []string        `json:"secrets,omitempty"`
	SessionLimits
	BytesUsed *int64        `json:"bytes_used,omitempty"`
	Files     []SessionFile `json:"files,omitempty"`
}

// SessionFile is one regular file a session keeps in /work.
type SessionFile struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
}
