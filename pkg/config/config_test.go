package config

import (
	"flag"
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
