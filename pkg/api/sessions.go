package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/records"
	"github.com/sandbox-run/sandbox-run/pkg/executor"
)

// Sessions over the API: POST/GET /api/sandbox/sessions, GET/DELETE
// /api/sandbox/sessions/{session_id}, GET/DELETE
// /api/sandbox/sessions/{session_id}/file?path=... Executions with a
// session_id run in fresh sandboxes that share the session's /work (kept by
// the executor under <DataDir>/sessions/<id>); the API keeps who owns each
// session, its language, default limits and idle timer under
// <DataDir>/api-sessions/<id>.json, so sessions survive a restart.

// sessionExecutor is what sessions need of the executor beyond Executor
// (pkg/executor's *Executor has it; test fakes need not).
type sessionExecutor interface {
	DeleteSession(id string) error
	TryDeleteSession(id string) error
	SessionFiles(id string) ([]executor.SessionFile, int64, error)
	OpenSessionFile(id, path string) (*os.File, error)
	RemoveSessionFile(id, path string) error
	SessionBusy(id string) bool
}

// sessionRecord is a session's metadata as kept on disk.
type sessionRecord struct {
	ID         string        `json:"id"`
	Owner      string        `json:"owner"`
	Language   string        `json:"language"`
	TTLSeconds float64       `json:"ttl_seconds"`
	Limits     SessionLimits `json:"limits"`
	Created    time.Time     `json:"created"`
	LastUsed   time.Time     `json:"last_used"`
}

func (r *sessionRecord) RecordID() string { return r.ID }

func (r *sessionRecord) expires() time.Time { return r.LastUsed.Add(seconds(r.TTLSeconds)) }

var sessionIDPattern = regexp.MustCompile(`^sess_[0-9a-f]{24}$`)

// sessionStore holds the sessions' metadata, in memory and on disk.
type sessionStore struct {
	dir string
	log *slog.Logger

	mu       sync.Mutex
	sessions map[string]*sessionRecord
	// ended are sessions whose files must go, with when to stop trying:
	// an execution admitted before the end may still save them again.
	ended map[string]time.Time
	// linger is how long ended sessions are watched.
	linger time.Duration
}

func newSessionStore(dir string, linger time.Duration, log *slog.Logger) *sessionStore {
	st := &sessionStore{dir: dir, log: log, sessions: map[string]*sessionRecord{}, ended: map[string]time.Time{}, linger: linger}
	st.load()
	return st
}

// load reads the sessions a previous run left; expired ones are ended.
func (st *sessionStore) load() {
	entries := records.ReadDir(st.dir, st.log, "sessions: cannot read their directory")
	now := time.Now()
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".meta-") {
			os.Remove(filepath.Join(st.dir, name))
			continue
		}
		id, ok := records.FileID(name, sessionIDPattern)
		if !ok {
			continue
		}
		var rec sessionRecord
		err := records.Read(st.path(id), id, &rec)
		if err != nil {
			st.log.Warn("sessions: dropping damaged metadata", "session_id", id, "error", err)
		}
		if err != nil || !now.Before(rec.expires()) {
			st.ended[id] = now.Add(st.linger)
			os.Remove(st.path(id))
			continue
		}
		st.sessions[id] = &rec
	}
}

func (st *sessionStore) path(id string) string { return filepath.Join(st.dir, id+".json") }

func (st *sessionStore) save(rec sessionRecord) error {
	if err := os.MkdirAll(st.dir, 0o700); err != nil {
		return err
	}
	return records.WriteJSON(st.dir, ".meta-", st.path(rec.ID), rec)
}

// get returns a copy of owner's live session id.
func (st *sessionStore) get(id, owner string) (sessionRecord, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	rec := st.sessions[id]
	if rec == nil || rec.Owner != owner || !time.Now().Before(rec.expires()) {
		return sessionRecord{}, false
	}
	return *rec, true
}

