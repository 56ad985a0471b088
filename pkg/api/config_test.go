package api

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func hashHex(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestLoadConfigEnv(t *testing.T) {
	cfg, err := LoadConfig("", envOf(map[string]string{
		"SANDBOX_RUN_API_KEYS":   "a=k1, b=k2",
		"SANDBOX_RUN_ADMIN_KEYS": "ops=k3",
		"SANDBOX_RUN_ADDR":       "0.0.0.0:9000",
		"SANDBOX_RUN_WORKERS":    "3",
		"SANDBOX_RUN_QUEUE":      "7",
		"SANDBOX_RUN_LOG_LEVEL":  "debug",
		"SANDBOX_RUN_DATA_DIR":   "/tmp/x",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if cfg.Addr != "0.0.0.0:9000" || cfg.Workers != 3 || cfg.Queue != 7 || cfg.LogLevel != "debug" || cfg.DataDir != "/tmp/x" {
		t.Errorf("config %+v", cfg)
	}
	want := []struct{ id, key, scopes string }{{"a", "k1", "execute"}, {"b", "k2", "execute"}, {"ops", "k3", "execute,admin"}}
	if len(cfg.Keys) != len(want) {
		t.Fatalf("keys %+v", cfg.Keys)
	}
	for i, w := range want {
		k := cfg.Keys[i]
		if k.ID != w.id || k.Key != w.key || strings.Join(k.Scopes, ",") != w.scopes || k.SHA256 != hashHex(w.key) {
			t.Errorf("key %d: %+v, want %+v", i, k, w)
		}
	}

	// The keys work on a real server: a and b execute, only ops sees metrics.
	cfg.Workers, cfg.LogLevel = 2, "info"
	ts := startServer(t, cfg)
	for _, k := range []string{"k1", "k2", "k3"} {
		if resp, data := ts.get(t, "/api/sandbox/languages", k); resp.StatusCode != http.StatusOK {
			t.Errorf("languages with %s: %d %s", k, resp.StatusCode, data)
		}
	}
	resp, data := ts.get(t, "/metrics", "k1")
	wantError(t, resp, data, http.StatusForbidden, "key a lacks the admin scope")
	if resp, _ := ts.get(t, "/metrics", "k3"); resp.StatusCode != http.StatusOK {
		t.Errorf("metrics with the admin key: %d", resp.StatusCode)
	}
	resp, data = ts.get(t, "/api/sandbox/languages", "k4")
	wantError(t, resp, data, http.StatusUnauthorized, "invalid API key")

	// Bare keys get generated ids.
	cfg, err = LoadConfig("", envOf(map[string]string{"SANDBOX_RUN_API_KEYS": "x1,x2", "SANDBOX_RUN_ADMIN_KEYS": "y1"}))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, k := range cfg.Keys {
		ids = append(ids, k.ID)
	}
	if got := strings.Join(ids, ","); got != "execute-key-1,execute-key-2,admin-key-1" {
		t.Errorf("ids %s", got)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}

	for name, env := range map[string]map[string]string{
		"empty_key":   {"SANDBOX_RUN_API_KEYS": "a="},
		"workers":     {"SANDBOX_RUN_WORKERS": "many"},
		"queue":       {"SANDBOX_RUN_QUEUE": "1.5"},
		"admin_empty": {"SANDBOX_RUN_ADMIN_KEYS": "ops="},
	} {
		if _, err := LoadConfig("", envOf(env)); err == nil {
			t.Errorf("%s: LoadConfig accepted %v", name, env)
		}
	}
	// Duplicate ids across the two variables are refused by Validate.
	cfg, err = LoadConfig("", envOf(map[string]string{"SANDBOX_RUN_API_KEYS": "a=1", "SANDBOX_RUN_ADMIN_KEYS": "a=2"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err == nil {
		t.Error("duplicate key ids accepted")
	}
}

func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadConfigFile(t *testing.T) {
	path := writeFile(t, `
addr: 0.0.0.0:8443
workers: 2
queue: 5
max_body_bytes: 65536
defaults:
  timeout_seconds: 10
  memory_mb: 128
  processes: 32
  output_bytes: 4096
  compile_timeout_seconds: 20
maximums:
  timeout_seconds: 60
  cpu_time_seconds: 60
  memory_mb: 1024
  processes: 64
  output_bytes: 65536
  compile_timeout_seconds: 60
keys:
  - id: ci
    sha256: `+hashHex("ci-secret")+`
    rate_per_second: 5
    burst: 10
    max_concurrent: 2
  - id: ops
    sha256: sha256:`+strings.ToUpper(hashHex("ops-secret"))+`
    scopes: [admin]
`)
	cfg, err := LoadConfig(path, envOf(map[string]string{"SANDBOX_RUN_QUEUE": "9"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if cfg.Addr != "0.0.0.0:8443" || cfg.Workers != 2 || cfg.Queue != 9 || cfg.MaxBodyBytes != 65536 ||
		cfg.Defaults.TimeoutSeconds != 10 || cfg.Maximums.MemoryMB != 1024 || cfg.MaxFiles != 1000 || cfg.LogLevel != "info" {
		t.Errorf("config %+v (the environment wins over the file, defaults fill the rest)", cfg)
	}
	if k := cfg.Keys[0]; k.ID != "ci" || k.Key != "" || k.RatePerSecond != 5 || k.Burst != 10 || k.MaxConcurrent != 2 {
		t.Errorf("key %+v", k)
	}

	// The file's keys and maximums hold on a real server.
	ts := startServer(t, cfg)
	r := executeRequest(t, py("print('from file')"))
	r.key = "ci-secret"
	resp, data := ts.call(t, r)
	if resp.StatusCode != http.StatusOK || decodeResult(t, data).Stdout != "from file\n" {
		t.Errorf("execute with the file's key: %d %s", resp.StatusCode, data)
	}
	r = executeRequest(t, with(py("print(1)"), "timeout_seconds", 120))
	r.key = "ci-secret"
	resp, data = ts.call(t, r)
	wantError(t, resp, data, http.StatusBadRequest, "timeout_seconds 120 is above the maximum of 60s")
	if resp, _ := ts.get(t, "/metrics", "ops-secret"); resp.StatusCode != http.StatusOK {
		t.Errorf("metrics with the file's admin key: %d", resp.StatusCode)
	}
	resp, data = ts.get(t, "/metrics", hashHex("ops-secret")) // the hash is not the key
	wantError(t, resp, data, http.StatusUnauthorized, "invalid API key")
	resp, data = ts.get(t, "/api/sandbox/languages", "")
	wantError(t, resp, data, http.StatusUnauthorized, "missing API key")
	var langs []LanguageInfo
	resp, data = ts.get(t, "/api/sandbox/languages", "ci-secret")
	if err := json.Unmarshal(data, &langs); err != nil || len(langs) == 0 || langs[0].DefaultLimits.TimeoutSeconds != 10 {
		t.Errorf("languages with the file's defaults: %d %s", resp.StatusCode, data)
	}
}
