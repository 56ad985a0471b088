package main

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sandbox-run/sandbox-run/internal/app/cli"
	"github.com/sandbox-run/sandbox-run/pkg/executor"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// cacheProgress tells a terminal that a first compile waits for a
// toolchain cache (Go's build cache: ~45 s, once per host and Go version).
func cacheProgress(ev executor.CacheEvent) {
	what := executor.CacheName(ev.Language)
	switch {
	case !ev.Done && ev.Language == "go":
		con.Printf("sandbox-run: preparing %s (once per host and Go version, ~45 s on an idle 2-core machine)...\n", what)
	case !ev.Done:
		con.Printf("sandbox-run: preparing %s (once per host and toolchain)...\n", what)
	case ev.Err != nil:
		con.Printf("sandbox-run: preparing %s failed after %s\n", what, ev.Elapsed.Round(100*time.Millisecond))
	default:
		con.Printf("sandbox-run: %s ready in %s (%s)\n", what, ev.Elapsed.Round(100*time.Millisecond), ev.Dir)
	}
}

// decisions is what --verbose prints: what the sandbox decided and why the
// run ended, then the metrics. A remote result carries no trace: the
// server's limits and mounts are not known here.
func decisions(res *executor.Result, tr *executor.Trace, f *executeFlags) string {
	var b strings.Builder
	line := func(format string, a ...any) { fmt.Fprintf(&b, "sandbox-run: "+format+"\n", a...) }
	if tr != nil {
		line("toolchain: %s %s (%s)", res.Language, res.Version, tr.Toolchain)
		line("run limits: %s", limitsText(tr.RunLimits))
		if tr.CompileLimits != nil {
			line("compile limits: %s", limitsText(*tr.CompileLimits))
		}
		var mounts []string
		for _, m := range tr.Mounts {
			t := m.Source
			if m.Target != "" && m.Target != m.Source {
				t += ":" + m.Target
			}
			mounts = append(mounts, t)
		}
		line("image: a tmpfs root with read-only mounts of %s; /work and /tmp fresh tmpfs", strings.Join(mounts, ", "))
		line("sandbox: built for this command (a one-shot run keeps no warm pool; `serve` reuses clean sandboxes)")
		if tr.CompileCacheDir != "" {
			line("toolchain cache: %s (a private copy-on-write overlay for the compile)", tr.CompileCacheDir)
		}
	} else {
		line("toolchain: %s %s (on the server %s; its limits and mounts apply)", res.Language, res.Version, f.server)
	}
	if c := res.Compile; c != nil {
		if c.CacheHit {
			line("compile: cache hit (no compiler ran; output and times are those of the compile that filled it)")
		} else {
			line("compile: compiled (compile cache miss), status %s", c.Status)
		}
	}
	if res.AutoTimeoutSeconds > 0 {
		line("timeout: automatic, %gs", res.AutoTimeoutSeconds)
	}
	if f.sessionID != "" {
		line("session: %s (/work kept between runs)", f.sessionID)
	}
	var files []string
	for name := range res.OutputFiles {
		files = append(files, name)
	}
	sort.Strings(files)
	switch {
	case len(f.outFiles) > 0:
		line("files returned: %d matching %s: %s", len(files), strings.Join(f.outFiles, " "), listOrNone(files))
	default:
		line("files returned: %d created or changed by the program: %s", len(files), listOrNone(files))
	}
	for _, s := range res.SkippedFiles {
		line("file skipped: %s: %s", s.Path, s.Reason)
	}
	line("ended: %s", endReason(res, tr))
	if c := res.Compile; c != nil {
		fmt.Fprintf(&b, "compile: status=%s exit=%d wall=%.1fms cpu=%.1fms memory=%.1fMiB cache_hit=%v\n", c.Status, c.ExitCode, c.DurationMs, c.CPUTimeMs, c.MemoryUsedMB, c.CacheHit)
	}
	fmt.Fprintf(&b, "run: id=%s language=%s %s status=%s exit=%d", res.ExecutionID, res.Language, res.Version, res.Status, res.ExitCode)
	if res.Signal != "" {
		fmt.Fprintf(&b, " signal=%s", res.Signal)
	}
	if res.LimitReason != "" {
		fmt.Fprintf(&b, " limit=%s", res.LimitReason)
	}
	fmt.Fprintf(&b, " wall=%.1fms cpu=%.1fms memory=%.1fMiB files=%d\n", res.DurationMs, res.CPUTimeMs, res.MemoryUsedMB, len(res.OutputFiles))
	return b.String()
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// limitsText shows a step's limits as a person reads them.
func limitsText(l sandbox.Limits) string {
	return fmt.Sprintf("wall %s, cpu %s, memory %s, processes %d, cpus %g, output %s per stream, file size %s, /work %s, /tmp %s, open files %d",
		l.WallTime, l.CPUTime, cli.Size(l.Memory), l.Processes, l.CPUs, cli.Size(l.OutputBytes), cli.Size(l.FileSize), cli.Size(l.WorkSize), cli.Size(l.TmpSize), l.OpenFiles)
}

// endReason says why the run ended, with the limit's value when one ended
// it and is known.
func endReason(res *executor.Result, tr *Trace) string {
	var l sandbox.Limits
	if tr != nil {
		l = tr.RunLimits
	}
	known := tr != nil
	with := func(what, value string) string {
		if known {
			return what + " (" + value + ")"
		}
		return what
	}
	switch res.Status {
	case executor.StatusCompileError:
		if c := res.Compile; c != nil && c.Status == executor.StatusTimeout {
			return "the compile hit its time limit"
		}
		return "the compile failed"
	case executor.StatusSetupError:
		return "the sandbox could not be set up: " + res.Error
	}
	switch sandbox.Limit(res.LimitReason) {
	case sandbox.LimitWallTime:
		return with("the wall-clock limit killed it", l.WallTime.String())
	case sandbox.LimitCPUTime:
		return with("the CPU-time limit killed it", l.CPUTime.String())
	case sandbox.LimitMemory:
		return with("the memory limit killed it", cli.Size(l.Memory))
	case sandbox.LimitProcesses:
		return with("it hit the process limit", fmt.Sprint(l.Processes))
	case sandbox.LimitOutput:
		return with("its output reached the limit", cli.Size(l.OutputBytes)+" per stream")
	case sandbox.LimitFileSize:
		return with("it wrote a file past the size limit", cli.Size(l.FileSize))
	case sandbox.LimitDisk:
		return "/work or /tmp is full"
	case sandbox.LimitSeccomp:
		return "a forbidden system call killed it (seccomp)"
	case sandbox.LimitCanceled:
		return "canceled (interrupted)"
	}
	if res.Signal != "" {
		return "killed by " + res.Signal
	}
	return fmt.Sprintf("the program exited with status %d", res.ExitCode)
}

// Trace is the executor's, named here for endReason's signature.
type Trace = executor.Trace