// touch restarts owner's session's idle timer; false when it is gone.
func (st *sessionStore) touch(id, owner string) (sessionRecord, bool) {
	st.mu.Lock()
	rec := st.sessions[id]
	now := time.Now()
	if rec == nil || rec.Owner != owner || !now.Before(rec.expires()) {
		st.mu.Unlock()
		return sessionRecord{}, false
	}
	rec.LastUsed = now
	cp := *rec
	st.mu.Unlock()
	if err := st.save(cp); err != nil {
		st.log.Error("sessions: cannot save metadata", "session_id", id, "error", err)
	}
	return cp, true
}

// add creates a session unless owner has max live ones already, or all
// owners together maxAll.
func (st *sessionStore) add(rec *sessionRecord, max, maxAll int) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	n, all := 0, 0
	now := time.Now()
	for _, r := range st.sessions {
		if now.Before(r.expires()) {
			all++
			if r.Owner == rec.Owner {
				n++
			}
		}
	}
	if n >= max {
		return &requestError{http.StatusInsufficientStorage, fmt.Sprintf("%s has %d sessions, at its limit of %d (max_sessions_per_key): delete one or let one expire", tenantName(rec.Owner), n, max)}
	}
	if all >= maxAll {
		return &requestError{http.StatusInsufficientStorage, fmt.Sprintf("this server has %d sessions, at its limit of %d (max_sessions): retry when some have ended", all, maxAll)}
	}
	if err := st.save(*rec); err != nil {
		return err
	}
	st.sessions[rec.ID] = rec
	return nil
}

