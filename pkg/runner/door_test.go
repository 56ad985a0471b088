package runner_test

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/local"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
)

// testKeyring holds keys whose secrets are "secret-<id>".
func testKeyring(keys ...config.APIKey) *runner.Keys {
	for i := range keys {
		sum := sha256.Sum256([]byte("secret-" + keys[i].ID))
		keys[i].SHA256 = hex.EncodeToString(sum[:])
		if keys[i].Scopes == nil {
			keys[i].Scopes = []string{config.ScopeExecute}
		}
	}
	return runner.NewKeys(keys)
}

// testKeys are the keys, as their callers authenticate.
func testKeys(keys ...config.APIKey) []*runner.Key {
	kr := testKeyring(keys...)
	var out []*runner.Key
	for _, k := range keys {
		key, err := kr.Authenticate("secret-"+k.ID, config.ScopeExecute)
		if err != nil {
			panic(err)
		}
		out = append(out, key)
	}
	return out
}

// TestCheckCaller: on a server without keys a web page of another site
// cannot run code; no browser page (an Origin) may send a body that is not
// JSON; the server's own pages and clients that send no Origin (the peers'
// own clients, curl) can; with a key the Origin's site is not looked at
// (the key proves the caller), the body's type from a browser still is.
func TestCheckCaller(t *testing.T) {
	s := runner.New(runner.Config{}, local.New(newGate()), quiet(), nil)
	web := func(origin, ctype string) runner.Caller {
		return runner.Caller{Web: true, Origin: origin, Host: "127.0.0.1:8080", Body: true, ContentType: ctype}
	}
	key := testKeys(config.APIKey{ID: "k"})[0]
	for _, tc := range []struct {
		name string
		c    runner.Caller
		want runner.Kind
	}{
		{"no origin, JSON", web("", "application/json"), 0},
		{"no origin, no content type (curl)", web("", ""), 0},
		{"same origin", web("http://127.0.0.1:8080", "application/json; charset=utf-8"), 0},
		{"same origin, https default port", runner.Caller{Web: true, Origin: "https://sr.example", Host: "sr.example:443"}, 0},
		{"another site", web("http://evil.example", "application/json"), runner.Forbidden},
		{"another port of loopback", web("http://127.0.0.1:9999", "application/json"), runner.Forbidden},
		{"a sandboxed frame (null)", web("null", "application/json"), runner.Forbidden},
		{"text/plain from a client that is no browser", web("", "text/plain"), 0},
		{"text/plain from the server's own page", web("http://127.0.0.1:8080", "text/plain"), runner.Unsupported},
		{"text/plain from another site", web("http://evil.example", "text/plain"), runner.Unsupported},
		{"a form", web("http://127.0.0.1:8080", "application/x-www-form-urlencoded"), runner.Unsupported},
		{"multipart", web("http://127.0.0.1:8080", "multipart/form-data; boundary=x"), runner.Unsupported},
		{"latin-1", web("http://127.0.0.1:8080", "application/json; charset=latin-1"), runner.Unsupported},
		{"gzip", runner.Caller{Web: true, Body: true, ContentType: "application/json", ContentEncoding: "gzip"}, runner.Unsupported},
		{"a key from another site", runner.Caller{Key: key, Web: true, Origin: "http://app.example", Host: "sr:8080", Body: true, ContentType: "application/json"}, 0},
		{"a key with text/plain from a page", runner.Caller{Key: key, Web: true, Origin: "http://app.example", Body: true, ContentType: "text/plain"}, runner.Unsupported},
		{"a key with text/plain from a client", runner.Caller{Key: key, Web: true, Body: true, ContentType: "text/plain"}, 0},
		{"stdio", runner.Caller{Origin: "http://evil.example", ContentType: "text/plain", Body: true}, 0},
		{"a GET from another site with a key", runner.Caller{Key: key, Web: true, Origin: "http://evil.example"}, 0},
	} {
		err := s.CheckCaller(tc.c)
		if got := runner.KindOf(err); got != tc.want {
			t.Errorf("%s: kind %d (%v), want %d", tc.name, got, err, tc.want)
		}
	}
}

