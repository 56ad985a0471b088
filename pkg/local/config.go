package local

import (
	"cmp"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/gvisor"
	"github.com/sandbox-run/sandbox-run/pkg/images"
	"github.com/sandbox-run/sandbox-run/pkg/images/layer"
	"github.com/sandbox-run/sandbox-run/pkg/images/registry"
	"github.com/sandbox-run/sandbox-run/pkg/intercept"
	"github.com/sandbox-run/sandbox-run/pkg/intercept/carry"
	"github.com/sandbox-run/sandbox-run/pkg/runner"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// EngineConfigs are the engine's and the executor's configurations that
// cfg describes (the executor's without its Engine), for a caller that
// changes something before building them (the CLI's one-shot engine).
func EngineConfigs(cfg config.Config) (sandbox.Config, executor.Config) {
	d, im := cfg.Defaults, cfg.Images
	xc := executor.Config{
		Languages: cfg.Languages, DataDir: cfg.DataDir, ToolchainCacheDir: cfg.ToolchainCacheDir,
		Defaults: executor.Limits{WallTime: seconds(d.TimeoutSeconds), CPUTime: seconds(d.CPUTimeSeconds),
			MemoryBytes: d.MemoryMB << 20, Processes: d.Processes, OutputBytes: d.OutputBytes, FileSize: d.FileSizeBytes},
		CompileDefaults:    executor.Limits{WallTime: seconds(d.CompileTimeoutSeconds)},
		CompileCacheBytes:  cfg.CompileCacheBytes,
		SharedCompileCache: cfg.CompileCacheShared,
		MaxWallTime:        seconds(cfg.Maximums.TimeoutSeconds),
		MaxResponseBytes:   cfg.MaxResponseBytes,
		ImageRegistry:      registry.Fetch,
		ImageCaps:          images.Caps{Layers: im.MaxLayers, ConfigBytes: im.MaxConfigBytes, Bytes: im.MaxBytes, StoreBytes: im.MaxStoreBytes},
		UnpackLimits:       layer.Limits{MaxBytes: im.MaxUnpackedBytes, MaxEntries: im.MaxUnpackedEntries},
		Network: executor.NetworkConfig{MaxConns: cfg.Network.MaxConnections, ExtraCAFile: cfg.Network.ExtraCAFile,
			MaxBytesOut: cmp.Or(cfg.Network.MaxBytesOut, defaultNetworkBytes), MaxBytesIn: cmp.Or(cfg.Network.MaxBytesIn, defaultNetworkBytes)},
		Intercept: Intercept,
	}
	// gVisor, where runsc is installed: runs that ask for it (or whose key
	// or server wants it) run their programs under its kernel.
	g, err := gvisor.New(gvisorConfig(cfg))
	if err == nil {
		xc.GVisor = g
	} else {
		xc.GVisorErr = err
	}
	return sandbox.Config{PoolSize: cfg.PoolSize, CgroupParent: cfg.CgroupParent}, xc
}

// Intercept makes what carries the connections of a run or live sandbox
// with secrets: pkg/intercept's proxy (executor.Config.Intercept).
func Intercept(cfg carry.Config) carry.Carrier { return intercept.New(cfg) }

// NewExecutor builds the engine and the executor cfg describes.
func NewExecutor(cfg config.Config) (*executor.Executor, error) {
	sc, xc := EngineConfigs(cfg)
	if cfg.NATS.Role == config.RoleAPI && len(cfg.NATS.URLs) > 0 {
		// A cluster's API node runs no sandboxes: languages and checks.
		xc.NoEngine = true
		return executor.New(xc)
	}
	e, err := sandbox.New(sc)
	if err != nil {
		return nil, err
	}
	xc.Engine = e
	return executor.New(xc)
}

// GVisorCheck is doctor's line on gVisor with cfg (a trial run).
func GVisorCheck(cfg config.Config) sandbox.Check {
	return gvisor.Diagnose(gvisorConfig(cfg))
}

// gvisorConfig is the gVisor runner cfg describes.
func gvisorConfig(cfg config.Config) gvisor.Config {
	pool := cfg.Isolation.GVisorPool
	if pool == 0 {
		pool = 2
	}
	return gvisor.Config{Runsc: cfg.Isolation.Runsc, Platform: cfg.Isolation.Platform,
		Dir: filepath.Join(cfg.DataDir, "gvisor"), CgroupParent: cfg.CgroupParent, Pool: max(pool, 0)}
}

// Service is the run service cfg describes (runner.ConfigFrom) over x on
// this host.
func Service(cfg config.Config, x Executor, log *slog.Logger) *runner.Service {
	return runner.FromConfig(cfg, New(x), log)
}

// defaultNetworkBytes bounds what a run with network access sends and
// receives, each way, when the configuration sets nothing.
const defaultNetworkBytes = 1 << 30

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
