//go:build darwin || freebsd || netbsd || openbsd || dragonfly

package sandboxcmd

import "golang.org/x/sys/unix"

// The ioctls that get and set a terminal's attributes.
const (
	getTermios = unix.TIOCGETA
	setTermios = unix.TIOCSETA
)
