package api

import (
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// The API's request and answer types live in pkg/wire, which clients
// import without the server.
type (
	ExecuteRequest  = wire.ExecuteRequest
	ErrorResponse   = wire.ErrorResponse
	LanguageInfo    = wire.LanguageInfo
	LanguageVersion = wire.LanguageVersion
	LimitSet        = wire.LimitSet
	Limits          = wire.Limits
	JobStatus       = wire.JobStatus
	CallbackStatus  = wire.CallbackStatus
	SessionLimits   = wire.SessionLimits
	SessionRequest  = wire.SessionRequest
	SessionInfo     = wire.SessionInfo
	NetworkRequest  = wire.NetworkRequest
	FileInfo        = wire.FileInfo
	Event           = wire.Event
	StreamError     = wire.StreamError
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

// The configuration lives in pkg/config; these names keep the API's.
type (
	Config = config.Config
	APIKey = config.APIKey
)

// Scopes a key can have.
const (
	ScopeExecute = config.ScopeExecute
	ScopeAdmin   = config.ScopeAdmin
)

// DefaultConfig is config.Default.
func DefaultConfig() Config { return config.Default() }

// LoadConfig is config.Load.
func LoadConfig(path string, env func(string) string) (Config, error) { return config.Load(path, env) }

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
