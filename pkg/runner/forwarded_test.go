package runner

import (
	"testing"

	"github.com/sandbox-run/sandbox-run/pkg/config"
)

// TestForwardedKeys: a forwarded key is one Key per id (its rate counts
// across calls), with the latest settings, and checked for scope.
func TestForwardedKeys(t *testing.T) {
	var f ForwardedKeys
	k := config.APIKey{ID: "a", Scopes: []string{config.ScopeExecute}, RatePerSecond: 1, Burst: 1}
	first, err := f.Key(k, config.ScopeExecute)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := first.take(1); !ok {
		t.Fatal("the first token was refused")
	}
	again, err := f.Key(k, config.ScopeExecute)
	if err != nil || again != first {
		t.Fatalf("a second call's key: %p %v, want %p", again, err, first)
	}
	if _, ok := again.take(1); ok {
		t.Error("the rate did not count across calls")
	}
	if _, err := f.Key(k, config.ScopeAdmin); KindOf(err) != Forbidden {
		t.Errorf("a key without the admin scope: %v", err)
	}
	k.Scopes = []string{config.ScopeAdmin}
	if got, err := f.Key(k, config.ScopeAdmin); err != nil || got != first {
		t.Errorf("the key with new scopes: %v", err)
	}
}
