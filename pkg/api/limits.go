package api

import (
	"errors"
	"net/http"
	"strings"

	"github.com/sandbox-run/sandbox-run/pkg/runner"
)

// bearer is the API key a request carries: Authorization: Bearer <key>, or
// (Judge0's clients) X-Auth-Token: <key>.
func bearer(r *http.Request) string {
	if a := r.Header.Get("Authorization"); a != "" {
		token, _ := strings.CutPrefix(a, "Bearer ")
		if token == a {
			return ""
		}
		return token
	}
	if t := r.Header.Get("X-Auth-Token"); t != "" {
		return t
	}
	return r.Header.Get("X-API-Key") // E2B's SDKs send theirs so
}

// callerOf is who sent r, as the run service's door takes it: key (nil
// without keys), origin, host and the body's headers.
func callerOf(r *http.Request, key *runner.Key) runner.Caller {
	return runner.Caller{Key: key, Web: true, Origin: r.Header.Get("Origin"), Host: r.Host,
		Body:        r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodDelete,
		ContentType: r.Header.Get("Content-Type"), ContentEncoding: r.Header.Get("Content-Encoding")}
}

// authenticate finds r's key for scope: status 401 or 403 with a message
// when r may not go on.
func (s *Server) authenticate(r *http.Request, scope string) (*runner.Key, int, string) {
	if f, ok := forwardedOf(r); ok {
		return s.authenticateForwarded(f, scope)
	}
	key, err := s.keys.Authenticate(bearer(r), scope)
	var e *runner.Error
	switch {
	case err == nil:
		return key, 0, ""
	case errors.As(err, &e) && e.Kind == runner.Forbidden:
		return nil, http.StatusForbidden, e.Msg
	default:
		return nil, http.StatusUnauthorized, err.Error()
	}
}
