package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// keyring holds the API keys, by the SHA-256 of the key.
type keyring struct {
	keys []*apiKey
}

type apiKey struct {
	APIKey
	hash []byte

	mu       sync.Mutex
	tokens   float64
	last     time.Time
	inFlight atomic.Int64
}

func newKeyring(keys []APIKey) *keyring {
	kr := &keyring{}
	for _, k := range keys {
		h, _ := hex.DecodeString(k.SHA256) // checked by Config.Validate
		kr.keys = append(kr.keys, &apiKey{APIKey: k, hash: h, tokens: float64(max(k.Burst, 1)), last: time.Now()})
	}
	return kr
}

// authenticate finds the request's key. With no keys configured (loopback
// only, checked at start) every request passes. It returns a status of 401
// or 403 with a message when the request may not go on.
func (kr *keyring) authenticate(r *http.Request, scope string) (*apiKey, int, string) {
	if len(kr.keys) == 0 {
		return nil, 0, ""
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if r.Header.Get("Authorization") == "" {
		// Judge0's clients send their key as X-Auth-Token.
		token = r.Header.Get("X-Auth-Token")
		ok = token != ""
	}
	if !ok || token == "" {
		return nil, http.StatusUnauthorized, "missing API key: send Authorization: Bearer <key> (or X-Auth-Token: <key>)"
	}
	sum := sha256.Sum256([]byte(token))
	var found *apiKey
	for _, k := range kr.keys { // every key is compared, in constant time
		if subtle.ConstantTimeCompare(sum[:], k.hash) == 1 {
			found = k
		}
	}
	if found == nil {
		return nil, http.StatusUnauthorized, "invalid API key"
	}
	for _, s := range found.Scopes {
		if s == scope || s == ScopeAdmin {
			return found, 0, ""
		}
	}
	return nil, http.StatusForbidden, "key " + found.ID + " lacks the " + scope + " scope"
}

// allow takes a token from the key's bucket, or says how long to wait.
func (k *apiKey) allow() (time.Duration, bool) {
	if k.RatePerSecond <= 0 {
		return 0, true
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	now := time.Now()
	burst := float64(max(k.Burst, 1))
	k.tokens = min(burst, k.tokens+now.Sub(k.last).Seconds()*k.RatePerSecond)
	k.last = now
	if k.tokens >= 1 {
		k.tokens--
		return 0, true
	}
	return time.Duration((1 - k.tokens) / k.RatePerSecond * float64(time.Second)), false
}

// id names the key in logs and ownership records ("" when auth is off).
func (k *apiKey) id() string {
	if k == nil {
		return ""
	}
	return k.ID
}

func (k *apiKey) enter() bool {
	if k.MaxConcurrent <= 0 {
		k.inFlight.Add(1)
		return true
	}
	if k.inFlight.Add(1) > int64(k.MaxConcurrent) {
		k.inFlight.Add(-1)
		return false
	}
	return true
}

func (k *apiKey) leave() { k.inFlight.Add(-1) }
