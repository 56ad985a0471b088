package runner

import (
	"sync"

	"github.com/sandbox-run/sandbox-run/pkg/config"
)

// ForwardedKeys are the keys of callers another node authenticated and
// forwarded here (a cluster's API node, over a channel it signed): each is
// the one Key for its id from its first forwarded call on, so that its
// rate and concurrency count across calls. Safe for concurrent use.
type ForwardedKeys struct {
	mu   sync.Mutex
	keys map[string]*Key
}

// Key is the key k, as forwarded, checked for scope (an *Error of kind
// Forbidden when it lacks it). Its settings are the latest forwarded.
func (f *ForwardedKeys) Key(k config.APIKey, scope string) (*Key, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.keys == nil {
		f.keys = map[string]*Key{}
	}
	key := f.keys[k.ID]
	if key == nil {
		key = NewKeys([]config.APIKey{k}).keys[0]
		f.keys[k.ID] = key
	} else {
		key.mu.Lock()
		key.APIKey = k
		key.mu.Unlock()
	}
	for _, s := range k.Scopes {
		if s == scope || s == config.ScopeAdmin {
			return key, nil
		}
	}
	return nil, &Error{Kind: Forbidden, Msg: "key " + k.ID + " lacks the " + scope + " scope"}
}
