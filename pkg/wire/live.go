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
	// Network opens its network to what Allow lists, within the server's
	// network.allow, as a run's (ExecuteRequest.Network); none by default.
	Network *NetworkRequest `json:"network,omitempty"`
	// Secrets names secrets of the key's its processes use without
	// seeing them (ExecuteRequest.Secrets; needs Network).
	Secrets []string `json:"secrets,omitempty"`
	// Image, when set, is an OCI image (allowed by the server's
	// images.allow) whose root filesystem is the sandbox's, with the
	// image's own programs; Languages and Template are then ignored.
	Image string `json:"image,omitempty"`
	// AutoPause: its timeout pauses it instead of ending it; any call
	// resumes it.
	AutoPause bool `json:"auto_pause,omitempty"`
	// Snapshot, when set, is a snapshot of the key's whose files the
	// sandbox starts with; it is made as the snapshot's sandbox was, but
	// for what this request gives.
	Snapshot string `json:"snapshot,omitempty"`
	// IdlePauseSeconds pauses it once nobody has used it for that long
	// (no call, no output waited for, no port connection open); any call
	// resumes it. Default: the key's live_idle_pause_seconds, else the
	// server's live.idle_pause_seconds (0: never).
	IdlePauseSeconds float64 `json:"idle_pause_seconds,omitempty"`
	// Isolation is its wall: "native" or "gvisor" (its forks carry its
	// memory). Default: the key's isolation_min, else gvisor for the code
	// interpreter's template where the server has it (and no network or
	// image is asked), else native.
	Isolation string `json:"isolation,omitempty"`
}

// Snapshot is a live sandbox's files kept at one moment
// (POST /api/sandbox/sandboxes/{id}/snapshots).
type Snapshot struct {
	ID        string    `json:"id"`
	Names     []string  `json:"names"`
	SandboxID string    `json:"sandbox_id"`
	CreatedAt time.Time `json:"created_at"`
	SizeBytes int64     `json:"size_bytes"`
	// Memory: it keeps the sandbox's memory and running processes too (a
	// sandbox under gVisor); a sandbox made from it goes on from them.
	Memory bool `json:"memory"`
}

// ForkChild is one child of a fork: its sandbox, or why it could not be
// made.
type ForkChild struct {
	Sandbox *Sandbox `json:"sandbox,omitempty"`
	Error   string   `json:"error,omitempty"`
}

// ForkResult is what POST /api/sandbox/sandboxes/{id}/fork made.
type ForkResult struct {
	Children []ForkChild `json:"children"`
	// Memory says whether the children have the parent's memory (its
	// processes and their state): false, they have its files.
	Memory bool `json:"memory"`
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
	State     string            `json:"state"` // running, paused
	// Evicted: paused and written to disk, its memory given back; any
	// call brings it back.
	Evicted   bool `json:"evicted,omitempty"`
	AutoPause bool `json:"auto_pause,omitempty"`
	// Network is what its network may reach (none when empty); Image the
	// image its root is ("": the host's toolchains).
	Network []string `json:"network,omitempty"`
	// NetworkBudgets are the bytes its network may move by entry of
	// Network (NetworkRequest.Budgets).
	NetworkBudgets map[string]int64 `json:"network_budgets,omitempty"`
	// Secrets names the secrets it uses.
	Secrets []string `json:"secrets,omitempty"`
	Image   string   `json:"image,omitempty"`
	// Isolation is its wall (native, gvisor); ForkedMemory says it was
	// forked with its parent's memory and running processes.
	Isolation    string `json:"isolation"`
	ForkedMemory bool   `json:"forked_memory,omitempty"`
	// IdlePauseSeconds: it is paused once idle that long (0: never).
	IdlePauseSeconds float64 `json:"idle_pause_seconds,omitempty"`
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
