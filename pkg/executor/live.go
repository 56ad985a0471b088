package executor

import (
	"context"
	"errors"
	"io"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/sandbox-run/sandbox-run/pkg/images"
	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// LiveSpec is a live sandbox (pkg/live) as the executor starts it: its
// first program is the agent, with the toolchains of Languages mounted and
// on its PATH, or in an image.
type LiveSpec struct {
	// Image, when set, is an image (a reference) whose root filesystem is
	// the sandbox's root, pulled and unpacked when the store lacks it: its
	// toolchains and environment are the image's own (none of the host's
	// is mounted), and the agent runs there through the host's dynamic
	// loader and libraries (agentInRoot). "": the host's system.
	Image string
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
	// FilesFrom, when set, is a directory whose work and tmp its home and
	// /tmp start from, copy-on-write (sandbox.Spec.FilesFrom).
	FilesFrom string
	// Mounts are mounted in it besides what every live sandbox has, each
	// as the sandbox starts (Late: a sandbox kept ready fits).
	Mounts []sandbox.Mount
	// Network, when set, is the sandbox's network device (Executor.Network);
	// a sandbox on a socket gets it once adopted instead
	// (sandbox.Adopted.AttachNetwork), for its device goes with Detach.
	Network *sandbox.Network
}

// LiveHome is a live sandbox's home: /work by the name E2B's templates
// give it.
const LiveHome = "/home/user"

// DefaultLiveLanguages are the toolchains a live sandbox has by default.
var DefaultLiveLanguages = []string{"python", "javascript", "bash"}

// liveEnv is the environment a live sandbox's processes start with: its
// toolchains on PATH, or in an image the image's environment (but for
// HOME, USER and TMPDIR, which are the sandbox's) with its PATH first,
// then extra (LiveSpec.Env); a process's own comes over it.
func (x *Executor) liveEnv(tcs []*Toolchain, imageEnv []string, extra map[string]string) []string {
	dirs := []string{}
	for _, tc := range tcs {
		if tc.Home != "" && strings.HasPrefix(tc.Bin, tc.Home) {
			dirs = append(dirs, path.Dir(tc.Bin))
		}
	}
	dirs = append(slices.Compact(dirs), searchPath...)
	if p := imagePath(imageEnv); len(p) > 0 {
		dirs = append(p, slices.DeleteFunc(dirs, func(d string) bool { return slices.Contains(p, d) })...)
	}
	env := map[string]string{"HOME": LiveHome, "LANG": "C.UTF-8", "USER": "sandbox", "TMPDIR": "/tmp"}
	for _, kv := range imageEnv {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" && k != "HOME" && k != "USER" && k != "TMPDIR" {
			env[k] = v
		}
	}
	env["PATH"] = strings.Join(dirs, ":")
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

// LiveProcess is a live sandbox started (StartLive): its sandbox's
// process, and the image it runs in held until Release.
type LiveProcess struct {
	*sandbox.Process
	// ImageDigest is the digest of the image it runs in ("" on the host's
	// system), for HoldImage to hold it again in the process that takes
	// the sandbox over.
	ImageDigest string
	release     func()
}

// Release ends the hold on the sandbox's image, once the sandbox has
// ended (or this process let it go): the image store may evict it from
// then on. More than once is fine.
func (p *LiveProcess) Release() {
	if p.release != nil {
		p.release()
	}
}

// StartLive starts a live sandbox: the agent, serving s.Requests and
// s.Events until its requests end or a limit ends it. Its image, if any,
// is held until the LiveProcess's Release. A failure to get the image is
// an *ImageError (an invalid reference, or one the source does not have)
// or another error saying what failed (the pull, the unpacking).
func (x *Executor) StartLive(ctx context.Context, s LiveSpec) (*LiveProcess, error) {
	var img *images.Image
	root, release := "", func() {}
	if s.Image != "" {
		var err error
		if img, root, release, err = x.useImage(ctx, s.Image); err != nil {
			return nil, err
		}
	}
	spec, err := x.liveSpec(s, root, img)
	var p *sandbox.Process
	if err == nil {
		p, err = x.engine.Start(ctx, spec)
	}
	if err != nil {
		release()
		return nil, err
	}
	lp := &LiveProcess{Process: p, release: release}
	if img != nil {
		lp.ImageDigest = img.Digest
	}
	return lp, nil
}

// HoldImage holds the image with digest for a live sandbox this process
// takes over from an earlier one (images.Store.Hold), until release is
// called. An image the store no longer has is not held (release does
// nothing): the sandbox's mounts keep what it uses.
func (x *Executor) HoldImage(digest string) (release func()) {
	if digest == "" {
		return func() {}
	}
	if store, err := x.Images(); err == nil {
		if release, ok := store.Hold(digest); ok {
			return release
		}
	}
	return func() {}
}

// PrewarmLive keeps n sandboxes ready for live sandboxes started as s
// (its socket mode: languages and limits; its socket directory, secret and
// environment do not matter), so that starting one costs little. It
// returns once they are ready; the engine refills them as they are taken.
// Sandboxes in an image are not kept ready.
func (x *Executor) PrewarmLive(s LiveSpec, n int) error {
	if s.Image != "" {
		return errors.New("live sandboxes in an image are not kept ready")
	}
	if s.SocketDir == "" {
		s.SocketDir = os.TempDir() // any directory: it is mounted when a sandbox starts
	}
	spec, err := x.liveSpec(s, "", nil)
	if err != nil {
		return err
	}
	return x.engine.Prewarm(spec, n)
}

// HeldImage is the image a live sandbox's root is, held (images.Store.Hold)
// until Release; its zero value is none.
type HeldImage struct {
	Digest  string
	Release func()
}

// LiveSandboxSpec is the sandbox spec of a live sandbox whose agent is on
// a socket (s.SocketDir), for another isolation backend to start it
// (pkg/gvisor's StartLive): its program is the agent, its mounts the
// toolchains (in an image: the image's root, pulled if need be and held
// until the HeldImage's Release), the kernels, the agent's binary and its
// socket directory.
func (x *Executor) LiveSandboxSpec(ctx context.Context, s LiveSpec) (*sandbox.Spec, HeldImage, error) {
	held := HeldImage{Release: func() {}}
	if s.SocketDir == "" {
		return nil, held, errors.New("a live sandbox of another backend has its agent on a socket")
	}
	var img *images.Image
	root := ""
	if s.Image != "" {
		var err error
		if img, root, held.Release, err = x.useImage(ctx, s.Image); err != nil {
			return nil, HeldImage{Release: func() {}}, err
		}
		held.Digest = img.Digest
	}
	spec, err := x.liveSpec(s, root, img)
	if err != nil {
		held.Release()
		return nil, HeldImage{Release: func() {}}, err
	}
	return spec, held, nil
}

// GVisor is the gVisor backend when this host has one (Config.GVisor),
// else nil.
func (x *Executor) GVisor() Isolator { return x.gvisor }

// liveSpec is the sandbox of a live sandbox: on the host's system, or with
// root, the unpacked root of the image img, as its root.
func (x *Executor) liveSpec(s LiveSpec, root string, img *images.Image) (*sandbox.Spec, error) {
	if x.engine == nil {
		return nil, errors.New("live sandboxes need the sandbox engine")
	}
	exe, err := agentExecutable(s)
	if err != nil {
		return nil, err
	}
	args := []string{agent.Path}
	langs := s.Languages
	if len(langs) == 0 {
		langs = DefaultLiveLanguages
	}
	var tcs []*Toolchain
	var mounts []sandbox.Mount
	if root == "" { // in an image, the image has its own
		mounts = append(mounts, sandbox.SystemMounts...)
	}
	seen := map[string]bool{}
	for _, m := range mounts {
		seen[m.Source] = true
	}
	for _, name := range langs {
		if _, known := x.reg.Lookup(name); !known {
			return nil, &UnsupportedLanguageError{Language: name, Known: x.reg.Names()}
		}
		if root != "" {
			continue // the image's toolchains are its own
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
	var imageEnv []string
	if root != "" {
		// The host's program in the image's root: it brings the host's
		// loader and libraries along.
		var libs []sandbox.Mount
		if args, libs, err = agentInRoot(exe); err != nil {
			return nil, err
		}
		mounts = append(mounts, libs...)
		imageEnv = img.Env
	}
	// Every live sandbox has the resolv.conf of a network, whether it has
	// one or not (its names then fail at once): a sandbox kept ready fits
	// both, and one may get a network after it started.
	conf, err := x.resolvConf()
	if err != nil {
		return nil, err
	}
	mounts = append(mounts, sandbox.Mount{Source: conf, Target: "/etc/resolv.conf"})
	for _, m := range s.Mounts {
		m.Late = true
		mounts = append(mounts, m)
	}
	env := x.liveEnv(tcs, imageEnv, s.Env)
	if s.SocketDir != "" {
		// The agent takes these two out of its environment first thing.
		// Bound when it starts: a warm sandbox fits every live sandbox.
		mounts = append(mounts, sandbox.Mount{Source: s.SocketDir, Target: agent.SocketDir, Late: true})
		env = append(env, agent.EnvSocket+"="+agent.SocketDir+"/"+agent.SocketName, agent.EnvSecret+"="+s.Secret)
	}
	spec := &sandbox.Spec{
		Args:       args,
		Env:        env,
		Dir:        "/work",
		Mounts:     mounts,
		Root:       root,
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
		FilesFrom:  s.FilesFrom,
	}
	if s.SocketDir == "" {
		spec.Network = s.Network
	}
	return spec, nil
}