// TestAdmitRate: a request of n runs takes n of its key's tokens, all or
// none (a Judge0 batch of 5 on a burst-6 key leaves one; on a burst-2 key
// it is refused whole and takes nothing); a refusal says when to retry;
// the key's concurrency cap holds runs, not requests that hold none.
func TestAdmitRate(t *testing.T) {
	s := runner.New(runner.Config{}, local.New(newGate()), quiet(), nil)
	ks := testKeys(config.APIKey{ID: "six", RatePerSecond: 0.001, Burst: 6}, config.APIKey{ID: "two", RatePerSecond: 0.001, Burst: 2},
		config.APIKey{ID: "one-at-a-time", MaxConcurrent: 1})
	six, two, one := runner.Caller{Key: ks[0]}, runner.Caller{Key: ks[1]}, runner.Caller{Key: ks[2]}
	if _, err := s.Admit(six, 5, false); err != nil {
		t.Fatalf("a batch of 5 on a burst-6 key: %v", err)
	}
	if _, err := s.Admit(six, 1, false); err != nil {
		t.Fatalf("the sixth run: %v", err)
	}
	_, err := s.Admit(six, 1, false)
	if e, ok := err.(*runner.Error); !ok || e.Kind != runner.RateLimited || e.RetryAfter <= 0 {
		t.Fatalf("the seventh run: %v", err)
	}
	if _, err := s.Admit(two, 5, false); runner.KindOf(err) != runner.RateLimited {
		t.Fatalf("a batch of 5 on a burst-2 key: %v", err)
	}
	for i := range 2 {
		if _, err := s.Admit(two, 1, false); err != nil {
			t.Fatalf("run %d after the refused batch (it took nothing): %v", i, err)
		}
	}
	leave, err := s.Admit(one, 1, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Admit(one, 1, true); runner.KindOf(err) != runner.RateLimited {
		t.Fatalf("a second run at once over a cap of 1: %v", err)
	}
	if _, err := s.Admit(one, 1, false); err != nil {
		t.Fatalf("a submission that holds no run: %v", err)
	}
	leave()
	leave() // idempotent
	if l, err := s.Admit(one, 1, true); err != nil {
		t.Fatalf("after leave: %v", err)
	} else {
		l()
	}
	s.Drain()
	if _, err := s.Admit(runner.Caller{}, 1, false); runner.KindOf(err) != runner.Draining {
		t.Fatalf("while draining: %v", err)
	}
}

// TestAuthenticate: a key's secret finds it, a wrong or missing one is
// Unauthorized, a key without the scope Forbidden; no keys, no check.
func TestAuthenticate(t *testing.T) {
	ks := testKeyring(config.APIKey{ID: "a"}, config.APIKey{ID: "adm", Scopes: []string{config.ScopeAdmin}})
	if k, err := ks.Authenticate("secret-a", config.ScopeExecute); err != nil || k.ID() != "a" {
		t.Fatalf("%v %v", k, err)
	}
	if k, err := ks.Authenticate("secret-adm", config.ScopeExecute); err != nil || k.ID() != "adm" {
		t.Fatalf("admin has every scope: %v %v", k, err)
	}
	if _, err := ks.Authenticate("secret-a", config.ScopeAdmin); runner.KindOf(err) != runner.Forbidden {
		t.Fatalf("scope: %v", err)
	}
	for _, tok := range []string{"", "nope"} {
		if _, err := ks.Authenticate(tok, config.ScopeExecute); runner.KindOf(err) != runner.Unauthorized {
			t.Fatalf("%q: %v", tok, err)
		}
	}
	if k, err := runner.NewKeys(nil).Authenticate("", config.ScopeExecute); k != nil || err != nil {
		t.Fatalf("no keys: %v %v", k, err)
	}
}
