package e2b

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/live"
	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
)

// The Connect protocol in JSON, as envd's clients speak it: a unary call
// is a POST of a JSON message answered by one (an error: an HTTP status
// and {"code", "message"} with a Connect code); a server stream is a POST
// of one envelope answered by envelopes (a flags byte, a 4-byte big-endian
// length, JSON), the last flagged end-of-stream with {} or {"error"}.

// connectError is an error with its Connect code.
type connectError struct {
	Code string `json:"code"`
	Msg  string `json:"message"`
}

func (e *connectError) Error() string { return e.Msg }

// Connect codes and their HTTP statuses.
var connectStatus = map[string]int{
	"invalid_argument": http.StatusBadRequest, "not_found": http.StatusNotFound, "already_exists": http.StatusConflict,
	"permission_denied": http.StatusForbidden, "unauthenticated": http.StatusUnauthorized, "resource_exhausted": http.StatusTooManyRequests,
	"unavailable": http.StatusServiceUnavailable, "deadline_exceeded": http.StatusGatewayTimeout, "internal": http.StatusInternalServerError,
	"unimplemented": http.StatusNotImplemented, "failed_precondition": http.StatusBadRequest,
}

// errCode is err as a Connect error (the agent's codes are Connect's).
func errCode(err error) *connectError {
	var ce *connectError
	var le *live.Error
	switch {
	case errors.As(err, &ce):
		return ce
	case errors.As(err, &le):
		return &connectError{Code: le.Code, Msg: le.Msg}
	case errors.Is(err, live.ErrGone):
		return &connectError{Code: "unavailable", Msg: "the sandbox has ended"}
	case errors.Is(err, context.DeadlineExceeded):
		return &connectError{Code: "deadline_exceeded", Msg: err.Error()}
	}
	return &connectError{Code: "internal", Msg: err.Error()}
}

func notFound(format string, a ...any) error {
	return &connectError{Code: agent.CodeNotFound, Msg: fmt.Sprintf(format, a...)}
}

func badArg(format string, a ...any) error {
	return &connectError{Code: agent.CodeInvalid, Msg: fmt.Sprintf(format, a...)}
}

// unaryFail answers a unary call's error.
func unaryFail(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(connectError{Code: codeOf(status), Msg: msg})
}

// unary answers a unary call with fn's message or error.
func unary[Req any](w http.ResponseWriter, r *http.Request, fn func(context.Context, *Req) (any, error)) {
	var req Req
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err == nil && len(b) > 0 {
		err = json.Unmarshal(b, &req)
	}
	if err != nil {
		unaryFail(w, http.StatusBadRequest, "the message is not the JSON expected: "+err.Error())
		return
	}
	out, err := fn(r.Context(), &req)
	if err != nil {
		ce := errCode(err)
		status := connectStatus[ce.Code]
		if status == 0 {
			status = http.StatusInternalServerError
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(ce)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// stream is a server stream being answered.
type stream struct {
	w   http.ResponseWriter
	mu  sync.Mutex
	err error
}

// errStopping ends a stream when the server shuts down: what it followed
// runs on (a restarted server takes the sandbox over).
var errStopping = &connectError{Code: "unavailable", Msg: "the server is restarting: connect again (the process runs on)"}

// openStream reads a stream call's request envelope into req and starts
// the answer; ctx ends with the call's Connect-Timeout-Ms, if it has one,
// and when the server begins to shut down (stopping).
func openStream(w http.ResponseWriter, r *http.Request, stopping <-chan struct{}, req any) (*stream, context.Context, context.CancelFunc, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r.Body, hdr[:]); err != nil {
		return nil, nil, nil, badArg("a stream's request must be one Connect envelope")
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > 1<<20 {
		return nil, nil, nil, badArg("the request envelope is over 1 MiB")
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r.Body, b); err != nil {
		return nil, nil, nil, badArg("the request envelope is cut short")
	}
	if err := json.Unmarshal(b, req); err != nil {
		return nil, nil, nil, badArg("the message is not the JSON expected: %v", err)
	}
	ctx, cancel := context.WithCancel(r.Context())
	if ms, err := strconv.ParseInt(r.Header.Get("Connect-Timeout-Ms"), 10, 64); err == nil && ms > 0 {
		ctx, cancel = context.WithTimeout(r.Context(), time.Duration(ms)*time.Millisecond)
	}
	go func() {
		select {
		case <-stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	w.Header().Set("Content-Type", "application/connect+json")
	w.WriteHeader(http.StatusOK)
	return &stream{w: w}, ctx, cancel, nil
}

// failStream answers a stream call refused before it began: HTTP 200 and
// an end-of-stream frame with the error, as Connect streams do.
func failStream(w http.ResponseWriter, err error) {
	w.Header().Set("Content-Type", "application/connect+json")
	w.WriteHeader(http.StatusOK)
	s := &stream{w: w}
	s.end(err)
}

// send writes one message frame and flushes it.
func (s *stream) send(msg any) error {
	return s.frame(0, msg)
}

func (s *stream) frame(flags byte, msg any) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	var hdr [5]byte
	hdr[0] = flags
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(b)))
	if _, err := s.w.Write(append(hdr[:], b...)); err != nil {
		s.err = err
		return err
	}
	_ = http.NewResponseController(s.w).Flush()
	return nil
}

// end writes the end-of-stream frame, with err's Connect error if any.
func (s *stream) end(err error) {
	if err == nil {
		_ = s.frame(2, struct{}{})
		return
	}
	_ = s.frame(2, map[string]any{"error": errCode(err)})
}
