// Package sessions keeps what a server knows of its sessions: who owns
// each (the API key's id; "" for a keyless server or stdio), its language,
// idle timeout and default limits, and when it was last used. The files of
// a session's /work are the executor's (<DataDir>/sessions/<id>); this
// package only says which sessions exist and whose they are.
//
// A Store with a directory keeps each session in <dir>/<id>.json, so that
// sessions survive a restart; without one (MCP over stdio) they live as
// long as the process. It knows nothing of HTTP: the run service
// (pkg/runner) uses it for every transport.
package sessions

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/lib/records"
	"github.com/sandbox-run/sandbox-run/pkg/wire"
)

// The errors of a session's files (the executor's, or a cluster's).
var (
	// ErrNoSession: no session has the id where one must exist.
	ErrNoSession = errors.New("no such session")
	// ErrBusy: an execution of the session is running.
	ErrBusy = errors.New("an execution of the session is running")
)

// Session is a session's metadata, as kept on disk.
type Session struct {
	ID       string `json:"id"`
	Owner    string `json:"owner"`
	Language string `json:"language"`
	Image    string `json:"image,omitempty"` // the OCI image its runs have as their root
	// Interpreter: its runs are cells of one live interpreter.
	Interpreter bool `json:"interpreter,omitempty"`
	// Network is the allow-list of its runs' network access, if any.
	Network []string `json:"network,omitempty"`
	// Secrets are the names of the secrets its runs use (their default;
	// an interpreter's for its whole life).
	Secrets    []string           `json:"secrets,omitempty"`
	TTLSeconds float64            `json:"ttl_seconds"`
	Limits     wire.SessionLimits `json:"limits"`
	Created    time.Time          `json:"created"`
	LastUsed   time.Time          `json:"last_used"`
}

// RecordID is the session's id (records.Record).
func (s *Session) RecordID() string { return s.ID }

// Expires is when the session ends unless it is used before.
func (s *Session) Expires() time.Time {
	return s.LastUsed.Add(time.Duration(s.TTLSeconds * float64(time.Second)))
}

// IDPattern is what a session id looks like.
var IDPattern = regexp.MustCompile(`^sess_[0-9a-f]{24}$`)

// NewID is a fresh session id.
func NewID() string { return records.NewID("sess_") }

// FullError is a session refused because its owner, or the server, has as
// many as it may.
type FullError struct{ msg string }

func (e *FullError) Error() string { return e.msg }

// NewFullError is a FullError that says msg (another store's: a
// cluster's).
func NewFullError(msg string) *FullError { return &FullError{msg} }

// Store holds the sessions' metadata, in memory and (with a directory) on
// disk. It is safe for concurrent use.
type Store struct {
	dir string // "" keeps sessions in memory only
	log *slog.Logger

	mu       sync.Mutex
	sessions map[string]*Session
	// ended are sessions whose files must go, with when to stop trying:
	// an execution admitted before the end may still save them again.
	ended map[string]time.Time
	// linger is how long ended sessions are watched.
	linger time.Duration
}

// Open opens the store in dir ("" for one in memory) and loads what a
// previous run left; expired sessions are ended. linger is how long the
// files of an ended session are watched (see Sweep).
func Open(dir string, linger time.Duration, log *slog.Logger) *Store {
	st := &Store{dir: dir, log: log, sessions: map[string]*Session{}, ended: map[string]time.Time{}, linger: linger}
	if dir != "" {
		st.load()
	}
	return st
}

func (st *Store) load() {
	entries := records.ReadDir(st.dir, st.log, "sessions: cannot read their directory")
	now := time.Now()
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".meta-") {
			os.Remove(filepath.Join(st.dir, name))
			continue
		}
		id, ok := records.FileID(name, IDPattern)
		if !ok {
			continue
		}
		var s Session
		err := records.Read(st.path(id), id, &s)
		if err != nil {
			st.log.Warn("sessions: dropping damaged metadata", "session_id", id, "error", err)
		}
		if err != nil || !now.Before(s.Expires()) {
			st.ended[id] = now.Add(st.linger)
			os.Remove(st.path(id))
			continue
		}
		st.sessions[id] = &s
	}
}

func (st *Store) path(id string) string { return filepath.Join(st.dir, id+".json") }

func (st *Store) save(s Session) error {
	if st.dir == "" {
		return nil
	}
	if err := os.MkdirAll(st.dir, 0o700); err != nil {
		return err
	}
	return records.WriteJSON(st.dir, ".meta-", st.path(s.ID), s)
}

