package local

import (
	"context"
	"log/slog"

	"github.com/sandbox-run/sandbox-run/pkg/config"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"

	"github.com/sandbox-run/sandbox-run/pkg/executor"
)

// PrepareCaches has a server or worker fill the toolchain caches (Go's build
// cache: ~70 s of CPU the first time on a host) in the background as it
// starts, logging when one is filled, so that no request waits for it.
// The returned function stops it and waits until it has stopped.
func PrepareCaches(x *executor.Executor, enabled bool, log *slog.Logger) (stop func()) {
	x.OnCacheProgress(func(ev executor.CacheEvent) {
		switch {
		case !ev.Done:
			log.Info("preparing toolchain cache", "language", ev.Language, "dir", ev.Dir)
		case ev.Err != nil:
			log.Warn("toolchain cache failed", "language", ev.Language, "error", ev.Err, "seconds", ev.Elapsed.Seconds())
		default:
			log.Info("toolchain cache ready", "language", ev.Language, "seconds", ev.Elapsed.Seconds())
		}
	})
	if !enabled {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		x.PrepareCaches(ctx) // failures are logged as they happen
	}()
	return func() {
		cancel()
		<-done
	}
}

// FollowHost has a server or worker find the toolchains again when the
// host changes (executor.FollowHost: what is installed after it started is
// usable without a restart), logging each refresh. The returned function
// stops it and waits until it has stopped.
func FollowHost(x *executor.Executor, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := x.FollowHost(ctx, func() { log.Info("toolchains found again: the host changed") }); err != nil {
			log.Warn("not following the host: toolchains installed after the start need a restart", "error", err)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// ToolchainCacheChecks are doctor's lines on the toolchain caches (Go's
// build cache) of the host cfg describes: ready, or not prepared yet (the
// first compile waits for it; serve prepares it in the background).
func ToolchainCacheChecks(cfg config.Config) []sandbox.Check {
	_, xc := EngineConfigs(cfg)
	xc.NoEngine = true
	x, err := executor.New(xc)
	if err != nil {
		return nil // the languages check says why
	}
	var checks []sandbox.Check
	for _, st := range x.ToolchainCacheStatus() {
		name := executor.CacheName(st.Language)
		c := sandbox.Check{Name: st.Language + " cache", OK: st.State == "ready", Detail: name + " ready: " + st.Dir}
		if !c.OK {
			c.Detail = name + " not prepared yet: the first " + st.Language + " compile waits for it (serve prepares it in the background as it starts); it will be " + st.Dir
		}
		checks = append(checks, c)
	}
	return checks
}
