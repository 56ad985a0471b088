package runner

import (
	"cmp"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/secrets"
)

// ConfigFrom is the service's configuration that cfg describes: its
// workers, queue, response budget, log level, maximums, sessions kept
// under <DataDir>/api-sessions, and secrets under <DataDir>/secrets
// (OpenSecrets).
func ConfigFrom(cfg config.Config) Config {
	rc := Config{Workers: cfg.Workers, Queue: cfg.Queue, MaxResponseBytes: cfg.MaxResponseBytes, LogCode: cfg.LogLevel == "debug",
		App: cfg, SessionDir: filepath.Join(cfg.DataDir, "api-sessions"), LiveDir: filepath.Join(cfg.DataDir, "live")}
	rc.Secrets, rc.SecretsErr = OpenSecrets(cfg)
	return rc
}

// OpenSecrets opens the secret store of cfg's data dir (nil without one),
// its values sealed under the server key: secrets.key of the
// configuration, else its key file [DATA_DIR/secrets.key], made on first
// start.
func OpenSecrets(cfg config.Config) (*secrets.Store, error) {
	if cfg.DataDir == "" {
		return nil, nil
	}
	key, err := secrets.LoadKey(cmp.Or(cfg.Secrets.KeyFile, filepath.Join(cfg.DataDir, "secrets.key")), cfg.Secrets.Key)
	if err != nil {
		return nil, fmt.Errorf("the secrets' key: %w", err)
	}
	return secrets.New(secrets.Dir(filepath.Join(cfg.DataDir, "secrets")), key)
}

// FromConfig is the run service cfg describes (ConfigFrom) over x (the
// backend on this host: pkg/local).
func FromConfig(cfg config.Config, x Backend, log *slog.Logger) *Service {
	return New(ConfigFrom(cfg), x, log, nil)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
