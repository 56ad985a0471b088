//go:build !linux

package secretcmd

import "errors"

func noEcho(int) (restore func(), err error) {
	return nil, errors.New("not supported on this system")
}
