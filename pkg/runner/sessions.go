package runner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/sessions"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// SessionFiles is the executor's session side, or nil when it keeps no
// sessions.
func (s *Service) SessionFiles() SessionExecutor {
	if s.sessionX != nil {
		return s.sessionX
	}
	x, _ := s.x.(SessionExecutor)
	return x
}

// SessionStore keeps the sessions' metadata: pkg/sessions' Store on a
// single node, pkg/cluster's Sessions on a cluster's API node.
type SessionStore interface {
	Get(id, owner string) (sessions.Session, bool)
	Touch(id, owner string) (sessions.Session, bool)
	Add(s *sessions.Session, max, maxAll int) error
	List(owner string) []sessions.Session
	IDs() []string
	End(id, owner string, all bool) bool
	Sweep(x sessions.Files, busy func(error) bool, now time.Time)
}

// Sessions is the store of the service's sessions: one for every
// transport, so a session belongs to its key whatever created it.
func (s *Service) Sessions() SessionStore { return s.sessions }

var errNoSessions = &Error{Kind: Invalid, Msg: "this server's executor does not keep sessions"}

// CreateSession makes a session for owner (an API key's id, or ""): the
// language must be installed, the idle timeout (default
// session_idle_seconds) and default limits within the server's maximums,
// and the owner and the server below their numbers of sessions (Full).
func (s *Service) CreateSession(owner string, req wire.SessionRequest) (sessions.Session, error) {
	app := &s.cfg.App
	if s.SessionFiles() == nil {
		return sessions.Session{}, errNoSessions
	}
	var lang string
	var err error
	if req.Image != "" {
		// The toolchain is looked for in the image when a run starts.
		probe := wire.ExecuteRequest{Language: req.Language, Code: "-", Image: req.Image}
		if err := Check(&probe, app); err != nil {
			return sessions.Session{}, err
		}
		if err := s.CheckLanguage(&probe); err != nil {
			return sessions.Session{}, err
		}
		l, _ := s.x.Lookup(req.Language)
		lang = l.Name
	} else if lang, err = s.installed(req.Language); err != nil {
		return sessions.Session{}, err
	}
	ttl := req.TTLSeconds
	switch {
	case ttl == 0:
		ttl = app.SessionIdleSeconds
	case !(ttl > 0) || math.IsInf(ttl, 0):
		return sessions.Session{}, invalid("ttl_seconds must be positive")
	case ttl > app.SessionMaxTTLSeconds:
		return sessions.Session{}, invalid("ttl_seconds %g is above the maximum of %gs", ttl, app.SessionMaxTTLSeconds)
	}
	if err := checkSessionLimits(req.SessionLimits, app.Maximums); err != nil {
		return sessions.Session{}, err
	}
	var network []string
	if req.Network != nil {
		if len(req.Network.Budgets) > 0 {
			return sessions.Session{}, invalid("network.budgets: a session's network takes none (give them to each run)")
		}
		probe := wire.ExecuteRequest{Language: lang, Code: "-", Network: req.Network}
		if err := checkNetwork(&probe, app); err != nil {
			return sessions.Session{}, err
		}
		network = req.Network.Allow
	}
	if len(req.Secrets) > 0 {
		probe := wire.ExecuteRequest{Language: lang, Code: "-", Network: req.Network, Secrets: req.Secrets}
		if err := s.checkSecrets(&probe, owner); err != nil {
			return sessions.Session{}, err
		}
	}
	now := time.Now()
	if l, _ := s.x.Lookup(lang); req.Interpreter && !l.Interpreter {
		return sessions.Session{}, invalid("%s has no interpreter sessions (python and javascript have)", lang)
	}
	sess := &sessions.Session{ID: sessions.NewID(), Owner: owner, Language: lang, Image: req.Image, Interpreter: req.Interpreter, TTLSeconds: ttl,
		Limits: req.SessionLimits, Network: network, Secrets: slices.Clone(req.Secrets), Created: now, LastUsed: now}
	if err := s.sessions.Add(sess, app.MaxSessionsPerKey, app.MaxSessions); err != nil {
		var full *sessions.FullError
		if errors.As(err, &full) {
			return sessions.Session{}, &Error{Kind: Full, Msg: full.Error(), Err: err}
		}
		s.log.Error("sessions: cannot create", "error", err)
		return sessions.Session{}, &Error{Kind: Internal, Msg: "saving the session: " + err.Error(), Err: err}
	}
	s.log.Info("session created", "session_id", sess.ID, "language", lang, "ttl_seconds", ttl, "key_id", owner)
	if sess.Interpreter && s.remote == nil {
		go s.warmInterpreter(*sess)
	}
	return *sess, nil
}

// warmInterpreter starts a new interpreter session's interpreter with an
// empty cell, so that its first cell finds it running.
func (s *Service) warmInterpreter(sess sessions.Session) {
	req := wire.ExecuteRequest{Language: sess.Language, Code: "None", SessionID: sess.ID}
	if s.UseSession(&req, sess.Owner) != nil {
		return
	}
	run := &Run{Request: &req, Tenant: sess.Owner, Via: "session"}
	if err := s.openSecrets(run); err != nil {
		s.log.Info("sessions: the interpreter did not start", "session_id", sess.ID, "error", err)
		return
	}
	if _, err := s.x.Execute(context.Background(), run); err != nil {
		s.log.Info("sessions: the interpreter did not start", "session_id", sess.ID, "error", err)
	}
}

