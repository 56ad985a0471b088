package natstest

import "syscall"

// sysProcAttr makes a server die with the test binary, so a test killed
// by its timeout leaves no nats-server behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
