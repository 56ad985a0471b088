//go:build !linux

package cli

import "os"

// IsTerminal says whether f is a terminal (or another character device).
func IsTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
