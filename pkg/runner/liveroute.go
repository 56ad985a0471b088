package runner

import "net/http"

// Calls on live sandboxes, as an API node of a cluster routes them to the
// worker that holds each sandbox: every transport that offers live
// sandboxes says which of its requests are such calls (pkg/api's
// LiveRouter), and the node sends them on.

// LiveOp is what a call on live sandboxes does.
type LiveOp int

// The calls on live sandboxes.
const (
	LiveCall   LiveOp = iota // a call on one sandbox (LiveRoute.ID)
	LiveCreate               // a new sandbox
	LiveList                 // the caller's sandboxes
)

// LiveRoute is a request's call on live sandboxes.
type LiveRoute struct {
	Op LiveOp
	ID string // LiveCall's sandbox
	// Keyed: the caller's key says who calls (the API node checks it,
	// execute scope, and forwards it); else the call carries its own proof
	// (a sandbox's access token), which the worker checks.
	Keyed bool
	// Auth is the request to authenticate, when the key is not where the
	// server looks (a WebSocket's subprotocol); nil: the request.
	Auth func(*http.Request) *http.Request
	// Join joins the workers' answers to a LiveList (each a 200's body).
	Join func(bodies [][]byte) ([]byte, error)
	// Missing answers a LiveCall whose sandbox is not there, in the
	// transport's way; nil: its refusal with 404.
	Missing func(w http.ResponseWriter, msg string)
}
