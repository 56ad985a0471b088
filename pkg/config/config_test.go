package config

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFlagsOrder: the defaults, then the file, then the environment, then
// the flags the user set; flags left unset change nothing.
func TestFlagsOrder(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(file, []byte("workers: 3\nqueue: 5\ndata_dir: /from/file\nlanguages: /file/langs.yaml\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	f := NewFlags(fs, "data-dir", "workers", "queue", "languages")
	if err := fs.Parse([]string{"--config", file, "--workers", "7"}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"SANDBOX_RUN_QUEUE": "9", "SANDBOX_RUN_DATA_DIR": "/from/env"}
	cfg, err := f.Load(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Workers != 7 || cfg.Queue != 9 || cfg.DataDir != "/from/env" || cfg.Languages != "/file/langs.yaml" || cfg.MaxFiles != Default().MaxFiles {
		t.Fatalf("workers %d (flag 7), queue %d (env 9), data dir %q (env), languages %q (file), max files %d (default)",
			cfg.Workers, cfg.Queue, cfg.DataDir, cfg.Languages, cfg.MaxFiles)
	}
	if err := cfg.ValidateLocal(); err != nil {
		t.Fatal(err)
	}
}

// TestValidateLocal: a command that listens nowhere needs no address, a
// server does; both check everything else.
func TestValidateLocal(t *testing.T) {
	cfg := Default()
	cfg.Addr = "0.0.0.0:8080"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "without API keys") {
		t.Fatalf("a keyless server on every address: %v", err)
	}
	if err := cfg.ValidateLocal(); err != nil {
		t.Fatalf("the same config for a local command: %v", err)
	}
	cfg.Workers = 0
	if err := cfg.ValidateLocal(); err == nil {
		t.Fatal("workers 0 accepted")
	}
}

// TestFlagsUnknown: a flag name the package does not have is a programming
// error, caught at once.
func TestFlagsUnknown(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for an unknown flag")
		}
	}()
	NewFlags(flag.NewFlagSet("t", flag.ContinueOnError), "no-such-setting")
}

