package wire

import "time"

// Live sandboxes (/api/sandbox/sandboxes): sandboxes that stay up between
// calls, with processes, files and ports, until killed or timed out.

// SandboxRequest creates a live sandbox (POST /api/sandbox/sandboxes).
type SandboxRequest struct {
	// Languages whose toolchains it has (default python, javascript and
	// bash); Template is E2B's name for a set ("base",
	// "code-interpreter-v1") and is used when Languages is empty.
	Languages []string `json:"languages,omitempty"`
	Template  string   `json:"template,omitempty"`
	// Env is every process's environment, under each process's own.
	Env      map[string]string `json:"env,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	// TimeoutSeconds is its life from now (default: the server's
	// live.default_timeout_seconds); it can be moved later.
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty"`
	// MemoryMB bounds the memory of all its processes together.
	MemoryMB int64 `json:"memory_mb,omitempty"`
}

// Sandbox is a live sandbox.
type Sandbox struct {
	ID        string            `json:"id"`
	Template  string            `json:"template,omitempty"`
	Languages []string          `json:"languages,omitempty"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	MemoryMB  int64             `json:"memory_mb"`
	StartedAt time.Time         `json:"started_at"`
	EndAt     time.Time         `json:"end_at"`
	State     string            `json:"state"` // running
	// AccessToken lets a holder call the sandbox without the owner's key
	// (E2B's envd access token).
	AccessToken string `json:"access_token,omitempty"`
}

// TerminalSize is a PTY's size.
type TerminalSize struct {
	Cols int `json:"cols"`
	Rows int `json:"rows"`
}

// ProcessRequest starts a process in a live sandbox
// (POST /api/sandbox/sandboxes/{id}/processes).
type ProcessRequest struct {
	// Command runs through `bash -l -c`; Args, instead, is an argv.
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// Cwd is its working directory (default the sandbox's home, /work).
	Cwd string `json:"cwd,omitempty"`
	// Stdin keeps its standard input open for .../stdin (else it reads
	// end-of-file at once).
	Stdin bool `json:"stdin,omitempty"`
	// PTY runs it on a pseudo-terminal of this size (its output is the
	// terminal's, as "pty" events).
	PTY *TerminalSize `json:"pty,omitempty"`
	// TimeoutSeconds kills it once it has run this long (0: none but the
	// sandbox's life).
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty"`
	// Background answers at once with its pid; it runs on.
	Background bool   `json:"background,omitempty"`
	Tag        string `json:"tag,omitempty"`
}

// ProcessResult is a process that ended (or, for a background one, that
// started: PID only).
type ProcessResult struct {
	PID      int    `json:"pid"`
	ExitCode *int   `json:"exit_code,omitempty"`
	Status   string `json:"status,omitempty"` // "exit status 3", "signal: killed"
	Stdout   string `json:"stdout,omitempty"`
	Stderr   string `json:"stderr,omitempty"`
	// StdoutTruncated and StderrTruncated say the output was cut to the
	// server's response budget.
	StdoutTruncated bool `json:"stdout_truncated,omitempty"`
	StderrTruncated bool `json:"stderr_truncated,omitempty"`
	// TimedOut says TimeoutSeconds killed it.
	TimedOut bool   `json:"timed_out,omitempty"`
	Error    string `json:"error,omitempty"`
}

// ProcessInfo is a running process of a live sandbox.
type ProcessInfo struct {
	PID  int      `json:"pid"`
	Args []string `json:"args"`
	Cwd  string   `json:"cwd,omitempty"`
	Tag  string   `json:"tag,omitempty"`
	PTY  bool     `json:"pty,omitempty"`
}

// FileEntry is a file, directory or symlink in a live sandbox.
type FileEntry struct {
	Name    string    `json:"name"`
	Path    string    `json:"path"`
	Type    string    `json:"type"` // file, dir, symlink
	Size    int64     `json:"size"`
	Mode    string    `json:"mode"` // as ls shows it: -rw-r--r--
	ModTime time.Time `json:"mod_time"`
	Target  string    `json:"target,omitempty"`
}
