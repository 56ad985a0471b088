package api

import "net/http"

// Async jobs: "async": true, POST /api/sandbox/executions, GET
// /api/sandbox/executions/{id}, callbacks. (Stub: filled in by the jobs work.)

func (s *Server) registerJobs() {}

func (s *Server) submitJob(w http.ResponseWriter, r *http.Request, req *ExecuteRequest, key *apiKey) {
	writeError(w, http.StatusBadRequest, "async executions are not supported yet")
}
