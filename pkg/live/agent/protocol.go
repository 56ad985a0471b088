// Package agent is what runs inside a live sandbox (pkg/live): a small
// server of ours, started as the sandbox's first program, that does what
// the host asks inside the sandbox's walls and as its user: start
// processes and stream their output, send them input and signals, read,
// write and list files. The host and the agent speak in frames, one JSON
// object per line: requests on the agent's stdin, events on its
// descriptor 3 (the sandbox's result pipe, which nothing the sandbox's
// processes print can reach).
//
// Doing the work inside, rather than from the host through the sandbox's
// mounts, keeps every file operation within the sandbox's mount namespace
// and permissions: a symlink planted by a program resolves inside the
// sandbox, never on the host.
package agent

import (
	"os"
	"time"
)

// Path is where the agent's binary is mounted in a live sandbox; a
// process started as Path is the agent (Main).
const Path = "/.sandbox-run/sandbox-run-agent"

// LibDir is where a sandbox whose root is an image has the host's loader
// and the libraries the agent needs: the agent is started there through
// the loader (LibDir/<loader> --library-path LibDir Path).
const LibDir = "/.sandbox-run/lib"

// Ops of a Request.
const (
	OpStart      = "start"       // Args, Env (over the sandbox's), Dir, Stdin, Tag: a process; events follow under the request's ID
	OpInput      = "input"       // PID, Data: to its stdin
	OpCloseStdin = "close_stdin" // PID
	OpSignal     = "signal"      // PID, Signal: to its process group
	OpList       = "list"        // the running processes
	OpReadFile   = "read_file"   // Path, Offset, Limit: Data (at most Limit, MaxChunk), EOF
	OpWriteFile  = "write_file"  // Path, Data, Mode, Append: parents made
	OpStat       = "stat"        // Path: Entry
	OpListDir    = "list_dir"    // Path, Depth: Entries
	OpMkdir      = "mkdir"       // Path: parents made; Entry
	OpMove       = "move"        // Path, To: Entry
	OpRemove     = "remove"      // Path: recursively
	OpResize     = "resize"      // PID, Size: a PTY process's terminal
	OpWatch      = "watch"       // Path, Recursive: EvStarted, then EvFS events under the request's ID until OpUnwatch
	OpUnwatch    = "unwatch"     // Watch (a watch's request ID): it ends with EvExit
	OpDial       = "dial"        // Port, Token: a TCP connection to the sandbox's loopback port, relayed (socket mode: RelayName)
)

// Request is a frame from the host.
type Request struct {
	ID uint64 `json:"id"`
	Op string `json:"op"`

	Args  []string `json:"args,omitempty"`
	Env   []string `json:"env,omitempty"`
	Dir   string   `json:"dir,omitempty"`
	Stdin bool     `json:"stdin,omitempty"`
	Tag   string   `json:"tag,omitempty"`
	// PTY starts the process on a new pseudo-terminal of this size (its
	// stdin, stdout and stderr; its output comes as EvPTY events, OpInput
	// writes to the terminal); Result gives it a pipe on descriptor 3
	// whose contents come as EvResult events.
	PTY    *Size `json:"pty,omitempty"`
	Result bool  `json:"result,omitempty"`
	// Size is OpResize's new size.
	Size *Size `json:"size,omitempty"`

	Recursive bool   `json:"recursive,omitempty"`
	Watch     uint64 `json:"watch,omitempty"`

	PID    int    `json:"pid,omitempty"`
	Data   []byte `json:"data,omitempty"`
	Signal int    `json:"signal,omitempty"`

	Path  string      `json:"path,omitempty"`
	To    string      `json:"to,omitempty"`
	Depth int         `json:"depth,omitempty"`
	Mode  os.FileMode `json:"mode,omitempty"`
	// A file in chunks: a read from Offset of at most Limit bytes (0 and
	// anything above: MaxChunk); a write that Appends to the file (else
	// it replaces it whole).
	Offset int64 `json:"offset,omitempty"`
	Limit  int64 `json:"limit,omitempty"`
	Append bool  `json:"append,omitempty"`
	// OpDial's port in the sandbox, and the token that names the relay
	// connection to the host.
	Port  int    `json:"port,omitempty"`
	Token string `json:"token,omitempty"`
}

