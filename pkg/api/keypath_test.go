package api

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sandbox-run/sandbox-run/pkg/local"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
)

// TestKeyPath: /k/<key>/piston/... and /k/<key>/judge0/... are those
// transports' paths sent with the key, for stock clients that cannot send
// a header; the transport sees the path without the key, refusals come in
// its error shape, and neither the logs nor the metrics carry the key.
func TestKeyPath(t *testing.T) {
	t.Parallel()
	const secret = "kp-secret-0123456789"
	cfg := keyConfig(APIKey{ID: "runner", Key: secret, Scopes: []string{ScopeExecute}},
		APIKey{ID: "ops", Key: "kp-admin", Scopes: []string{ScopeAdmin}})
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	echo := func(Config, *runner.Service, *slog.Logger) http.Handler {
		return refusingEcho{}
	}
	s := New(cfg, local.New(testExec), slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Mount("/piston/", echo), Mount("/judge0/", echo))
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	defer s.run.Stop()
	get := func(path string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		json.NewDecoder(resp.Body).Decode(&v)
		return resp.StatusCode, v
	}
	for _, tr := range []string{"piston", "judge0"} {
		st, v := get("/k/" + secret + "/" + tr + "/api/v2/runtimes?x=1")
		if st != 200 || v["key"] != "runner" || v["path"] != "/"+tr+"/api/v2/runtimes" || v["query"] != "x=1" {
			t.Errorf("/k/<key>/%s: %d %v", tr, st, v)
		}
		if st, v := get("/k/wrong-key/" + tr + "/api/v2/runtimes"); st != 401 || v["message"] != "refused by the echo" {
			t.Errorf("/k/<wrong key>/%s: %d %v, want 401 in the transport's shape", tr, st, v)
		}
		if st, _ := get("/" + tr + "/api/v2/runtimes"); st != 401 {
			t.Errorf("/%s without a key: %d", tr, st)
		}
	}
	// Only those two: the native API takes its key in a header.
	for _, p := range []string{"/k/" + secret + "/api/sandbox/languages", "/k/" + secret, "/k//piston/x", "/k/" + secret + "/pistonx/"} {
		if st, _ := get(p); st != 404 {
			t.Errorf("%s: %d, want 404", p, st)
		}
	}
	req, _ := http.NewRequest("GET", hs.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer kp-admin")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), `route="/piston/"`) || strings.Contains(string(metrics), secret) {
		t.Errorf("metrics: the mount counted, the key never: %v", strings.Contains(string(metrics), secret))
	}
	logs.mu.Lock()
	logged := logs.buf.String()
	logs.mu.Unlock()
	if strings.Contains(logged, secret) {
		t.Errorf("the key is in the logs")
	}
}

// refusingEcho answers the path, query and key it got, and refuses in a
// shape of its own.
type refusingEcho struct{}

func (refusingEcho) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := runner.CallerOf(r.Context())
	id := ""
	if c.Key != nil {
		id = c.Key.ID()
	}
	writeJSON(w, http.StatusOK, map[string]any{"path": r.URL.Path, "query": r.URL.RawQuery, "key": id})
}

func (refusingEcho) Refuse(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"message": "refused by the echo"})
}
