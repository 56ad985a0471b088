package runner

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/sandbox-run/sandbox-run/pkg/config"
)

func testKeys(keys ...config.APIKey) *Keys {
	for i := range keys {
		sum := sha256.Sum256([]byte("secret-" + keys[i].ID))
		keys[i].SHA256 = hex.EncodeToString(sum[:])
		if keys[i].Scopes == nil {
			keys[i].Scopes = []string{config.ScopeExecute}
		}
	}
	return NewKeys(keys)
}

// TestCheckCaller: on a server without keys a web page of another site can
// neither run code nor send a body that is not JSON; the server's own pages
// and clients that send no Origin can; with a key the Origin is not
// looked at (the key proves the caller), the body's type still is.
func TestCheckCaller(t *testing.T) {
	s := New(Config{}, newGate(), quiet(), nil)
	web := func(origin, ctype string) Caller {
		return Caller{Web: true, Origin: origin, Host: "127.0.0.1:8080", Body: true, ContentType: ctype}
	}
	key := testKeys(config.APIKey{ID: "k"}).keys[0]
	for _, tc := range []struct {
		name string
		c    Caller
		want Kind
	}{
		{"no origin, JSON", web("", "application/json"), 0},
		{"no origin, no content type (curl)", web("", ""), 0},
		{"same origin", web("http://127.0.0.1:8080", "application/json; charset=utf-8"), 0},
		{"same origin, https default port", Caller{Web: true, Origin: "https://sr.example", Host: "sr.example:443"}, 0},
		{"another site", web("http://evil.example", "application/json"), Forbidden},
		{"another port of loopback", web("http://127.0.0.1:9999", "application/json"), Forbidden},
		{"a sandboxed frame (null)", web("null", "application/json"), Forbidden},
		{"text/plain", web("", "text/plain"), Unsupported},
		{"a form", web("", "application/x-www-form-urlencoded"), Unsupported},
		{"multipart", web("", "multipart/form-data; boundary=x"), Unsupported},
		{"latin-1", web("", "application/json; charset=latin-1"), Unsupported},
		{"gzip", Caller{Web: true, Body: true, ContentType: "application/json", ContentEncoding: "gzip"}, Unsupported},
		{"a key from another site", Caller{Key: key, Web: true, Origin: "http://app.example", Host: "sr:8080", Body: true, ContentType: "application/json"}, 0},
		{"a key with text/plain", Caller{Key: key, Web: true, Body: true, ContentType: "text/plain"}, Unsupported},
		{"stdio", Caller{Origin: "http://evil.example", ContentType: "text/plain", Body: true}, 0},
		{"a GET from another site with a key", Caller{Key: key, Web: true, Origin: "http://evil.example"}, 0},
	} {
		err := s.CheckCaller(tc.c)
		if got := KindOf(err); got != tc.want {
			t.Errorf("%s: kind %d (%v), want %d", tc.name, got, err, tc.want)
		}
	}
}

// TestAdmitRate: a request of n runs takes n of its key's tokens, all or
// none (a Judge0 batch of 5 on a burst-6 key leaves one; on a burst-2 key
// it is refused whole and takes nothing); a refusal says when to retry;
// the key's concurrency cap holds runs, not requests that hold none.
func TestAdmitRate(t *testing.T) {
	s := New(Config{}, newGate(), quiet(), nil)
	ks := testKeys(config.APIKey{ID: "six", RatePerSecond: 0.001, Burst: 6}, config.APIKey{ID: "two", RatePerSecond: 0.001, Burst: 2},
		config.APIKey{ID: "one-at-a-time", MaxConcurrent: 1})
	six, two, one := Caller{Key: ks.keys[0]}, Caller{Key: ks.keys[1]}, Caller{Key: ks.keys[2]}
	if _, err := s.Admit(six, 5, false); err != nil {
		t.Fatalf("a batch of 5 on a burst-6 key: %v", err)
	}
	if _, err := s.Admit(six, 1, false); err != nil {
		t.Fatalf("the sixth run: %v", err)
	}
	_, err := s.Admit(six, 1, false)
	if e, ok := err.(*Error); !ok || e.Kind != RateLimited || e.RetryAfter <= 0 {
		t.Fatalf("the seventh run: %v", err)
	}
	if _, err := s.Admit(two, 5, false); KindOf(err) != RateLimited {
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
	if _, err := s.Admit(one, 1, true); KindOf(err) != RateLimited {
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
	if _, err := s.Admit(Caller{}, 1, false); KindOf(err) != Draining {
		t.Fatalf("while draining: %v", err)
	}
}

// TestAuthenticate: a key's secret finds it, a wrong or missing one is
// Unauthorized, a key without the scope Forbidden; no keys, no check.
func TestAuthenticate(t *testing.T) {
	ks := testKeys(config.APIKey{ID: "a"}, config.APIKey{ID: "adm", Scopes: []string{config.ScopeAdmin}})
	if k, err := ks.Authenticate("secret-a", config.ScopeExecute); err != nil || k.ID() != "a" {
		t.Fatalf("%v %v", k, err)
	}
	if k, err := ks.Authenticate("secret-adm", config.ScopeExecute); err != nil || k.ID() != "adm" {
		t.Fatalf("admin has every scope: %v %v", k, err)
	}
	if _, err := ks.Authenticate("secret-a", config.ScopeAdmin); KindOf(err) != Forbidden {
		t.Fatalf("scope: %v", err)
	}
	for _, tok := range []string{"", "nope"} {
		if _, err := ks.Authenticate(tok, config.ScopeExecute); KindOf(err) != Unauthorized {
			t.Fatalf("%q: %v", tok, err)
		}
	}
	if k, err := NewKeys(nil).Authenticate("", config.ScopeExecute); k != nil || err != nil {
		t.Fatalf("no keys: %v %v", k, err)
	}
}