func hashHex(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLoadEnv: every SANDBOX_RUN_* variable lands in its field; a bad
// number or an empty key is refused.
func TestLoadEnv(t *testing.T) {
	cfg, err := Load("", envOf(map[string]string{
		"SANDBOX_RUN_ADDR": "127.0.0.1:9", "SANDBOX_RUN_DATA_DIR": "/d", "SANDBOX_RUN_LANGUAGES": "/l.yaml",
		"SANDBOX_RUN_LOG_LEVEL": "debug", "SANDBOX_RUN_CALLBACK_SECRET": "0123456789abcdef", "SANDBOX_RUN_CGROUP_PARENT": "p",
		"SANDBOX_RUN_WORKERS": "3", "SANDBOX_RUN_QUEUE": "4", "SANDBOX_RUN_POOL_SIZE": "5", "SANDBOX_RUN_PREWARM": "0",
		"SANDBOX_RUN_MAX_RESPONSE_BYTES": "1048576", "SANDBOX_RUN_COMPILE_CACHE_BYTES": "-1", "SANDBOX_RUN_COMPILE_CACHE_SHARED": "true",
		"SANDBOX_RUN_API_KEYS": "a=k1,k2", "SANDBOX_RUN_ADMIN_KEYS": "ops=k3",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Addr != "127.0.0.1:9" || cfg.DataDir != "/d" || cfg.Languages != "/l.yaml" || cfg.LogLevel != "debug" ||
		cfg.CallbackSecret != "0123456789abcdef" || cfg.CgroupParent != "p" || cfg.Workers != 3 || cfg.Queue != 4 ||
		cfg.PoolSize != 5 || cfg.Prewarm != 0 || cfg.MaxResponseBytes != 1<<20 || cfg.CompileCacheBytes != -1 || !cfg.CompileCacheShared {
		t.Fatalf("config %+v", cfg)
	}
	if len(cfg.Keys) != 3 || cfg.Keys[1].ID != ScopeExecute+"-key-2" || cfg.Keys[2].Scopes[1] != ScopeAdmin {
		t.Fatalf("keys %+v", cfg.Keys)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, env := range []map[string]string{
		{"SANDBOX_RUN_WORKERS": "many"}, {"SANDBOX_RUN_QUEUE": "x"}, {"SANDBOX_RUN_POOL_SIZE": "x"}, {"SANDBOX_RUN_PREWARM": "x"},
		{"SANDBOX_RUN_MAX_RESPONSE_BYTES": "x"}, {"SANDBOX_RUN_COMPILE_CACHE_BYTES": "x"}, {"SANDBOX_RUN_COMPILE_CACHE_SHARED": "maybe"},
		{"SANDBOX_RUN_API_KEYS": "a="},
	} {
		if _, err := Load("", envOf(env)); err == nil {
			t.Errorf("%v accepted", env)
		}
	}
}

// TestValidateStorage: the stores' settings must make sense together.
func TestValidateStorage(t *testing.T) {
	for name, change := range map[string]func(c *Config){
		"max_file_bytes":     func(c *Config) { c.MaxFileBytes = 0 },
		"file_quota":         func(c *Config) { c.FileQuotaBytes = c.MaxFileBytes - 1 },
		"file_ttl":           func(c *Config) { c.FileTTLSeconds = 0 },
		"session_idle":       func(c *Config) { c.SessionIdleSeconds = -1 },
		"session_ttl":        func(c *Config) { c.SessionMaxTTLSeconds = 1 },
		"session_bytes":      func(c *Config) { c.SessionMaxBytes = 0 },
		"sessions_per_key":   func(c *Config) { c.MaxSessionsPerKey = 0 },
		"file_count":         func(c *Config) { c.FileQuotaFiles = 0 },
		"file_bytes_per_key": func(c *Config) { c.FileQuotaBytesPerKey = 1 },
		"session_quota":      func(c *Config) { c.SessionQuotaBytesPerKey = 0 },
		"sessions":           func(c *Config) { c.MaxSessions = 0 },
		"async_per_key":      func(c *Config) { c.AsyncQueuePerKey = 0 },
		"result_bytes":       func(c *Config) { c.MaxResultBytes = 1 },
		"result_quota":       func(c *Config) { c.ResultQuotaBytes = c.MaxResultBytes - 1 },
		"async_queue":        func(c *Config) { c.AsyncQueue = -1 },
		"wait":               func(c *Config) { c.MaxWaitSeconds = math.Inf(1) },
		"result_ttl":         func(c *Config) { c.ResultTTLSeconds = 0 },
		"callback_secret":    func(c *Config) { c.CallbackSecret = "short" },
		"callback_allow":     func(c *Config) { c.CallbackAllow = []string{"not an address"} },
		"max_response_bytes": func(c *Config) { c.MaxResponseBytes = 1 },
		"prewarm":            func(c *Config) { c.Prewarm = -1 },
	} {
		cfg := Default()
		change(&cfg)
		if err := cfg.ValidateLocal(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if p, err := ParseAllowList([]string{"10.0.0.0/8", " 192.168.1.7 ", "::ffff:10.1.2.3"}); err != nil || len(p) != 3 || p[1].Bits() != 32 {
		t.Errorf("ParseAllowList: %v %v", p, err)
	}
}

func TestConfigValidate(t *testing.T) {
	key := []APIKey{{ID: "a", Key: "k"}}
	tests := []struct {
		name   string
		change func(c *Config)
		err    string // "" means valid
	}{
		{"default", func(c *Config) {}, ""},
		{"loopback_v6", func(c *Config) { c.Addr = "[::1]:8080" }, ""},
		{"localhost", func(c *Config) { c.Addr = "localhost:8080" }, ""},
		{"loopback_other", func(c *Config) { c.Addr = "127.1.2.3:80" }, ""},
		{"all_interfaces_without_keys", func(c *Config) { c.Addr = "0.0.0.0:8080" }, "refusing to serve 0.0.0.0:8080 without API keys"},
		{"empty_host_without_keys", func(c *Config) { c.Addr = ":8080" }, "without API keys"},
		{"public_ip_without_keys", func(c *Config) { c.Addr = "192.0.2.1:8080" }, "without API keys"},
		{"hostname_without_keys", func(c *Config) { c.Addr = "example.com:8080" }, "without API keys"},
		{"all_interfaces_with_keys", func(c *Config) { c.Addr = "0.0.0.0:8080"; c.Keys = key }, ""},
		{"no_port", func(c *Config) { c.Addr = "127.0.0.1" }, "addr"},
		{"no_workers", func(c *Config) { c.Workers = 0 }, "workers"},
		{"negative_queue", func(c *Config) { c.Queue = -1 }, "queue"},
		{"zero_queue", func(c *Config) { c.Queue = 0 }, ""},
		{"tiny_body", func(c *Config) { c.MaxBodyBytes = 100 }, "max_body_bytes"},
		{"log_level", func(c *Config) { c.LogLevel = "trace" }, "log_level"},
		{"debug", func(c *Config) { c.LogLevel = "debug" }, ""},
		{"key_without_id", func(c *Config) { c.Keys = []APIKey{{Key: "k"}} }, "unique id"},
		{"duplicate_ids", func(c *Config) { c.Keys = []APIKey{{ID: "a", Key: "k"}, {ID: "a", Key: "l"}} }, "unique id"},
		{"key_without_secret", func(c *Config) { c.Keys = []APIKey{{ID: "a"}} }, "give sha256"},
		{"short_sha256", func(c *Config) { c.Keys = []APIKey{{ID: "a", SHA256: "abcd"}} }, "64 hex digits"},
		{"non_hex_sha256", func(c *Config) { c.Keys = []APIKey{{ID: "a", SHA256: strings.Repeat("zz", 32)}} }, "64 hex digits"},
		{"unknown_scope", func(c *Config) { c.Keys = []APIKey{{ID: "a", Key: "k", Scopes: []string{"root"}}} }, `unknown scope "root"`},
		{"default_timeout_above_max", func(c *Config) { c.Defaults.TimeoutSeconds = 301 }, "default limit is above its maximum"},
		{"default_memory_above_max", func(c *Config) { c.Defaults.MemoryMB = 8192 }, "default limit is above its maximum"},
		{"default_output_above_max", func(c *Config) { c.Maximums.OutputBytes = 1 }, "default limit is above its maximum"},
		{"default_processes_above_max", func(c *Config) { c.Defaults.Processes = 1000 }, "default limit is above its maximum"},
		{"default_compile_above_max", func(c *Config) { c.Maximums.CompileTimeoutSeconds = 10 }, "default limit is above its maximum"},
		{"negative_default", func(c *Config) { c.Defaults.TimeoutSeconds = -1 }, "not negative"},
		{"negative_default_memory", func(c *Config) { c.Defaults.MemoryMB = -1 }, "not negative"},
		{"negative_maximum_cpu", func(c *Config) { c.Maximums.CPUTimeSeconds = -1 }, "not negative"},
		{"nan_default", func(c *Config) { c.Defaults.CPUTimeSeconds = math.NaN() }, "finite"},
		{"infinite_maximum", func(c *Config) { c.Maximums.TimeoutSeconds = math.Inf(1) }, "finite"},
		{"network_allow", func(c *Config) {
			c.Network.Allow = []string{"pypi.org:443", "*.pythonhosted.org", "203.0.113.0/24:8080", "host.sandbox.internal:11434"}
		}, ""},
		{"network_allow_bad_entry", func(c *Config) { c.Network.Allow = []string{"https://pypi.org/simple"} }, "network.allow"},
		{"network_allow_own_port", func(c *Config) { c.Addr = "127.0.0.1:8080"; c.Network.Allow = []string{"host.sandbox.internal:8080"} }, "this server's own port"},
		{"network_negative_max", func(c *Config) { c.Network.MaxBytesIn = -1 }, "network"},
		{"extra_ca_missing", func(c *Config) { c.Network.ExtraCAFile = "/nonexistent/ca.pem" }, "network.extra_ca_file"},
		{"extra_ca_not_pem", func(c *Config) { c.Network.ExtraCAFile = "/etc/hostname" }, "no PEM certificate"},
		{"judge0_network", func(c *Config) {
			c.Network.Allow = []string{"*.example.com:443", "host.sandbox.internal:9000"}
			c.Judge0 = DoorNetwork{Network: []string{"api.example.com:443"}, Secrets: []string{"TOKEN", "OTHER_1"}}
			c.Piston = DoorNetwork{Network: []string{"host.sandbox.internal:9000"}}
		}, ""},
		{"judge0_network_bad_entry", func(c *Config) {
			c.Network.Allow = []string{"*.example.com:443"}
			c.Judge0.Network = []string{"https://api.example.com"}
		}, "judge0.network"},
		{"judge0_network_beyond_allow", func(c *Config) {
			c.Network.Allow = []string{"*.example.com:443"}
			c.Judge0.Network = []string{"api.example.org:443"}
		}, "judge0.network"},
		{"piston_network_without_allow", func(c *Config) { c.Piston.Network = []string{"api.example.com:443"} }, "piston.network: the server gives no network"},
		{"judge0_secrets_without_network", func(c *Config) { c.Judge0.Secrets = []string{"TOKEN"} }, "judge0.secrets: a run uses its secrets through its network"},
		{"piston_secret_bad_name", func(c *Config) {
			c.Network.Allow = []string{"*.example.com:443"}
			c.Piston = DoorNetwork{Network: []string{"api.example.com:443"}, Secrets: []string{"NOT-A-NAME"}}
		}, `piston.secrets: "NOT-A-NAME" is no secret's name`},
		{"piston_secret_twice", func(c *Config) {
			c.Network.Allow = []string{"*.example.com:443"}
			c.Piston = DoorNetwork{Network: []string{"api.example.com:443"}, Secrets: []string{"TOKEN", "TOKEN"}}
		}, "named twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Default()
			tt.change(&cfg)
			err := cfg.Validate()
			switch {
			case tt.err == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tt.err != "" && err == nil:
				t.Errorf("Validate accepted it; want an error with %q", tt.err)
			case tt.err != "" && !strings.Contains(err.Error(), tt.err):
				t.Errorf("Validate: %v; want %q", err, tt.err)
			}
		})
	}
}

func TestConfigKeysDerived(t *testing.T) {
	cfg := Default()
	upper := strings.ToUpper(hashHex("from-file"))
	cfg.Keys = []APIKey{{ID: "env", Key: "secret"}, {ID: "file", SHA256: "sha256:" + upper, Scopes: []string{ScopeAdmin}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := cfg.Keys[0]; got.SHA256 != hashHex("secret") || len(got.Scopes) != 1 || got.Scopes[0] != ScopeExecute {
		t.Errorf("env key: sha256 %q scopes %v", got.SHA256, got.Scopes)
	}
	if got := cfg.Keys[1].SHA256; got != hashHex("from-file") {
		t.Errorf("file key sha256 %q, want lower-case hex without prefix", got)
	}
}

func TestLoadConfigFileErrors(t *testing.T) {
	tests := []struct {
		name, yaml, err string
		validate        bool // the error comes from Validate, not LoadConfig
	}{
		{"unknown_field", "workers: 2\nwokers: 3\n", "field wokers not found", false},
		{"unknown_nested_field", "defaults:\n  timeout: 5\n", "field timeout not found", false},
		{"unknown_key_field", "keys:\n  - id: a\n    secret: x\n", "field secret not found", false},
		{"wrong_type", "workers: many\n", "cannot unmarshal", false},
		{"default_above_max", "defaults:\n  timeout_seconds: 500\n", "default limit is above its maximum", true},
		{"memory_default_above_max", "maximums:\n  memory_mb: 100\n", "default limit is above its maximum", true},
		{"bad_hash", "keys:\n  - id: a\n    sha256: nothex\n", "64 hex digits", true},
		{"public_without_keys", "addr: 0.0.0.0:80\n", "without API keys", true},
		{"nan_limit", "defaults:\n  cpu_time_seconds: .nan\n", "finite", true},
		{"judge0_secrets_without_network", "judge0:\n  secrets: [TOKEN]\n", "judge0.secrets", true},
		{"piston_unknown_field", "piston:\n  allow: [x]\n", "field allow not found", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Load(writeFile(t, tt.yaml), envOf(nil))
			if tt.validate {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				err = cfg.Validate()
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("error %v, want one with %q", err, tt.err)
			}
		})
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml"), envOf(nil)); err == nil {
		t.Error("a missing file was accepted")
	}
	// An empty path reads nothing: the defaults.
	cfg, err := Load("", envOf(nil))
	if err != nil || cfg.Addr != Default().Addr || cfg.Validate() != nil {
		t.Errorf("Load(\"\"): %+v %v", cfg, err)
	}
}

// TestValidateIsolation: isolation.default and a key's isolation_min name
// a backend (native or gvisor), or nothing; IsolationRank orders them.
func TestValidateIsolation(t *testing.T) {
	cfg := Default()
	cfg.Isolation.Default = "gvisor"
	cfg.Keys = []APIKey{{ID: "k", SHA256: hashHex("secret"), Scopes: []string{ScopeExecute}, IsolationMin: "native"}}
	if err := cfg.ValidateLocal(); err != nil {
		t.Fatal(err)
	}
	cfg.Isolation.Default = "firecracker"
	if err := cfg.ValidateLocal(); err == nil || !strings.Contains(err.Error(), "isolation.default") {
		t.Errorf("an unknown default: %v", err)
	}
	cfg.Isolation.Default = ""
	cfg.Keys[0].IsolationMin = "vm"
	if err := cfg.ValidateLocal(); err == nil || !strings.Contains(err.Error(), "isolation_min") {
		t.Errorf("an unknown minimum: %v", err)
	}
	if IsolationRank("") != 0 || IsolationRank(IsolationNative) != 0 || IsolationRank(IsolationGVisor) != 1 || IsolationRank("x") != -1 {
		t.Error("IsolationRank")
	}
}
