package api

import "github.com/sandbox-run/sandbox-run/pkg/wire"

// The API's request and answer types live in pkg/wire, which clients
// import without the server.
type (
	ExecuteRequest  = wire.ExecuteRequest
	ErrorResponse   = wire.ErrorResponse
	LanguageInfo    = wire.LanguageInfo
	LanguageVersion = wire.LanguageVersion
	LimitSet        = wire.LimitSet
	JobStatus       = wire.JobStatus
	CallbackStatus  = wire.CallbackStatus
	SessionLimits   = wire.SessionLimits
	SessionRequest  = wire.SessionRequest
	SessionInfo     = wire.SessionInfo
	FileInfo        = wire.FileInfo
	Event           = wire.Event
	WSClientMessage = wire.WSClientMessage
	WSServerMessage = wire.WSServerMessage
)

// The WebSocket endpoint's path, subprotocol and authenticating
// subprotocol prefix.
const (
	WSPath         = wire.WSPath
	WSSubprotocol  = wire.WSSubprotocol
	WSBearerPrefix = wire.WSBearerPrefix
)