// Get returns a copy of owner's live session id.
func (st *Store) Get(id, owner string) (Session, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	s := st.sessions[id]
	if s == nil || s.Owner != owner || !time.Now().Before(s.Expires()) {
		return Session{}, false
	}
	return *s, true
}

// Touch restarts owner's session's idle timer; false when it is gone.
func (st *Store) Touch(id, owner string) (Session, bool) {
	st.mu.Lock()
	s := st.sessions[id]
	now := time.Now()
	if s == nil || s.Owner != owner || !now.Before(s.Expires()) {
		st.mu.Unlock()
		return Session{}, false
	}
	s.LastUsed = now
	cp := *s
	st.mu.Unlock()
	if err := st.save(cp); err != nil {
		st.log.Error("sessions: cannot save metadata", "session_id", id, "error", err)
	}
	return cp, true
}

// Add creates a session unless its owner has max live ones already, or
// all owners together maxAll (a *FullError).
func (st *Store) Add(s *Session, max, maxAll int) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	n, all := 0, 0
	now := time.Now()
	for _, r := range st.sessions {
		if now.Before(r.Expires()) {
			all++
			if r.Owner == s.Owner {
				n++
			}
		}
	}
	if n >= max {
		return &FullError{fmt.Sprintf("%s has %d sessions, at its limit of %d (max_sessions_per_key): delete one or let one expire", TenantName(s.Owner), n, max)}
	}
	if all >= maxAll {
		return &FullError{fmt.Sprintf("this server has %d sessions, at its limit of %d (max_sessions): retry when some have ended", all, maxAll)}
	}
	if err := st.save(*s); err != nil {
		return err
	}
	st.sessions[s.ID] = s
	return nil
}

// List returns owner's live sessions, oldest first.
func (st *Store) List(owner string) []Session {
	st.mu.Lock()
	now := time.Now()
	var out []Session
	for _, r := range st.sessions {
		if r.Owner == owner && now.Before(r.Expires()) {
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

// IDs lists every session, of every owner.
func (st *Store) IDs() []string {
	st.mu.Lock()
	defer st.mu.Unlock()
	ids := make([]string, 0, len(st.sessions))
	for id := range st.sessions {
		ids = append(ids, id)
	}
	return ids
}

// End forgets session id (if owner's, or any owner's when all) and
// removes its metadata; its files are the caller's to remove (Sweep goes
// on removing them for a while). It returns false when there was no such
// session.
func (st *Store) End(id, owner string, all bool) bool {
	st.mu.Lock()
	s := st.sessions[id]
	if s == nil || (!all && (s.Owner != owner || !time.Now().Before(s.Expires()))) {
		st.mu.Unlock()
		return false
	}
	delete(st.sessions, id)
	st.ended[id] = time.Now().Add(st.linger)
	st.mu.Unlock()
	if st.dir == "" {
		return true
	}
	if err := os.Remove(st.path(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		st.log.Error("sessions: cannot remove metadata", "session_id", id, "error", err)
	}
	return true
}

// Files is what sweeping needs of the executor: whether a session's run
// is going on, and removing a session's files unless one is.
type Files interface {
	SessionBusy(id string) bool
	TryDeleteSession(id string) error
}

// Sweep ends the sessions idle past their TTL (unless a run of one is
// going on) and removes the files of ended sessions, watching them for
// linger after the end (a run admitted before may still save them).
// busy reports whether err from TryDeleteSession means a run goes on.
func (st *Store) Sweep(x Files, busy func(error) bool, now time.Time) {
	st.mu.Lock()
	var expired []string
	for id, r := range st.sessions {
		if !now.Before(r.Expires()) {
			expired = append(expired, id)
		}
	}
	st.mu.Unlock()
	for _, id := range expired {
		if x != nil && x.SessionBusy(id) {
			continue
		}
		if st.End(id, "", true) {
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
		if err != nil && !busy(err) {
			st.log.Error("sessions: cannot remove files", "session_id", id, "error", err)
		}
		if err == nil && now.After(until) {
			st.mu.Lock()
			delete(st.ended, id)
			st.mu.Unlock()
		}
	}
}

// TenantName names an owner in messages: its key, or the one tenant of a
// server without API keys.
func TenantName(owner string) string {
	if owner == "" {
		return "this server (no API keys: one tenant)"
	}
	return "key " + owner
}
