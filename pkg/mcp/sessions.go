package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Sessions are the HTTP API's mechanism: executions with the same
// SessionID share a /work the executor keeps under <DataDir>/sessions/<id>.
// This table says which sessions exist, whose they are, their language and
// default limits. Over stdio they last as long as the process; over HTTP
// they end after cfg.SessionIdleSeconds without a call, and belong to the
// API key that created them.

type session struct {
	id, owner, language string
	limits              Limits
	lastUsed            time.Time
	running             int // calls using the session now
}

type sessionTable struct {
	idle time.Duration // 0: sessions never expire

	mu sync.Mutex
	m  map[string]*session
}

func newSessionTable(idle time.Duration) *sessionTable {
	return &sessionTable{idle: idle, m: map[string]*session{}}
}

func unknownSession(id string) error {
	return fmt.Errorf("unknown session %q: create one with create_session (sessions end with close_session, when idle too long, or with the server)", id)
}

// add creates a session unless owner has max already.
func (t *sessionTable) add(id, owner, language string, limits Limits, max int) (session, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, s := range t.m {
		if s.owner == owner {
			n++
		}
	}
	if max > 0 && n >= max {
		return session{}, fmt.Errorf("%d sessions are open already (at most %d): close one with close_session", n, max)
	}
	s := &session{id: id, owner: owner, language: language, limits: limits, lastUsed: time.Now()}
	t.m[id] = s
	return *s, nil
}

// use finds owner's session id and marks it in use until done is called.
func (t *sessionTable) use(id, owner string) (session, func(), error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.m[id]
	if s == nil || s.owner != owner {
		return session{}, nil, unknownSession(id)
	}
	s.running++
	s.lastUsed = time.Now()
	var once sync.Once
	return *s, func() {
		once.Do(func() {
			t.mu.Lock()
			s.running--
			s.lastUsed = time.Now()
			t.mu.Unlock()
		})
	}, nil
}

// remove forgets owner's session id; false when there is none.
func (t *sessionTable) remove(id, owner string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.m[id]
	if s == nil || s.owner != owner {
		return false
	}
	delete(t.m, id)
	return true
}

// expire forgets the sessions idle for longer than t.idle and returns
// their ids.
func (t *sessionTable) expire(now time.Time) []string {
	if t.idle <= 0 {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var ids []string
	for id, s := range t.m {
		if s.running == 0 && now.Sub(s.lastUsed) > t.idle {
			delete(t.m, id)
			ids = append(ids, id)
		}
	}
	return ids
}

// removeAll forgets every session and returns their ids.
func (t *sessionTable) removeAll() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ids []string
	for id := range t.m {
		ids = append(ids, id)
	}
	clear(t.m)
	return ids
}

// ownerOf is who a call's sessions belong to: over HTTP, the API key (its
// SHA-256; the route has checked it), and "" over stdio or without keys.
func ownerOf(req *sdk.CallToolRequest) string {
	if req == nil || req.Extra == nil || req.Extra.Header == nil {
		return ""
	}
	token, ok := strings.CutPrefix(req.Extra.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}
