package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strconv"

	"github.com/sandbox-run/sandbox-run/pkg/runner"
	"github.com/sandbox-run/sandbox-run/pkg/sessions"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// Sessions over the API: POST/GET /api/sandbox/sessions, GET/DELETE
// /api/sandbox/sessions/{session_id}, GET/DELETE
// /api/sandbox/sessions/{session_id}/file?path=... Executions with a
// session_id run in fresh sandboxes that share the session's /work (kept by
// the executor under <DataDir>/sessions/<id>); the API keeps who owns each
// session, its language, default limits and idle timer under
// <DataDir>/api-sessions/<id>.json, so sessions survive a restart.

// sessionExecutor is the executor's session side (runner.SessionExecutor).
type sessionExecutor = runner.SessionExecutor

func (s *Server) sessionExecutor() (sessionExecutor, bool) {
	x := s.run.SessionFiles()
	return x, x != nil
}

func (s *Server) registerSessions() {
	s.route("POST /api/sandbox/sessions", ScopeExecute, s.handleSessionCreate)
	s.route("GET /api/sandbox/sessions", ScopeExecute, s.handleSessionList)
	s.route("GET /api/sandbox/sessions/{session_id}", ScopeExecute, s.handleSessionGet)
	s.route("DELETE /api/sandbox/sessions/{session_id}", ScopeExecute, s.handleSessionDelete)
	s.route("GET /api/sandbox/sessions/{session_id}/file", ScopeExecute, s.handleSessionFile)
	s.route("DELETE /api/sandbox/sessions/{session_id}/file", ScopeExecute, s.handleSessionFileDelete)
	s.allowOnly("/api/sandbox/sessions/{session_id}", "GET", "HEAD", "DELETE")
	s.allowOnly("/api/sandbox/sessions/{session_id}/file", "GET", "HEAD", "DELETE")
	s.janitor(seconds(s.cfg.SessionIdleSeconds), s.run.SweepSessions)
}

func (s *Server) sessionInfo(rec sessions.Session) SessionInfo {
	info := SessionInfo{SessionID: rec.ID, Language: rec.Language, Image: rec.Image, Interpreter: rec.Interpreter, TTLSeconds: rec.TTLSeconds,
		CreatedAt: rec.Created.UTC(), LastUsedAt: rec.LastUsed.UTC(), ExpiresAt: rec.Expires().UTC(),
		MaxBytes: s.cfg.SessionMaxBytes, SessionLimits: rec.Limits, Secrets: rec.Secrets}
	if len(rec.Network) > 0 {
		info.Network = &NetworkRequest{Allow: rec.Network}
	}
	return info
}

func (s *Server) handleSessionCreate(w http.ResponseWriter, r *http.Request) {
	if err := checkContentType(r); err != nil {
		s.reject(w, err, "content_type")
		return
	}
	var req SessionRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
	if err != nil {
		var big *http.MaxBytesError
		if errors.As(err, &big) {
			writeError(w, http.StatusRequestEntityTooLarge, "request body larger than 65536 bytes")
			return
		}
		writeError(w, http.StatusBadRequest, "read body: "+err.Error())
		return
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "malformed JSON: "+jsonProblem(err))
		return
	}
	if _, err := dec.Token(); err != io.EOF {
		writeError(w, http.StatusBadRequest, "malformed JSON: more than one value in the body")
		return
	}
	// encoding/json matched keys case-insensitively: only exact names.
	if err := wire.CheckKeys(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "malformed JSON: "+err.Error())
		return
	}
	rec, err := s.run.CreateSession(keyOf(r).ID(), req)
	if err != nil {
		s.writeExecuteError(w, httpError(err), nil)
		return
	}
	w.Header().Set("Location", "/api/sandbox/sessions/"+rec.ID)
	writeJSON(w, http.StatusCreated, s.sessionInfo(rec))
}