// installed is the canonical name of an installed language.
func (s *Service) installed(name string) (string, error) {
	if strings.TrimSpace(name) == "" {
		return "", invalid("language is required")
	}
	l, ok := s.x.Lookup(name)
	if !ok {
		_, _, err := s.x.Resolve(name, "") // says what is installed
		return "", err
	}
	if !l.Available {
		return "", invalid("language %.100q is not available: %v", name, l.Err)
	}
	return l.Name, nil
}

func checkSessionLimits(l wire.SessionLimits, max config.LimitSet) error {
	if err := l.Within(max.Limits()); err != nil {
		return invalid("%v", err)
	}
	return nil
}

// EndSession ends owner's session id and removes its files, waiting for a
// run of it to finish; false when owner has no such session.
func (s *Service) EndSession(id, owner string) (bool, error) {
	x := s.SessionFiles()
	if x == nil || !s.sessions.End(id, owner, false) {
		return false, nil
	}
	if err := x.DeleteSession(id); err != nil && !errors.Is(err, sessions.ErrNoSession) {
		s.log.Error("sessions: cannot remove files", "session_id", id, "error", err)
		return true, &Error{Kind: Internal, Msg: "removing the session's files: " + err.Error(), Err: err}
	}
	s.log.Info("session deleted", "session_id", id, "key_id", owner)
	return true, nil
}

// EndAllSessions ends every session and removes its files (MCP over
// stdio, whose sessions last as long as the process).
func (s *Service) EndAllSessions() {
	x := s.SessionFiles()
	for _, id := range s.sessions.IDs() {
		if s.sessions.End(id, "", true) && x != nil {
			if err := x.DeleteSession(id); err != nil && !errors.Is(err, sessions.ErrNoSession) {
				s.log.Error("sessions: cannot remove files", "session_id", id, "error", err)
			}
		}
	}
}

// SweepSessions ends the sessions idle past their time and removes the
// files of ended ones.
func (s *Service) SweepSessions(now time.Time) {
	var x sessions.Files
	if sx := s.SessionFiles(); sx != nil {
		x = sx
	}
	s.sessions.Sweep(x, func(err error) bool { return errors.Is(err, sessions.ErrBusy) }, now)
}

// UseSession makes sure req's session exists and belongs to owner, is for
// req's language and within its disk cap and the owner's quota of session
// disk; it fills the limits req leaves out from the session's and
// restarts the session's idle timer. A request without a session passes.
func (s *Service) UseSession(req *wire.ExecuteRequest, owner string) error {
	if req.SessionID == "" {
		return nil
	}
	app := &s.cfg.App
	id := req.SessionID
	x := s.SessionFiles()
	if x == nil {
		return errNoSessions
	}
	st := s.sessions
	sess, ok := st.Get(id, owner)
	if !ok {
		return invalid("unknown session %q: create one with POST /api/sandbox/sessions (MCP: create_session); sessions expire when idle and are only visible to the key that created them", id)
	}
	if l, ok := s.x.Lookup(req.Language); !ok || l.Name != sess.Language {
		return invalid("session %s is for %s, not %s", id, sess.Language, req.Language)
	}
	req.Interpreter = sess.Interpreter
	switch {
	case sess.Interpreter && req.Network != nil && !slices.Equal(req.Network.Allow, sess.Network):
		return invalid("session %s's interpreter has the network access it was created with: give network when creating the session, not with a cell", id)
	case req.Network == nil && len(sess.Network) > 0:
		req.Network = &wire.NetworkRequest{Allow: sess.Network}
	}
	switch {
	case sess.Interpreter && req.Secrets != nil && !slices.Equal(req.Secrets, sess.Secrets):
		return invalid("session %s's interpreter has the secrets it was created with: give secrets when creating the session, not with a cell", id)
	case req.Secrets == nil && len(sess.Secrets) > 0:
		req.Secrets = slices.Clone(sess.Secrets)
	}
	switch {
	case req.Image == "":
		req.Image = sess.Image
	case sess.Image == "" && req.Image != "":
		return invalid("session %s runs on the server's toolchains, not in an image: create a session with \"image\"", id)
	case req.Image != sess.Image:
		return invalid("session %s runs in image %q, not %q", id, sess.Image, req.Image)
	}
	_, used, err := x.SessionFiles(id)
	if err != nil {
		return &Error{Kind: Internal, Msg: fmt.Sprintf("session %s: %v", id, err), Err: err}
	}
	if used > app.SessionMaxBytes {
		return &Error{Kind: Full, Msg: fmt.Sprintf("session %s holds %d bytes, above its cap of %d: remove files (DELETE /api/sandbox/sessions/%s/file?path=...)", id, used, app.SessionMaxBytes, id)}
	}
	// The owner's quota of session disk: what all its sessions hold.
	total := used
	for _, other := range st.List(owner) {
		if other.ID == id {
			continue
		}
		_, n, err := x.SessionFiles(other.ID)
		if err != nil {
			return &Error{Kind: Internal, Msg: fmt.Sprintf("session %s: %v", other.ID, err), Err: err}
		}
		total += n
	}
	if q := app.SessionQuotaBytesPerKey; total >= q {
		return &Error{Kind: Full, Msg: fmt.Sprintf("the sessions of %s hold %d bytes, at or above its quota of %d (session_quota_bytes_per_key): remove files or end sessions", sessions.TenantName(owner), total, q)}
	}
	if sess, ok = st.Touch(id, owner); !ok {
		return invalid("unknown session %q", id)
	}
	// The session's limits fill what the run leaves out.
	req.Limits = req.Limits.Or(sess.Limits)
	return nil
}