// list returns owner's live sessions, oldest first.
func (st *sessionStore) list(owner string) []sessionRecord {
	st.mu.Lock()
	now := time.Now()
	var out []sessionRecord
	for _, r := range st.sessions {
		if r.Owner == owner && now.Before(r.expires()) {
			out = append(out, *r)
		}
	}
	st.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Created.Equal(out[j].Created) {
			return out[i].Created.Before(out[j].Created)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// end forgets session id (if owner's, or any owner's when all) and
// removes its metadata; its files are the caller's to remove. It returns
// false when there was no such session.
func (st *sessionStore) end(id, owner string, all bool) bool {
	st.mu.Lock()
	rec := st.sessions[id]
	if rec == nil || (!all && (rec.Owner != owner || !time.Now().Before(rec.expires()))) {
		st.mu.Unlock()
		return false
	}
	delete(st.sessions, id)
	st.ended[id] = time.Now().Add(st.linger)
	st.mu.Unlock()
	if err := os.Remove(st.path(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		st.log.Error("sessions: cannot remove metadata", "session_id", id, "error", err)
	}
	return true
}

// sweep ends the sessions idle past their TTL (unless an execution of one
// is running) and removes the files of ended sessions.
func (st *sessionStore) sweep(x sessionExecutor, now time.Time) {
	st.mu.Lock()
	var expired []string
	for id, r := range st.sessions {
		if !now.Before(r.expires()) {
			expired = append(expired, id)
		}
	}
	st.mu.Unlock()
	for _, id := range expired {
		if x != nil && x.SessionBusy(id) {
			continue
		}
		if st.end(id, "", true) {
			st.log.Info("session expired", "session_id", id)
		}
	}
	if x == nil {
		return
	}
	st.mu.Lock()
	ended := make(map[string]time.Time, len(st.ended))
	for id, until := range st.ended {
		ended[id] = until
	}
	st.mu.Unlock()
	for id, until := range ended {
		err := x.TryDeleteSession(id)
		if err != nil && !errors.Is(err, executor.ErrSessionBusy) {
			st.log.Error("sessions: cannot remove files", "session_id", id, "error", err)
		}
		if err == nil && now.After(until) {
			st.mu.Lock()
			delete(st.ended, id)
			st.mu.Unlock()
		}
	}
}

// tenantName names an owner in messages: its key, or the one tenant of a
// server without API keys.
func tenantName(owner string) string {
	if owner == "" {
		return "this server (no API keys: one tenant)"
	}
	return "key " + owner
}

func (s *Server) sessionExecutor() (sessionExecutor, bool) {
	x, ok := s.x.(sessionExecutor)
	return x, ok
}

func (s *Server) registerSessions() {
	// An execution admitted before its session ended may still be queued
	// or running: watch ended sessions' directories that long.
	m := s.cfg.Maximums
	linger := max(10*time.Minute, seconds(m.TimeoutSeconds+m.CompileTimeoutSeconds)+5*time.Minute)
	st := newSessionStore(filepath.Join(s.cfg.DataDir, "api-sessions"), linger, s.log)
	s.sessions = st
	s.route("POST /api/sandbox/sessions", ScopeExecute, s.handleSessionCreate)
	s.route("GET /api/sandbox/sessions", ScopeExecute, s.handleSessionList)
	s.route("GET /api/sandbox/sessions/{session_id}", ScopeExecute, s.handleSessionGet)
	s.route("DELETE /api/sandbox/sessions/{session_id}", ScopeExecute, s.handleSessionDelete)
	s.route("GET /api/sandbox/sessions/{session_id}/file", ScopeExecute, s.handleSessionFile)
	s.route("DELETE /api/sandbox/sessions/{session_id}/file", ScopeExecute, s.handleSessionFileDelete)
	s.allowOnly("/api/sandbox/sessions/{session_id}", "GET", "HEAD", "DELETE")
	s.allowOnly("/api/sandbox/sessions/{session_id}/file", "GET", "HEAD", "DELETE")
	x, _ := s.sessionExecutor()
	s.janitor(seconds(s.cfg.SessionIdleSeconds), func(now time.Time) { st.sweep(x, now) })
}

func (s *Server) sessionInfo(rec sessionRecord) SessionInfo {
	return SessionInfo{SessionID: rec.ID, Language: rec.Language, TTLSeconds: rec.TTLSeconds,
		CreatedAt: rec.Created.UTC(), LastUsedAt: rec.LastUsed.UTC(), ExpiresAt: rec.expires().UTC(),
		MaxBytes: s.cfg.SessionMaxBytes, SessionLimits: rec.Limits}
}

func (s *Server) handleSessionCreate(w http.ResponseWriter, r *http.Request) {
	if err := checkContentType(r); err != nil {
		s.reject(w, err, "content_type")
		return
	}
	var req SessionRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var big *http.MaxBytesError
		if errors.As(err, &big) {
			writeError(w, http.StatusRequestEntityTooLarge, "request body larger than 65536 bytes")
			return
		}
		writeError(w, http.StatusBadRequest, "malformed JSON: "+err.Error())
		return
	}
	if _, err := dec.Token(); err != io.EOF {
		writeError(w, http.StatusBadRequest, "malformed JSON: more than one value in the body")
		return
	}
	if _, ok := s.sessionExecutor(); !ok {
		writeError(w, http.StatusBadRequest, "this server's executor does not keep sessions")
		return
	}
	lang, err := s.sessionLanguage(req.Language)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	ttl := req.TTLSeconds
	switch {
	case ttl == 0:
		ttl = s.cfg.SessionIdleSeconds
	case !(ttl > 0) || math.IsInf(ttl, 0):
		writeError(w, http.StatusBadRequest, "ttl_seconds must be positive")
		return
	case ttl > s.cfg.SessionMaxTTLSeconds:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("ttl_seconds %g is above the maximum of %gs", ttl, s.cfg.SessionMaxTTLSeconds))
		return
	}
	if err := checkSessionLimits(req.SessionLimits, s.cfg.Maximums); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	now := time.Now()
	rec := &sessionRecord{ID: records.NewID("sess_"), Owner: keyOf(r).id(), Language: lang, TTLSeconds: ttl,
		Limits: req.SessionLimits, Created: now, LastUsed: now}
	if err := s.sessions.add(rec, s.cfg.MaxSessionsPerKey, s.cfg.MaxSessions); err != nil {
		var re *requestError
		if errors.As(err, &re) {
			writeError(w, re.status, re.msg)
			return
		}
		s.log.Error("sessions: cannot create", "error", err)
		writeError(w, http.StatusInternalServerError, "saving the session: "+err.Error())
		return
	}
	s.log.Info("session created", "session_id", rec.ID, "language", lang, "ttl_seconds", ttl, "key_id", rec.Owner)
	w.Header().Set("Location", "/api/sandbox/sessions/"+rec.ID)
	writeJSON(w, http.StatusCreated, s.sessionInfo(*rec))
}

// sessionLanguage is the canonical name of an installed language.
func (s *Server) sessionLanguage(name string) (string, error) {
	if strings.TrimSpace(name) == "" {
		return "", errors.New("language is required")
	}
	reg := s.x.Registry()
	l, ok := reg.Lookup(name)
	if !ok {
		return "", fmt.Errorf("Unsupported language: '%s' (supported: %s)", name, strings.Join(reg.Names(), ", "))
	}
	if tc := reg.Toolchain(l); tc.Err != nil {
		return "", fmt.Errorf("language %q is not available: %v", name, tc.Err)
	}
	return l.Name, nil
}

func checkSessionLimits(l SessionLimits, max LimitSet) error {
	checks := []struct {
		name       string
		value, max float64
	}{
		{"timeout_seconds", l.TimeoutSeconds, max.TimeoutSeconds},
		{"cpu_time_seconds", l.CPUTimeSeconds, max.CPUTimeSeconds},
		{"max_memory_mb", float64(l.MaxMemoryMB), float64(max.MemoryMB)},
		{"max_processes", float64(l.MaxProcesses), float64(max.Processes)},
		{"max_output_bytes", float64(l.MaxOutputBytes), float64(max.OutputBytes)},
		{"compile_timeout_seconds", l.CompileTimeoutSeconds, max.CompileTimeoutSeconds},
	}
	for _, c := range checks {
		switch {
		case c.value < 0 || math.IsNaN(c.value) || math.IsInf(c.value, 0):
			return fmt.Errorf("%s must not be negative", c.name)
		case c.max > 0 && c.value > c.max:
			return fmt.Errorf("%s %g is above the maximum of %g", c.name, c.value, c.max)
		}
	}
	return nil
}

func (s *Server) handleSessionList(w http.ResponseWriter, r *http.Request) {
	out := []SessionInfo{}
	for _, rec := range s.sessions.list(keyOf(r).id()) {
		out = append(out, s.sessionInfo(rec))
	}
	writeJSON(w, http.StatusOK, map[string]any{"sessions": out})
}

// ownSession finds the request's session or answers 404.
func (s *Server) ownSession(w http.ResponseWriter, r *http.Request) (sessionRecord, sessionExecutor, bool) {
	id := r.PathValue("session_id")
	rec, ok := s.sessions.get(id, keyOf(r).id())
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
		info.Files = []executor.SessionFile{}
	}
	writeJSON(w, http.StatusOK, info)
}

