package api

import (
	"net/http"

	"github.com/sandbox-run/sandbox-run/pkg/runner"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// secretsPath is the collection of the key's secrets.
const secretsPath = "/api/sandbox/secrets"

func (s *Server) registerSecrets() {
	s.route("GET "+secretsPath, ScopeExecute, s.handleSecretList)
	s.route("PUT "+secretsPath+"/{name}", ScopeExecute, s.handleSecretPut)
	s.route("DELETE "+secretsPath+"/{name}", ScopeExecute, s.handleSecretDelete)
	s.allowOnly(secretsPath, "GET")
	s.allowOnly(secretsPath+"/{name}", "PUT", "DELETE")
}

// handleSecretPut stores the key's secret by its name: its value, the
// hosts it may be sent to, and optionally a header it goes in. The answer
// is the secret as listed: never its value.
func (s *Server) handleSecretPut(w http.ResponseWriter, r *http.Request) {
	var req wire.SecretPut
	if !s.decodeJSONBody(w, r, &req) {
		return
	}
	sec, err := s.run.PutSecret(runner.CallerOf(r.Context()), r.PathValue("name"), req)
	if err != nil {
		s.writeExecuteError(w, httpError(err), nil)
		return
	}
	writeJSON(w, http.StatusOK, sec)
}

// handleSecretList lists the key's secrets: names, hosts and headers,
// never values.
func (s *Server) handleSecretList(w http.ResponseWriter, r *http.Request) {
	list, err := s.run.ListSecrets(runner.CallerOf(r.Context()))
	if err != nil {
		s.writeExecuteError(w, httpError(err), nil)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

// handleSecretDelete deletes one of the key's secrets (404 when it has
// none by that name).
func (s *Server) handleSecretDelete(w http.ResponseWriter, r *http.Request) {
	if err := s.run.DeleteSecret(runner.CallerOf(r.Context()), r.PathValue("name")); err != nil {
		s.writeExecuteError(w, httpError(err), nil)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
