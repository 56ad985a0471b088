//go:build ignore

// Writing into the Go root (bind-mounted read-only at its host path) and
// its build cache: a planted file would compile into every later Go run.
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
)

func name(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.EROFS:
			return "EROFS"
		case syscall.EACCES:
			return "EACCES"
		case syscall.EPERM:
			return "EPERM"
		case syscall.ENOENT:
			return "ENOENT"
		}
	}
	return err.Error()
}

func main() {
	root := os.Getenv("GOROOT")
	if root == "" {
		root = runtime.GOROOT()
	}
	fmt.Println("GOROOT", root)
	for _, p := range []string{
		filepath.Join(root, "src", "runtime", "zz_evil.go"),
		filepath.Join(root, "src", "fmt", "zz_evil.go"),
		filepath.Join(root, "bin", "evil"),
		filepath.Join(root, "pkg", "evil"),
		"/usr/local/go/src/os/zz_evil.go",
	} {
		if err := os.WriteFile(p, []byte("package x\n"), 0o644); err != nil {
			fmt.Println(p, name(err))
		} else {
			fmt.Println(p, "LEAK created")
		}
	}
	if err := os.Chmod(filepath.Join(root, "bin", "go"), 0o777); err != nil {
		fmt.Println("chmod go", name(err))
	} else {
		fmt.Println("chmod go LEAK")
	}
	if err := os.Remove(filepath.Join(root, "VERSION")); err != nil {
		fmt.Println("remove VERSION", name(err))
	} else {
		fmt.Println("remove VERSION LEAK")
	}
	// The run step has no build cache at all; if one were mounted, it must
	// not be writable either.
	if err := os.MkdirAll("/cache/go/evil", 0o755); err != nil {
		fmt.Println("cache", name(err))
	} else {
		fmt.Println("cache LEAK")
	}
}
