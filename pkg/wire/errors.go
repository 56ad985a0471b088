package wire

import (
	"errors"
	"fmt"
	"time"
)

// ErrorKind classifies why a request got no result, the one way every layer
// says it (the run service, the job store, a cluster's workers) and every
// transport maps it to its own answers, once.
type ErrorKind int

// The kinds of Error.
const (
	// KindInvalid: the request cannot run as it is (unknown language or
	// version, a limit above the maximum...). A client error.
	KindInvalid ErrorKind = iota + 1
	// KindQueueFull: every worker is busy and the queue (the server's, the
	// async one, the cluster's) is full. Retry later.
	KindQueueFull
	// KindBusy: no room to run after all (the host's sandbox slots, a
	// cluster's worker, a deadline passed waiting), or the cluster is
	// unreachable. Retry later.
	KindBusy
	// KindDraining: the server is shutting down. Retry elsewhere or later.
	KindDraining
	// KindFull: the owner or the server has no room left to keep what the
	// request would (sessions, their disk, stored results, a live
	// sandbox's disk). Retry when some have gone.
	KindFull
	// KindCanceled: the run's context ended (the client went away, or the
	// server gave up on it at shutdown) before it had a result.
	KindCanceled
	// KindInternal: the server failed.
	KindInternal
	// KindUnauthorized: no API key, or not a valid one.
	KindUnauthorized
	// KindForbidden: the key lacks the scope, or the request came from a
	// web page of another site; or what it asks of a live sandbox is not
	// the sandbox's user's to do.
	KindForbidden
	// KindUnsupported: a body that is not what the door takes (not JSON
	// from a browser, compressed).
	KindUnsupported
	// KindRateLimited: the key's rate, concurrency or async queue is used
	// up for now. Retry after Error.RetryAfter.
	KindRateLimited
	// KindUnavailable: a store (the job store, the cluster's) cannot
	// answer now. Retry later.
	KindUnavailable
	// KindNotFound: what the request names (a live sandbox, a process in
	// it) does not exist, or is another key's.
	KindNotFound
	// KindExists: what the request would make exists already (a file or
	// a directory of a live sandbox).
	KindExists
)

var kindNames = [...]string{KindInvalid: "invalid", KindQueueFull: "queue_full", KindBusy: "busy", KindDraining: "draining",
	KindFull: "full", KindCanceled: "canceled", KindInternal: "internal", KindUnauthorized: "unauthorized",
	KindForbidden: "forbidden", KindUnsupported: "unsupported", KindRateLimited: "rate_limited", KindUnavailable: "unavailable",
	KindNotFound: "not_found", KindExists: "exists"}

func (k ErrorKind) String() string {
	if k > 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// MarshalText is k's name ("invalid", "busy", ...).
func (k ErrorKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads a kind's name (an unknown one is KindInternal).
func (k *ErrorKind) UnmarshalText(b []byte) error {
	for i, n := range kindNames {
		if n != "" && n == string(b) {
			*k = ErrorKind(i)
			return nil
		}
	}
	if string(b) == "deadline" { // what a cluster's workers called a run that waited too long
		*k = KindBusy
		return nil
	}
	*k = KindInternal
	return nil
}

// Retryable says whether the same request may succeed later, soon.
func (k ErrorKind) Retryable() bool { return k == KindQueueFull || k == KindBusy || k == KindDraining }

// Error is a request that got no result, classified once for every layer
// and transport. It travels as JSON between a cluster's nodes (kind and
// message).
type Error struct {
	Kind ErrorKind `json:"kind"`
	Msg  string    `json:"message"`
	// Err is the cause, when there is one (not sent).
	Err error `json:"-"`
	// RetryAfter, when set, is how long to wait before asking again.
	RetryAfter time.Duration `json:"-"`
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Err }

// HTTPStatus is the HTTP status that answers a request refused for k, as
// every HTTP transport gives it unless its wire format says otherwise
// (Judge0 answers an invalid request 422); 0 for no kind.
func (k ErrorKind) HTTPStatus() int {
	switch k {
	case 0:
		return 0
	case KindInvalid:
		return 400
	case KindUnauthorized:
		return 401
	case KindForbidden:
		return 403
	case KindNotFound:
		return 404
	case KindExists:
		return 409
	case KindUnsupported:
		return 415
	case KindRateLimited:
		return 429
	case KindQueueFull, KindBusy, KindDraining, KindUnavailable, KindCanceled:
		return 503
	case KindFull:
		return 507
	}
	return 500
}

// KindOf is the ErrorKind of err (0 when it is no *Error).
func KindOf(err error) ErrorKind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return 0
}

// InvalidError is a request, or a part of one (a session's path), that
// cannot be taken as it is: the client's error, in the API's words. The
// executor returns it; the run service makes it a KindInvalid Error.
type InvalidError struct{ Msg string }

func (e *InvalidError) Error() string { return e.Msg }
