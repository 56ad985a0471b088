package api

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCompileCacheSharedConfig: compile_cache_shared is off unless the
// file or SANDBOX_RUN_COMPILE_CACHE_SHARED turns it on (the variable wins).
func TestCompileCacheSharedConfig(t *testing.T) {
	noEnv := func(string) string { return "" }
	envOf := func(v string) func(string) string {
		return func(k string) string {
			if k == "SANDBOX_RUN_COMPILE_CACHE_SHARED" {
				return v
			}
			return ""
		}
	}
	if cfg, err := LoadConfig("", noEnv); err != nil || cfg.CompileCacheShared {
		t.Errorf("default: shared %v, %v", cfg.CompileCacheShared, err)
	}
	file := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(file, []byte("compile_cache_shared: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if cfg, err := LoadConfig(file, noEnv); err != nil || !cfg.CompileCacheShared {
		t.Errorf("file: shared %v, %v", cfg.CompileCacheShared, err)
	}
	if cfg, err := LoadConfig(file, envOf("false")); err != nil || cfg.CompileCacheShared {
		t.Errorf("file and variable false: shared %v, %v", cfg.CompileCacheShared, err)
	}
	if cfg, err := LoadConfig("", envOf("true")); err != nil || !cfg.CompileCacheShared {
		t.Errorf("variable: shared %v, %v", cfg.CompileCacheShared, err)
	}
	if _, err := LoadConfig("", envOf("maybe")); err == nil {
		t.Errorf("SANDBOX_RUN_COMPILE_CACHE_SHARED=maybe accepted")
	}
}
