package api

// Sessions over the API: POST/GET/DELETE /api/sandbox/sessions. (Stub:
// filled in by the sessions work.)

func (s *Server) registerSessions() {}

// checkSession makes sure req's session exists and belongs to key.
func (s *Server) checkSession(req *ExecuteRequest, key *apiKey) error {
	if req.SessionID != "" {
		return badRequest("sessions are not supported yet")
	}
	return nil
}
