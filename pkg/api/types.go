package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sandbox-run/sandbox-run/pkg/runner"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// requestError is a 4xx answer with its status.
type requestError struct {
	status int
	msg    string
	retry  time.Duration // Retry-After, when set
}

func (e *requestError) Error() string { return e.msg }

func badRequest(format string, a ...any) error {
	return &requestError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, a...)}
}

// DecodeExecuteRequest reads and checks a request body: JSON only, no
// unknown fields, one value, within the configured bounds and maximums.
func DecodeExecuteRequest(r io.Reader, cfg *Config) (*ExecuteRequest, error) {
	body, err := io.ReadAll(r)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &requestError{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("request body larger than %d bytes", tooBig.Limit)}
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
	// encoding/json matched keys case-insensitively: only exact names.
	if err := wire.CheckKeys(body, &req); err != nil {
		return nil, badRequest("malformed JSON: %s", jsonProblem(err))
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
	return strings.TrimPrefix(err.Error(), "json: ") // unknown field "x"
}

// checkRequest checks a request against the server's bounds and
// maximums (runner.Check), as a 400.
func checkRequest(req *ExecuteRequest, cfg *Config) error {
	return httpError(runner.Check(req, cfg))
}

// checkContentType accepts a JSON body (runner.CheckBody), as a 415.
func checkContentType(r *http.Request) error {
	return httpError(runner.CheckBody(r.Header.Get("Content-Type"), r.Header.Get("Content-Encoding")))
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
// never built into one buffer (wire.Result.WriteJSON).
func writeResult(w http.ResponseWriter, status int, res *wire.Result) {
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
// challenge when the key is missing or wrong (401), in the shape write
// gives it (nil: the native API's).
func refuseAuth(w http.ResponseWriter, status int, msg string, write func(http.ResponseWriter, int, string)) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sandbox-run"`)
	}
	if write == nil {
		write = writeError
	}
	write(w, status, msg)
}

func retryAfter(w http.ResponseWriter, d time.Duration) {
	w.Header().Set("Retry-After", fmt.Sprint(max(1, int(math.Ceil(d.Seconds())))))
}
