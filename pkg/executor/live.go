package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// LiveSpec is a live sandbox (pkg/live) as the executor starts it: its
// first program is the agent, with the toolchains of Languages mounted and
// on its PATH.
type LiveSpec struct {
	// Languages whose default toolchains the sandbox has (those not
	// installed on this host are left out); none: DefaultLiveLanguages.
	Languages []string
	// Limits of the whole sandbox over its life (memory, processes, CPU,
	// disk of /work and /tmp); WallTime is its longest life.
	Limits sandbox.Limits
	// Env is added to every process's environment.
	Env    map[string]string
	Tenant string
	// Agent is the agent's binary on this host (default: this process's
	// executable, which must call agent.Main first).
	Agent string
	// Requests feed the agent; Events get its events; Log its stderr.
	Requests io.Reader
	Events   io.Writer
	Log      io.Writer
	// SocketDir, instead of Requests and Events, is a host directory
	// mounted read-only at agent.SocketDir, whose socket the agent
	// connects to saying Secret; the sandbox is then Detachable (it can
	// outlive this process).
	SocketDir, Secret string
}

// LiveHome is a live sandbox's home: /work by the name E2B's templates
// give it.
const LiveHome = "/home/user"

// DefaultLiveLanguages are the toolchains a live sandbox has by default.
var DefaultLiveLanguages = []string{"python", "javascript", "bash"}

// liveEnv is the environment a live sandbox's processes start with:
// its toolchains on PATH, then extra (LiveSpec.Env); a process's own comes
// over it.
func (x *Executor) liveEnv(tcs []*Toolchain, extra map[string]string) []string {
	dirs := []string{}
	for _, tc := range tcs {
		if tc.Home != "" && strings.HasPrefix(tc.Bin, tc.Home) {
			dirs = append(dirs, path.Dir(tc.Bin))
		}
	}
	dirs = append(slices.Compact(dirs), "/usr/local/bin", "/usr/bin", "/bin")
	env := map[string]string{"PATH": strings.Join(dirs, ":"), "HOME": LiveHome, "LANG": "C.UTF-8", "USER": "sandbox", "TMPDIR": "/tmp"}
	for k, v := range extra {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// StartLive starts a live sandbox: the agent, serving s.Requests and
// s.Events until its requests end or a limit ends it.
func (x *Executor) StartLive(ctx context.Context, s LiveSpec) (*sandbox.Process, error) {
	spec, err := x.liveSpec(s)
	if err != nil {
		return nil, err
	}
	return x.engine.Start(ctx, spec)
}

// PrewarmLive keeps n sandboxes ready for live sandboxes started as s
// (its socket mode: languages and limits; its socket directory, secret and
// environment do not matter), so that starting one costs little. It
// returns once they are ready; the engine refills them as they are taken.
func (x *Executor) PrewarmLive(s LiveSpec, n int) error {
	if s.SocketDir == "" {
		s.SocketDir = os.TempDir() // any directory: it is mounted when a sandbox starts
	}
	spec, err := x.liveSpec(s)
	if err != nil {
		return err
	}
	return x.engine.Prewarm(spec, n)
}

// liveSpec is the sandbox of a live sandbox.
func (x *Executor) liveSpec(s LiveSpec) (*sandbox.Spec, error) {
	if x.engine == nil {
		return nil, errors.New("live sandboxes need the sandbox engine")
	}
	exe := s.Agent
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("the agent's binary: %w", err)
		}
	}
	langs := s.Languages
	if len(langs) == 0 {
		langs = DefaultLiveLanguages
	}
	var tcs []*Toolchain
	mounts := append([]sandbox.Mount{}, sandbox.SystemMounts...)
	seen := map[string]bool{}
	for _, m := range mounts {
		seen[m.Source] = true
	}
	for _, name := range langs {
		if _, known := x.reg.Lookup(name); !known {
			return nil, &UnsupportedLanguageError{Language: name, Known: x.reg.Names()}
		}
		_, tc, err := x.resolve(name, "")
		if err != nil {
			continue // not installed here: the sandbox has it not
		}
		if tc.Root != "" {
			continue // an image's: not for a sandbox on the host's system
		}
		tcs = append(tcs, tc)
		for _, p := range tc.Mounts {
			target := p.Target
			if target == "" {
				target = p.Source
			}
			if !seen[target] {
				seen[target] = true
				mounts = append(mounts, sandbox.Mount{Source: p.Source, Target: p.Target})
			}
		}
	}
	if x.runnerDir != "" { // the interpreter kernels, for code contexts
		mounts = append(mounts, sandbox.Mount{Source: x.runnerDir, Target: RunnerTarget})
	}
	mounts = append(mounts, sandbox.Mount{Source: exe, Target: agent.Path})
	env := x.liveEnv(tcs, s.Env)
	if s.SocketDir != "" {
		// The agent takes these two out of its environment first thing.
		// Bound when it starts: a warm sandbox fits every live sandbox.
		mounts = append(mounts, sandbox.Mount{Source: s.SocketDir, Target: agent.SocketDir, Late: true})
		env = append(env, agent.EnvSocket+"="+agent.SocketDir+"/"+agent.SocketName, agent.EnvSecret+"="+s.Secret)
	}
	spec := &sandbox.Spec{
		Args:       []string{agent.Path},
		Env:        env,
		Dir:        "/work",
		Mounts:     mounts,
		Limits:     s.Limits.WithDefaults(),
		Tenant:     s.Tenant,
		Stdin:      s.Requests,
		Stderr:     s.Log,
		ResultPipe: s.Events != nil,
		ResultOut:  s.Events,
		Detachable: s.SocketDir != "",
		Stream:     true,
		PTY:        true,
		Home:       LiveHome,
	}
	return spec, nil
}