// The socket mode: an agent started with EnvSocket set connects to the
// Unix socket there (a directory of the host's, mounted read-only), says
// EvHello with EnvSecret's value, then serves requests from the
// connection as from stdin. A connection that ends ends nothing: the agent
// keeps its processes, holds their events (up to a bound) and connects
// again, until the host comes back (a restarted server) or OrphanTimeout
// passes without one. It takes both variables out of its environment,
// and makes itself undumpable, before anything else runs: no process of
// the sandbox can learn the secret.
const (
	EnvSocket = "SANDBOX_RUN_AGENT_SOCKET"
	EnvSecret = "SANDBOX_RUN_AGENT_SECRET"
	// SocketDir is where the host's directory with the socket is mounted.
	SocketDir = "/.sandbox-run/ctl"
	// SocketName is the socket's name in it.
	SocketName = "agent.sock"
	// RelayName is the host's socket beside it for OpDial: the agent
	// connects to a port of the sandbox's loopback, then to RelayName,
	// sends the request's token and a newline, and copies bytes both
	// ways (for a sandbox whose network stack the host cannot enter:
	// gVisor's).
	RelayName = "relay.sock"
)

// Types of an Event.
const (
	EvHello   = "hello"   // Data: the secret (the socket mode's first frame)
	EvStarted = "started" // PID: a process of an OpStart began
	EvStdout  = "stdout"  // Data
	EvStderr  = "stderr"  // Data
	EvPTY     = "pty"     // Data: a PTY process's terminal output
	EvResult  = "result"  // Data: what a process wrote to descriptor 3
	EvFS      = "fs"      // Name (relative to the watched path), FSOp: a watch's event
	EvExit    = "exit"    // Exit, Status (and Error when it did not exit on its own): the last of a process
	EvOK      = "ok"      // a request done (Entry, Entries, Data, Procs as the op answers)
	EvError   = "error"   // Code, Error: a request refused or failed
)

// Codes of an EvError.
const (
	CodeNotFound = "not_found"
	CodeExists   = "already_exists"
	CodeInvalid  = "invalid_argument"
	CodeDenied   = "permission_denied"
	CodeNoSpace  = "resource_exhausted" // the sandbox's disk is full
	CodeInternal = "internal"
)

// Event is a frame from the agent: the answer to request ID, or (for a
// process) one of the events that follow its start.
type Event struct {
	ID   uint64 `json:"id"`
	Type string `json:"type"`

	PID    int    `json:"pid,omitempty"`
	Data   []byte `json:"data,omitempty"`
	Exit   *int   `json:"exit,omitempty"`
	Status string `json:"status,omitempty"`

	Code  string `json:"code,omitempty"`
	Error string `json:"error,omitempty"`

	Name string `json:"name,omitempty"`
	FSOp string `json:"fs_op,omitempty"`

	// EOF says a read reached the end of the file.
	EOF     bool      `json:"eof,omitempty"`
	Entry   *Entry    `json:"entry,omitempty"`
	Entries []Entry   `json:"entries,omitempty"`
	Procs   []Process `json:"procs,omitempty"`
}

// FSOps of an EvFS event.
const (
	FSCreate = "create"
	FSWrite  = "write"
	FSRemove = "remove"
	FSRename = "rename"
	FSChmod  = "chmod"
)

// Size is a terminal's size.
type Size struct {
	Cols uint16 `json:"cols"`
	Rows uint16 `json:"rows"`
}

// Entry is a file, directory or symlink.
type Entry struct {
	Name    string      `json:"name"`
	Path    string      `json:"path"`
	Type    string      `json:"type"` // file, dir, symlink
	Size    int64       `json:"size"`
	Mode    os.FileMode `json:"mode"`
	ModTime time.Time   `json:"mod_time"`
	Target  string      `json:"target,omitempty"` // a symlink's
}

// Process is a running process of the agent's.
type Process struct {
	PID  int      `json:"pid"`
	Args []string `json:"args"`
	Dir  string   `json:"dir,omitempty"`
	Tag  string   `json:"tag,omitempty"`
	PTY  bool     `json:"pty,omitempty"`
}

// MaxChunk bounds the data of one read or write of a file: larger files
// go in chunks (Offset, Append).
const MaxChunk = 8 << 20

// MaxFrame bounds one frame: a chunk of MaxChunk in base64 and its
// envelope, with room to spare.
const MaxFrame = 16 << 20
