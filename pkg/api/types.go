package api

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// ExecuteRequest is the body of POST /api/sandbox/execute. The first six
// fields are the seed contract's, by name and meaning.
type ExecuteRequest struct {
	Language  string `json:"language"`
	Code      string `json:"code"`
	InputData string `json:"input_data,omitempty"`
	// InputDataEncoding "base64" carries stdin that is not UTF-8 text.
	InputDataEncoding string                       `json:"input_data_encoding,omitempty"`
	Files             map[string]executor.FileData `json:"files,omitempty"`
	TimeoutSeconds    float64                      `json:"timeout_seconds,omitempty"`
	MaxMemoryMB       int64                        `json:"max_memory_mb,omitempty"`

	Version               string            `json:"version,omitempty"`
	Args                  []string          `json:"args,omitempty"`
	Env                   map[string]string `json:"env,omitempty"`
	CPUTimeSeconds        float64           `json:"cpu_time_seconds,omitempty"`
	MaxProcesses          int               `json:"max_processes,omitempty"`
	MaxOutputBytes        int64             `json:"max_output_bytes,omitempty"`
	MaxFileSizeBytes      int64             `json:"max_file_size_bytes,omitempty"`
	CompileTimeoutSeconds float64           `json:"compile_timeout_seconds,omitempty"`
	OutputFiles           []string          `json:"output_files,omitempty"`
	// MaxResponseBytes lowers the server's response budget
	// (max_response_bytes) for this request.
	MaxResponseBytes int64 `json:"max_response_bytes,omitempty"`

	// SessionID runs in a session's persistent /work (POST /api/sandbox/sessions).
	SessionID string `json:"session_id,omitempty"`
	// Async answers 202 at once; the result is polled or sent to CallbackURL.
	Async       bool   `json:"async,omitempty"`
	CallbackURL string `json:"callback_url,omitempty"`
	// TestCases runs the program once per case after one compile.
	TestCases []executor.TestCase `json:"test_cases,omitempty"`
	// Compare is how outputs meet expectations: exact, lines (default:
	// trailing whitespace and blank lines ignored) or float.
	Compare        string  `json:"compare,omitempty"`
	FloatTolerance float64 `json:"float_tolerance,omitempty"`

	// Entrypoint calls a class's method or a function of the code (loaded
	// as a module) instead of running it as a script; the result then has
	// return_value or exception.
	Entrypoint *executor.Entrypoint `json:"entrypoint,omitempty"`

	// CodeFileID and FileIDs name stored files (POST /api/sandbox/files)
	// given as {"file_id": "..."} in place of code or a file's content.
	CodeFileID string            `json:"-"`
	FileIDs    map[string]string `json:"-"`
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
		var d executor.FileData
		if err := json.Unmarshal(v, &d); err != nil {
			return fmt.Errorf("files[%q]: %v", name, err)
		}
		if req.Files == nil {
			req.Files = map[string]executor.FileData{}
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

// requestError is a 4xx answer with its status.
type requestError struct {
	status int
	msg    string
}

func (e *requestError) Error() string { return e.msg }

func badRequest(format string, a ...any) error {
	return &requestError{http.StatusBadRequest, fmt.Sprintf(format, a...)}
}

// DecodeExecuteRequest reads and checks a request body: JSON only, no
// unknown fields, one value, within the configured bounds and maximums.
func DecodeExecuteRequest(r io.Reader, cfg *Config) (*ExecuteRequest, error) {
	body, err := io.ReadAll(r)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &requestError{http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", tooBig.Limit)}
		}
		return nil, badRequest("read body: %v", err)
	}
	// JSON would replace invalid UTF-8 by U+FFFD: the program that ran would
	// not be the one sent. Bytes travel base64.
	if !utf8.Valid(body) {
		return nil, badRequest("malformed JSON: the body is not valid UTF-8; send binary content base64 (files: {\"content\": ..., \"encoding\": \"base64\"}, input_data_encoding: base64)")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var req ExecuteRequest
	if err := dec.Decode(&req); err != nil {
		return nil, badRequest("malformed JSON: %s", jsonProblem(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, badRequest("malformed JSON: more than one value in the body")
	}
	if err := req.check(cfg); err != nil {
		return nil, err
	}
	return &req, nil
}

// jsonProblem says what is wrong with a body in the API's terms, not Go's.
func jsonProblem(err error) string {
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &typeErr) && typeErr.Field != "":
		field := typeErr.Field
		if i := strings.LastIndexByte(field, '.'); i >= 0 {
			field = field[i+1:]
		}
		want := "of another type"
		switch typeErr.Type.Kind() {
		case reflect.Float32, reflect.Float64, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			want = "a number"
		case reflect.String:
			want = "a string"
		case reflect.Bool:
			want = "true or false"
		case reflect.Slice, reflect.Array:
			want = "an array"
		case reflect.Map, reflect.Struct:
			want = "an object"
		}
		return fmt.Sprintf("%s must be %s, not a JSON %s", field, want, typeErr.Value)
	case errors.As(err, &typeErr):
		return "the body must be a JSON object"
	case errors.Is(err, io.EOF):
		return "the body is empty"
	}
	return err.Error()
}

func (req *ExecuteRequest) check(cfg *Config) error {
	switch {
	case strings.TrimSpace(req.Language) == "":
		return badRequest("language is required")
	case req.Code == "" && req.CodeFileID == "":
		return badRequest("code is required")
	case len(req.Files) > cfg.MaxFiles:
		return badRequest("too many files: %d (at most %d)", len(req.Files), cfg.MaxFiles)
	case len(req.Args) > cfg.MaxArgs:
		return badRequest("too many args: %d (at most %d)", len(req.Args), cfg.MaxArgs)
	case len(req.Env) > cfg.MaxEnv:
		return badRequest("too many env entries: %d (at most %d)", len(req.Env), cfg.MaxEnv)
	}
	for name := range req.Files {
		if _, err := sandbox.ValidatePath(name); err != nil {
			return badRequest("invalid file name: %v", err)
		}
	}
	for name := range req.FileIDs {
		if _, err := sandbox.ValidatePath(name); err != nil {
			return badRequest("invalid file name: %v", err)
		}
	}
	switch req.InputDataEncoding {
	case "", "utf-8":
	case "base64":
		if _, err := base64.StdEncoding.DecodeString(req.InputData); err != nil {
			return badRequest("input_data is not valid base64: %v", err)
		}
	default:
		return badRequest("input_data_encoding %q: use utf-8 or base64", req.InputDataEncoding)
	}
	max := cfg.Maximums
	checks := []struct {
		name      string
		value     float64
		max       float64
		unit      string
		isInteger bool
	}{
		{"timeout_seconds", req.TimeoutSeconds, max.TimeoutSeconds, "s", false},
		{"cpu_time_seconds", req.CPUTimeSeconds, max.CPUTimeSeconds, "s", false},
		{"max_memory_mb", float64(req.MaxMemoryMB), float64(max.MemoryMB), " MiB", true},
		{"max_processes", float64(req.MaxProcesses), float64(max.Processes), "", true},
		{"max_output_bytes", float64(req.MaxOutputBytes), float64(max.OutputBytes), " bytes", true},
		{"max_file_size_bytes", float64(req.MaxFileSizeBytes), float64(max.FileSizeBytes), " bytes", true},
		{"compile_timeout_seconds", req.CompileTimeoutSeconds, max.CompileTimeoutSeconds, "s", false},
		{"max_response_bytes", float64(req.MaxResponseBytes), float64(cfg.MaxResponseBytes), " bytes", true},
	}
	for _, c := range checks {
		switch {
		case c.value < 0 || math.IsNaN(c.value) || math.IsInf(c.value, 0):
			return badRequest("%s must not be negative", c.name)
		case c.max > 0 && c.value > c.max:
			return badRequest("%s %g is above the maximum of %g%s", c.name, c.value, c.max, c.unit)
		}
	}
	return nil
}

// toExecutor maps the request onto the executor. Limits the request leaves
// out stay zero: the executor fills them from the language, then from the
// server's defaults (see NewExecutor).
func (req *ExecuteRequest) toExecutor() *executor.Request {
	x := &executor.Request{
		Language:    req.Language,
		Version:     req.Version,
		Code:        []byte(req.Code),
		Args:        req.Args,
		Env:         req.Env,
		OutputFiles: req.OutputFiles,
		Limits: executor.Limits{
			WallTime:    seconds(req.TimeoutSeconds),
			CPUTime:     seconds(req.CPUTimeSeconds),
			MemoryBytes: req.MaxMemoryMB << 20,
			Processes:   req.MaxProcesses,
			OutputBytes: req.MaxOutputBytes,
			FileSize:    req.MaxFileSizeBytes,
		},
		CompileLimits:  executor.Limits{WallTime: seconds(req.CompileTimeoutSeconds)},
		SessionID:      req.SessionID,
		TestCases:      req.TestCases,
		Compare:        req.Compare,
		FloatTolerance: req.FloatTolerance,
		Entrypoint:     req.Entrypoint,
		// Zero: the server's max_response_bytes (NewExecutor).
		MaxResponseBytes: req.MaxResponseBytes,
	}
	if req.TimeoutAuto {
		// A session's timeout, filled in where the request gave none, gives
		// way to "auto" too.
		x.AutoTimeout, x.Limits.WallTime = true, 0
	}
	if req.InputData != "" {
		x.Stdin = strings.NewReader(req.InputData)
		if req.InputDataEncoding == "base64" {
			data, _ := base64.StdEncoding.DecodeString(req.InputData) // checked in check()
			x.Stdin = bytes.NewReader(data)
		}
	}
	names := make([]string, 0, len(req.Files))
	for name := range req.Files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		x.Files = append(x.Files, sandbox.File{Path: name, Data: req.Files[name]})
	}
	return x
}

// checkContentType accepts application/json with or without parameters.
func checkContentType(r *http.Request) error {
	if ce := r.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		return &requestError{http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Encoding %q: send the JSON uncompressed", ce)}
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return nil // curl -d sends form encoding by default; be lenient with none
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return &requestError{http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Type %q: send application/json", ct)}
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return &requestError{http.StatusUnsupportedMediaType, fmt.Sprintf("charset %q: send UTF-8", cs)}
	}
	return nil
}

// marshalJSON encodes v as the API sends it: compact, ending in a newline,
// with <, > and & left as they are (programs' output is not HTML).
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := marshalJSON(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = fmt.Appendf(nil, "{\"error\":%q}\n", "encode response: "+err.Error())
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// writeResult answers with a result, streamed: its large outputs are
// never built into one buffer (executor.Result.WriteJSON).
func writeResult(w http.ResponseWriter, status int, res *executor.Result) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	out := bufio.NewWriterSize(w, 64<<10)
	if res.WriteJSON(out, false) == nil {
		out.Flush()
	}
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, ErrorResponse{Error: msg})
}

// refuseAuth answers a request that authentication refused, with a Bearer
// challenge when the key is missing or wrong (401).
func refuseAuth(w http.ResponseWriter, status int, msg string) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sandbox-run"`)
	}
	writeError(w, status, msg)
}

func retryAfter(w http.ResponseWriter, d time.Duration) {
	w.Header().Set("Retry-After", fmt.Sprint(max(1, int(math.Ceil(d.Seconds())))))
}
