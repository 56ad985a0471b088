package runner

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"os"
	"strings"

	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// The run service's edges below it: a Backend runs prepared runs (pkg/local,
// the executor on this host), a Remote sends them elsewhere (a cluster's
// workers, wired by internal/app/clusternode). Both speak the wire types only,
// so that nothing above the run service links the executor or the cluster.

// Backend is the executor the run service drives, on this host. Every error
// it returns is an *Error (its kind classified by the backend).
type Backend interface {
	// Execute runs r's request (the run service holds a worker for it).
	Execute(ctx context.Context, r *Run) (*wire.Result, error)
	// Prepare does ahead what Execute would do first that may take long
	// (pulling an image), so that it holds no worker.
	Prepare(ctx context.Context, r *Run)
	// Validate refuses (Invalid) what Execute would refuse only when the
	// run starts (test cases, environment, file layout).
	Validate(r *Run) error
	// Languages are the languages the backend knows, installed or not.
	Languages() []Language
	// Lookup finds a language by name or alias.
	Lookup(name string) (Language, bool)
	// Resolve finds the installed version of a language whose version
	// starts with version ("" the default): an Invalid *Error when there is
	// none, in the API's words.
	Resolve(name, version string) (Language, Version, error)
}

// LiveIsolations is a Backend that says which isolations its live
// sandboxes can have beside the native one (gvisor, where runsc is
// installed).
type LiveIsolations interface {
	LiveIsolations() []string
}

// Language is a language as a backend has it.
type Language struct {
	Name                string
	Aliases, Extensions []string
	// Source is the program's file name in /work.
	Source string
	// Compiled: a compile step runs first. Interpreter: interpreter
	// sessions (notebook cells) are possible.
	Compiled, Interpreter bool
	// Available says the default version is installed; Err why not.
	Available bool
	Err       error
	// Versions are the installed versions (the default among them).
	Versions []Version
}

// Version is one installed version of a language.
type Version struct {
	Version  string
	Default  bool
	Compiled bool
	Aliases  []string
	// MemoryMB and Processes are the version's own default limits (0: the
	// server's).
	MemoryMB  int64
	Processes int
}

// SessionExecutor is a backend's sessions' files and interpreters (the
// executor on this host, or a cluster's workers for an API node).
type SessionExecutor interface {
	DeleteSession(id string) error
	TryDeleteSession(id string) error
	SessionFiles(id string) ([]wire.SessionFile, int64, error)
	OpenSessionFile(id, path string) (*os.File, error)
	RemoveSessionFile(id, path string) error
	SessionBusy(id string) bool
}

// Remote runs a checked run elsewhere (a cluster's workers), with its own
// admission: its refusals are *Error (QueueFull when it is full, Busy when
// it is unavailable).
type Remote interface {
	Run(ctx context.Context, r *Run) (*wire.Result, error)
	// Sessions says the remote keeps sessions (their runs go to it).
	Sessions() bool
}

// Input is the stdin a request gives (input_data, decoded), or nil.
func Input(req *wire.ExecuteRequest) io.Reader {
	if req.InputData == "" {
		return nil
	}
	if req.InputDataEncoding == "base64" {
		data, _ := base64.StdEncoding.DecodeString(req.InputData) // checked by Check
		return bytes.NewReader(data)
	}
	return strings.NewReader(req.InputData)
}

// DefaultVersion is the version a request that names none gets ("" when
// none is installed).
func (l Language) DefaultVersion() string {
	for _, v := range l.Versions {
		if v.Default {
			return v.Version
		}
	}
	return ""
}
