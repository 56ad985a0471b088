// Package apitest serves the real API (a real executor running real
// sandboxes) on 127.0.0.1 for the tests of packages that add routes to it
// (pkg/judge0, pkg/piston), with the options (api.Mount) they give. A test binary that uses it must call
// sandbox.Init first thing in its TestMain.
package apitest

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sandbox-run/sandbox-run/pkg/api"
	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/local"
)

// Config is the default configuration with a data directory of the
// test's own (the toolchain caches shared with the other tests').
func Config(t testing.TB) config.Config {
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	home, _ := os.UserHomeDir()
	cache := filepath.Join(home, ".cache", "sandbox-run-test", "cache")
	os.MkdirAll(cache, 0o755)
	os.Symlink(cache, filepath.Join(cfg.DataDir, "cache"))
	cfg.PoolSize, cfg.Prewarm = -1, 0
	// A test's server takes its live sandboxes with it (no other server
	// comes for them): a test of the restart says otherwise.
	cfg.Live.EndOnShutdown = true
	return cfg
}

// Serve serves the API that cfg describes until the test ends and
// returns its base URL.
func Serve(t testing.TB, cfg config.Config, opts ...api.Option) string {
	t.Helper()
	url, stop := Start(t, cfg, opts...)
	t.Cleanup(stop)
	return url
}

// Start serves the API that cfg describes and returns its base URL and
// what stops it (gracefully, as at a server's shutdown; once): a test that
// restarts a server on the same data dir stops the first itself.
func Start(t testing.TB, cfg config.Config, opts ...api.Option) (url string, stop func()) {
	t.Helper()
	x, err := local.NewExecutor(cfg)
	if err != nil {
		t.Skipf("cannot sandbox here: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- api.New(cfg, local.New(x), slog.New(slog.DiscardHandler), opts...).Serve(ctx, ln) }()
	var once sync.Once
	return "http://" + ln.Addr().String(), func() {
		once.Do(func() {
			cancel()
			<-done
			if e := x.Engine(); e != nil {
				e.Close()
			}
		})
	}
}
