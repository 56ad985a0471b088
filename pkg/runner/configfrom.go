package runner

import (
	"log/slog"
	"path/filepath"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/config"
)

// ConfigFrom is the service's configuration that cfg describes: its
// workers, queue, response budget, log level, maximums, and sessions kept
// under <DataDir>/api-sessions.
func ConfigFrom(cfg config.Config) Config {
	return Config{Workers: cfg.Workers, Queue: cfg.Queue, MaxResponseBytes: cfg.MaxResponseBytes, LogCode: cfg.LogLevel == "debug",
		App: cfg, SessionDir: filepath.Join(cfg.DataDir, "api-sessions"), LiveDir: filepath.Join(cfg.DataDir, "live")}
}

// FromConfig is the run service cfg describes (ConfigFrom) over x (the
// backend on this host: pkg/local).
func FromConfig(cfg config.Config, x Backend, log *slog.Logger) *Service {
	return New(ConfigFrom(cfg), x, log, nil)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
