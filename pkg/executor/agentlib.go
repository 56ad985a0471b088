package executor

import (
	"debug/elf"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/sandbox-run/sandbox-run/pkg/live/agent"
	"github.com/sandbox-run/sandbox-run/pkg/sandbox"
)

// agentLibDir is where a live sandbox whose root is an image has the
// host's dynamic loader and the shared libraries the agent needs: the
// agent is a program of the host's, which the image's own libraries (musl,
// or none at all) may not run. It is a sibling of agent.Path.
var agentLibDir = agent.LibDir

// agentInRoot is how the agent's binary exe starts in a root that is not
// the host's: its command line, and the mounts of what it needs. A
// statically linked agent runs as it is; a dynamically linked one runs
// through the host's loader (its PT_INTERP), mounted with the libraries
// the agent needs (its DT_NEEDED and theirs, found in the host's usual
// directories) at agentLibDir, which is the loader's only library path:
// nothing of the image's is loaded into the agent.
func agentInRoot(exe string) ([]string, []sandbox.Mount, error) {
	f, err := elf.Open(exe)
	if err != nil {
		return nil, nil, fmt.Errorf("the agent's binary: %w", err)
	}
	defer f.Close()
	interp, err := elfInterp(f)
	if err != nil || interp == "" {
		return []string{agent.Path}, nil, err
	}
	loader := path.Base(interp)
	real, err := filepath.EvalSymlinks(interp)
	if err != nil {
		return nil, nil, fmt.Errorf("the agent's loader: %w", err)
	}
	mounts := []sandbox.Mount{{Source: real, Target: path.Join(agentLibDir, loader)}}
	dirs := append(elfRunPath(f), filepath.Dir(real), path.Dir(interp))
	if t := multiarch[f.Machine]; t != "" {
		dirs = append(dirs, "/lib/"+t, "/usr/lib/"+t)
	}
	dirs = append(dirs, "/lib64", "/usr/lib64", "/lib", "/usr/lib")
	seen := map[string]bool{loader: true}
	todo, err := f.ImportedLibraries()
	if err != nil {
		return nil, nil, fmt.Errorf("the agent's libraries: %w", err)
	}
	for len(todo) > 0 {
		name := todo[0]
		todo = todo[1:]
		if seen[name] {
			continue
		}
		seen[name] = true
		lib, needs, err := findLib(name, dirs, f.Class, f.Machine)
		if err != nil {
			return nil, nil, err
		}
		mounts = append(mounts, sandbox.Mount{Source: lib, Target: path.Join(agentLibDir, name)})
		todo = append(todo, needs...)
	}
	return []string{path.Join(agentLibDir, loader), "--library-path", agentLibDir, agent.Path}, mounts, nil
}

// multiarch is the Debian-style directory of libraries by machine
// (/lib/x86_64-linux-gnu).
var multiarch = map[elf.Machine]string{
	elf.EM_X86_64:  "x86_64-linux-gnu",
	elf.EM_AARCH64: "aarch64-linux-gnu",
	elf.EM_RISCV:   "riscv64-linux-gnu",
}

// elfInterp is f's program interpreter ("" when it is statically linked).
func elfInterp(f *elf.File) (string, error) {
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b, err := io.ReadAll(p.Open())
			if err != nil {
				return "", fmt.Errorf("the agent's loader: %w", err)
			}
			return strings.TrimRight(string(b), "\x00"), nil
		}
	}
	return "", nil
}

// elfRunPath is the absolute directories of f's DT_RUNPATH and DT_RPATH.
func elfRunPath(f *elf.File) []string {
	var dirs []string
	for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
		paths, _ := f.DynString(tag)
		for _, p := range paths {
			for _, d := range filepath.SplitList(p) {
				if filepath.IsAbs(d) {
					dirs = append(dirs, d)
				}
			}
		}
	}
	return dirs
}

// findLib finds the library name in the first of dirs that has one of the
// class and machine given, and returns its file (its links followed) and
// the libraries it needs in turn.
func findLib(name string, dirs []string, class elf.Class, machine elf.Machine) (string, []string, error) {
	for _, d := range dirs {
		p, err := filepath.EvalSymlinks(filepath.Join(d, name))
		if err != nil {
			continue
		}
		f, err := elf.Open(p)
		if err != nil {
			continue
		}
		needs, err := f.ImportedLibraries()
		ok := err == nil && f.Class == class && f.Machine == machine
		f.Close()
		if ok {
			return p, needs, nil
		}
	}
	return "", nil, fmt.Errorf("the agent needs %s, found in none of %s", name, strings.Join(dirs, ", "))
}

// agentExecutable is the agent's binary on this host: s's, or this
// process's executable.
func agentExecutable(s LiveSpec) (string, error) {
	if s.Agent != "" {
		return s.Agent, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("the agent's binary: %w", err)
	}
	return exe, nil
}
