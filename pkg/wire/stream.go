package wire

import "encoding/base64"

// Event is one streamed event, as sent over SSE and the WebSocket.
type Event struct {
	Type     string `json:"type"`
	Offset   int64  `json:"offset"`
	Data     string `json:"data"`
	Encoding string `json:"encoding,omitempty"`
}

// StreamError is the error that ends a stream instead of its result: the
// data of the SSE "error" event, and the fields of the WebSocket's error
// message. Status is the HTTP status the same failure answers without
// streaming (503 when the run was canceled).
type StreamError struct {
	Error       string `json:"error"`
	Status      int    `json:"status"`
	ExecutionID string `json:"execution_id,omitempty"`
}

// The endpoint's path, subprotocol and authenticating subprotocol prefix.
const (
	WSPath         = "/api/sandbox/ws"
	WSSubprotocol  = "sandbox-run.v1"
	WSBearerPrefix = "bearer."
)

// WSClientMessage is a message a client sends after the first one.
type WSClientMessage struct {
	Type     string `json:"type"` // stdin, eof, kill or resize
	Data     string `json:"data,omitempty"`
	Encoding string `json:"encoding,omitempty"` // "base64" for binary data
}

// WSServerMessage decodes any message of the server: an output Event
// (compile, stdout, stderr), the result, or an error. (The server sends
// only the fields of each kind.)
type WSServerMessage struct {
	Event
	Result      *Result `json:"result,omitempty"`
	Error       string  `json:"error,omitempty"`
	Status      int     `json:"status,omitempty"`
	ExecutionID string  `json:"execution_id,omitempty"`
}

// Bytes is the event's data as the program wrote it (Data decoded when its
// Encoding is base64).
func (ev Event) Bytes() []byte {
	if ev.Encoding == "base64" {
		if b, err := base64.StdEncoding.DecodeString(ev.Data); err == nil {
			return b
		}
	}
	return []byte(ev.Data)
}
