// Package wire holds the types that travel between a client and a
// sandbox-run server, and the JSON forms they travel in: execute requests
// and results (outputs as text or base64, output files, test cases, entry
// points), streaming events and WebSocket messages, async jobs, stored
// files, sessions, languages and errors.
//
// It imports only the standard library, so that a client (pkg/client, or
// any Go program that speaks the API) links none of the server: the
// engine, the executor, the stores and the HTTP layer all use these types
// from here.
package wire
