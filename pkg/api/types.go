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
	if err := checkRequest(&req, cfg); err != nil {
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

func checkRequest(req *ExecuteRequest, cfg *Config) error {
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
func toExecutor(req *ExecuteRequest) *executor.Request {
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
