//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package sandboxcmd

import "errors"

func terminalSize(int) (cols, rows int) { return 0, 0 }

func makeRaw(int) (restore func(), err error) {
	return nil, errors.New("not supported on this system: pipe the commands to the shell instead")
}