func (s *Server) handleSessionDelete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("session_id")
	x, ok := s.sessionExecutor()
	if !ok || !s.sessions.end(id, keyOf(r).id(), false) {
		writeError(w, http.StatusNotFound, "no such session: "+id)
		return
	}
	// Waits for a running execution of the session to finish.
	if err := x.DeleteSession(id); err != nil && !errors.Is(err, executor.ErrNoSession) {
		s.log.Error("sessions: cannot remove files", "session_id", id, "error", err)
		writeError(w, http.StatusInternalServerError, "removing the session's files: "+err.Error())
		return
	}
	s.log.Info("session deleted", "session_id", id, "key_id", keyOf(r).id())
	w.WriteHeader(http.StatusNoContent)
}

// ownSessionFile finds the request's session and its ?path=, or answers
// 404 or 400.
func (s *Server) ownSessionFile(w http.ResponseWriter, r *http.Request) (rec sessionRecord, x sessionExecutor, path string, ok bool) {
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
		var inv *executor.InvalidRequestError
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
	var inv *executor.InvalidRequestError
	switch {
	case err == nil:
		w.WriteHeader(http.StatusNoContent)
	case errors.As(err, &inv):
		writeError(w, http.StatusBadRequest, inv.Msg)
	case errors.Is(err, executor.ErrSessionBusy):
		writeError(w, http.StatusConflict, "an execution of the session is running: retry when it is over")
	case errors.Is(err, fs.ErrNotExist):
		writeError(w, http.StatusNotFound, fmt.Sprintf("session %s has no file %q", rec.ID, p))
	default:
		s.log.Error("sessions: cannot remove a file", "session_id", rec.ID, "error", err)
		writeError(w, http.StatusInternalServerError, "removing the file: "+err.Error())
	}
}

