//go:build !linux

package agent

import "os"

// openPTY refuses: the agent's terminals are Linux's.
func openPTY(Size) (master, slave *os.File, err error) {
	return nil, nil, invalid("no PTY on this system")
}

func setSize(*os.File, Size) error {
	return invalid("no PTY on this system")
}
