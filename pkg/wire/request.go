package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// ExecuteRequest is the body of POST /api/sandbox/execute. The first six
// fields are the seed contract's, by name and meaning.
type ExecuteRequest struct {
	Language  string `json:"language"`
	Code      string `json:"code"`
	InputData string `json:"input_data,omitempty"`
	// InputDataEncoding "base64" carries stdin that is not UTF-8 text.
	InputDataEncoding string              `json:"input_data_encoding,omitempty"`
	Files             map[string]FileData `json:"files,omitempty"`
	// Limits: timeout_seconds and max_memory_mb (the seed's), and the
	// others, flat in the JSON.
	Limits

	Version string `json:"version,omitempty"`
	// Image runs in an OCI image's root filesystem (the server's
	// images.allow decides which).
	Image       string            `json:"image,omitempty"`
	Args        []string          `json:"args,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	OutputFiles []string          `json:"output_files,omitempty"`
	// MaxResponseBytes lowers the server's response budget
	// (max_response_bytes) for this request.
	MaxResponseBytes int64 `json:"max_response_bytes,omitempty"`

	// Network opens the run's network to the destinations it allows, within
	// the server's network.allow (none by default).
	Network *NetworkRequest `json:"network,omitempty"`
	// Secrets names secrets of the caller's key (PUT /api/sandbox/secrets)
	// the run uses without seeing them: each is in its environment under
	// its name as a placeholder, which the egress replaces with the value
	// in the run's HTTP and HTTPS requests to the secret's hosts (the run
	// needs network access to them).
	Secrets []string `json:"secrets,omitempty"`
	// Isolation is the wall the run is behind: "native" (the engine's
	// namespaces, cgroups and seccomp) or "gvisor" (gVisor's user-space
	// kernel as well); none: the key's isolation_min, else the server's
	// isolation.default. Below the key's isolation_min it is refused.
	Isolation string `json:"isolation,omitempty"`

	// SessionID runs in a session's persistent /work (POST /api/sandbox/sessions).
	SessionID string `json:"session_id,omitempty"`
	// Async answers 202 at once; the result is polled or sent to CallbackURL.
	Async       bool   `json:"async,omitempty"`
	CallbackURL string `json:"callback_url,omitempty"`
	// TestCases runs the program once per case after one compile.
	TestCases []TestCase `json:"test_cases,omitempty"`
	// Compare is how outputs meet expectations: exact, lines (default:
	// trailing whitespace and blank lines ignored) or float.
	Compare        string  `json:"compare,omitempty"`
	FloatTolerance float64 `json:"float_tolerance,omitempty"`

	// Entrypoint calls a class's method or a function of the code (loaded
	// as a module) instead of running it as a script; the result then has
	// return_value or exception.
	Entrypoint *Entrypoint `json:"entrypoint,omitempty"`

	// CodeFileID and FileIDs name stored files (POST /api/sandbox/files)
	// given as {"file_id": "..."} in place of code or a file's content.
	CodeFileID string            `json:"-"`
	FileIDs    map[string]string `json:"-"`
	// Interpreter runs the code as a cell of its session's interpreter:
	// set from the session (runner.UseSession), never by a client.
	Interpreter bool `json:"-"`
	// TimeoutAuto is "timeout_seconds": "auto": a timeout learned from the
	// durations of recent successful runs (executor.AutoTimeoutFactor).
	TimeoutAuto bool `json:"-"`
}

// UnmarshalJSON decodes a request strictly (no unknown fields) and accepts
// {"file_id": "..."} as code or as a file's content.
func (req *ExecuteRequest) UnmarshalJSON(b []byte) error {
	type plain ExecuteRequest
	var raw struct {
		plain
		Code           json.RawMessage            `json:"code"`
		Files          map[string]json.RawMessage `json:"files,omitempty"`
		TimeoutSeconds json.RawMessage            `json:"timeout_seconds,omitempty"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return err
	}
	*req = ExecuteRequest(raw.plain)
	if t := bytes.TrimSpace(raw.TimeoutSeconds); len(t) > 0 && string(t) != "null" {
		if string(t) == `"auto"` {
			req.TimeoutAuto = true
		} else if t[0] == '"' || json.Unmarshal(t, &req.TimeoutSeconds) != nil {
			return errors.New(`timeout_seconds must be a number or "auto"`)
		}
	}
	if len(raw.Code) > 0 && string(raw.Code) != "null" {
		if id, ok := fileRef(raw.Code); ok {
			req.CodeFileID = id
		} else if err := json.Unmarshal(raw.Code, &req.Code); err != nil {
			return errors.New(`code must be a string or {"file_id": "..."}`)
		}
	}
	for name, v := range raw.Files {
		if id, ok := fileRef(v); ok {
			if req.FileIDs == nil {
				req.FileIDs = map[string]string{}
			}
			req.FileIDs[name] = id
			continue
		}
		var d FileData
		if err := json.Unmarshal(v, &d); err != nil {
			return fmt.Errorf("files[%q]: %v", name, err)
		}
		if req.Files == nil {
			req.Files = map[string]FileData{}
		}
		req.Files[name] = d
	}
	return nil
}

