//go:build !linux

package sandbox

import "runtime"

func hostChecks() []Check {
	return []Check{{Name: "operating system", Required: true, Detail: runtime.GOOS + ": sandboxing needs Linux"}}
}
