//go:build ignore

// Nested namespaces from Go: syscall.Unshare and os/exec with namespace
// clone flags must fail with EPERM; a plain child process still starts.
package main

import (
	"errors"
	"fmt"
	"os/exec"
	"syscall"
)

func name(err error) string {
	if err == nil {
		return "SUCCEEDED"
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.EPERM:
			return "EPERM"
		case syscall.ENOSYS:
			return "ENOSYS"
		}
	}
	return err.Error()
}

func main() {
	flags := []struct {
		n string
		f uintptr
	}{{"NEWUSER", syscall.CLONE_NEWUSER}, {"NEWNS", syscall.CLONE_NEWNS}, {"NEWNET", syscall.CLONE_NEWNET}, {"NEWPID", syscall.CLONE_NEWPID}}
	for _, f := range flags {
		// Raw: the Go runtime's own Unshare does the same, but on one thread.
		_, _, e := syscall.RawSyscall(syscall.SYS_UNSHARE, f.f, 0, 0)
		var err error
		if e != 0 {
			err = e
		}
		fmt.Println("unshare", f.n, name(err))
		if err == nil {
			return
		}
	}
	for _, f := range flags {
		cmd := exec.Command("/usr/bin/true")
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: f.f}
		if f.f == syscall.CLONE_NEWUSER {
			cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 1000, Size: 1}}
		}
		fmt.Println("exec", f.n, name(cmd.Run()))
	}
	fmt.Println("exec plain", name(exec.Command("/usr/bin/true").Run()))
}