// MarshalJSON writes CodeFileID and FileIDs as {"file_id": "..."}, so a
// request built in Go travels as UnmarshalJSON reads it.
func (req ExecuteRequest) MarshalJSON() ([]byte, error) {
	type plain ExecuteRequest
	type ref struct {
		FileID string `json:"file_id"`
	}
	out := struct {
		plain
		Code           any            `json:"code"`
		Files          map[string]any `json:"files,omitempty"`
		TimeoutSeconds any            `json:"timeout_seconds,omitempty"`
	}{plain: plain(req), Code: req.Code}
	if req.TimeoutAuto {
		out.TimeoutSeconds = "auto"
	} else if req.TimeoutSeconds != 0 {
		out.TimeoutSeconds = req.TimeoutSeconds
	}
	if req.CodeFileID != "" {
		out.Code = ref{req.CodeFileID}
	}
	for name, data := range req.Files {
		if out.Files == nil {
			out.Files = map[string]any{}
		}
		out.Files[name] = data
	}
	for name, id := range req.FileIDs {
		if out.Files == nil {
			out.Files = map[string]any{}
		}
		out.Files[name] = ref{id}
	}
	return json.Marshal(out)
}

// fileRef recognises {"file_id": "..."}.
func fileRef(raw json.RawMessage) (string, bool) {
	var ref struct {
		FileID *string `json:"file_id"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) && dec.Decode(&ref) == nil && ref.FileID != nil {
		return *ref.FileID, true
	}
	return "", false
}

// ErrorResponse is the body of every error.
type ErrorResponse struct {
	Error       string `json:"error"`
	ExecutionID string `json:"execution_id,omitempty"`
}

// LanguageInfo is one entry of GET /api/sandbox/languages.
type LanguageInfo struct {
	Name          string   `json:"name"`
	Aliases       []string `json:"aliases"`
	Extensions    []string `json:"extensions"`
	Version       string   `json:"version"`
	Compiled      bool     `json:"compiled"`
	DefaultLimits LimitSet `json:"default_limits"`
	// Versions are the installed versions (the top-level fields describe
	// the default one, what a request without "version" gets).
	Versions []LanguageVersion `json:"versions"`
}

// LanguageVersion is one installed version of a language.
type LanguageVersion struct {
	Version       string   `json:"version"`
	Available     bool     `json:"available"`
	Default       bool     `json:"default"`
	Compiled      bool     `json:"compiled"`
	DefaultLimits LimitSet `json:"default_limits"`
}

// LimitSet is a set of execution limits in the API's units.
type LimitSet struct {
	TimeoutSeconds        float64 `yaml:"timeout_seconds" json:"timeout_seconds"`
	CPUTimeSeconds        float64 `yaml:"cpu_time_seconds" json:"cpu_time_seconds"`
	MemoryMB              int64   `yaml:"memory_mb" json:"memory_mb"`
	Processes             int     `yaml:"processes" json:"processes"`
	OutputBytes           int64   `yaml:"output_bytes" json:"output_bytes"`
	FileSizeBytes         int64   `yaml:"file_size_bytes" json:"file_size_bytes"`
	CompileTimeoutSeconds float64 `yaml:"compile_timeout_seconds" json:"compile_timeout_seconds"`
}

// NetworkRequest is a run's network access: Allow lists what it may reach,
// each entry a host name ("pypi.org", "*.pythonhosted.org": the name's
// subdomains), an IP address or a CIDR, with an optional ":PORT" (none:
// every port); "host.sandbox.internal:PORT" is the server's own loopback
// on that port. Everything else stays unreachable, and so do loopback,
// private, link-local and metadata addresses that an allowed name
// resolves to.
type NetworkRequest struct {
	Allow []string `json:"allow"`
	// Budgets bound the bytes (both ways, over all its connections) a
	// run may move with what an entry of Allow allows, by the entry as
	// written: past one, its connections are reset and new ones refused.
	Budgets map[string]int64 `json:"budgets,omitempty"`
}