// checkSession makes sure req's session exists and belongs to key, is for
// req's language and within its disk cap; it fills the limits req leaves
// out from the session's and restarts the session's idle timer.
func (s *Server) checkSession(req *ExecuteRequest, key *apiKey) error {
	if req.SessionID == "" {
		return nil
	}
	id := req.SessionID
	x, ok := s.sessionExecutor()
	if !ok {
		return badRequest("this server's executor does not keep sessions")
	}
	st := s.sessions
	rec, ok := st.get(id, key.id())
	if !ok {
		return badRequest("unknown session %q: create one with POST /api/sandbox/sessions; sessions expire when idle and are only visible to the key that created them", id)
	}
	if l, ok := s.x.Registry().Lookup(req.Language); !ok || l.Name != rec.Language {
		return badRequest("session %s is for %s, not %s", id, rec.Language, req.Language)
	}
	_, used, err := x.SessionFiles(id)
	if err != nil {
		return fmt.Errorf("session %s: %w", id, err)
	}
	if used > s.cfg.SessionMaxBytes {
		return &requestError{http.StatusInsufficientStorage, fmt.Sprintf("session %s holds %d bytes, above its cap of %d: remove files (DELETE /api/sandbox/sessions/%s/file?path=...)", id, used, s.cfg.SessionMaxBytes, id)}
	}
	// The key's quota of session disk: what all its sessions hold.
	total := used
	for _, other := range st.list(key.id()) {
		if other.ID == id {
			continue
		}
		_, n, err := x.SessionFiles(other.ID)
		if err != nil {
			return fmt.Errorf("session %s: %w", other.ID, err)
		}
		total += n
	}
	if q := s.cfg.SessionQuotaBytesPerKey; total >= q {
		return &requestError{http.StatusInsufficientStorage, fmt.Sprintf("the sessions of %s hold %d bytes, at or above its quota of %d (session_quota_bytes_per_key): remove files or end sessions", tenantName(key.id()), total, q)}
	}
	if rec, ok = st.touch(id, key.id()); !ok {
		return badRequest("unknown session %q", id)
	}
	l := rec.Limits
	fill := func(dst *float64, v float64) {
		if *dst == 0 {
			*dst = v
		}
	}
	fill(&req.TimeoutSeconds, l.TimeoutSeconds)
	fill(&req.CPUTimeSeconds, l.CPUTimeSeconds)
	fill(&req.CompileTimeoutSeconds, l.CompileTimeoutSeconds)
	if req.MaxMemoryMB == 0 {
		req.MaxMemoryMB = l.MaxMemoryMB
	}
	if req.MaxProcesses == 0 {
		req.MaxProcesses = l.MaxProcesses
	}
	if req.MaxOutputBytes == 0 {
		req.MaxOutputBytes = l.MaxOutputBytes
	}
	return nil
}