func (s *Server) handleSessionList(w http.ResponseWriter, r *http.Request) {
	out := []SessionInfo{}
	for _, rec := range s.run.Sessions().List(keyOf(r).ID()) {
		out = append(out, s.sessionInfo(rec))
	}
	writeJSON(w, http.StatusOK, map[string]any{"sessions": out})
}

// ownSession finds the request's session or answers 404.
func (s *Server) ownSession(w http.ResponseWriter, r *http.Request) (sessions.Session, sessionExecutor, bool) {
	id := r.PathValue("session_id")
	rec, ok := s.run.Sessions().Get(id, keyOf(r).ID())
	x, xok := s.sessionExecutor()
	if !ok || !xok {
		writeError(w, http.StatusNotFound, "no such session: "+id)
		return rec, nil, false
	}
	return rec, x, true
}

func (s *Server) handleSessionGet(w http.ResponseWriter, r *http.Request) {
	rec, x, ok := s.ownSession(w, r)
	if !ok {
		return
	}
	files, total, err := x.SessionFiles(rec.ID)
	if err != nil {
		s.log.Error("sessions: cannot list files", "session_id", rec.ID, "error", err)
		writeError(w, http.StatusInternalServerError, "listing the session's files: "+err.Error())
		return
	}
	info := s.sessionInfo(rec)
	info.Files, info.BytesUsed = files, &total
	if info.Files == nil {
		info.Files = []wire.SessionFile{}
	}
	writeJSON(w, http.StatusOK, info)
}

func (s *Server) handleSessionDelete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("session_id")
	// Waits for a running execution of the session to finish.
	found, err := s.run.EndSession(id, keyOf(r).ID())
	switch {
	case !found:
		writeError(w, http.StatusNotFound, "no such session: "+id)
	case err != nil:
		writeError(w, http.StatusInternalServerError, err.Error())
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// ownSessionFile finds the request's session and its ?path=, or answers
// 404 or 400.
func (s *Server) ownSessionFile(w http.ResponseWriter, r *http.Request) (rec sessions.Session, x sessionExecutor, path string, ok bool) {
	if rec, x, ok = s.ownSession(w, r); !ok {
		return rec, nil, "", false
	}
	path = r.URL.Query().Get("path")
	if path == "" {
		writeError(w, http.StatusBadRequest, "give the file as ?path=, relative to /work")
		return rec, nil, "", false
	}
	return rec, x, path, true
}

func (s *Server) handleSessionFile(w http.ResponseWriter, r *http.Request) {
	rec, x, p, ok := s.ownSessionFile(w, r)
	if !ok {
		return
	}
	f, err := x.OpenSessionFile(rec.ID, p)
	if err != nil {
		var inv *wire.InvalidError
		if errors.As(err, &inv) {
			writeError(w, http.StatusBadRequest, inv.Msg)
			return
		}
		writeError(w, http.StatusNotFound, fmt.Sprintf("session %s has no file %q", rec.ID, p))
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.FormatInt(st.Size(), 10))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		io.Copy(w, io.LimitReader(f, st.Size()))
	}
}

func (s *Server) handleSessionFileDelete(w http.ResponseWriter, r *http.Request) {
	rec, x, p, ok := s.ownSessionFile(w, r)
	if !ok {
		return
	}
	err := x.RemoveSessionFile(rec.ID, p)
	var inv *wire.InvalidError
	switch {
	case err == nil:
		w.WriteHeader(http.StatusNoContent)
	case errors.As(err, &inv):
		writeError(w, http.StatusBadRequest, inv.Msg)
	case errors.Is(err, sessions.ErrBusy):
		writeError(w, http.StatusConflict, "an execution of the session is running: retry when it is over")
	case errors.Is(err, fs.ErrNotExist):
		writeError(w, http.StatusNotFound, fmt.Sprintf("session %s has no file %q", rec.ID, p))
	default:
		s.log.Error("sessions: cannot remove a file", "session_id", rec.ID, "error", err)
		writeError(w, http.StatusInternalServerError, "removing the file: "+err.Error())
	}
}
