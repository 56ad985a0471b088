//go:build !linux

package main

import "runtime"

func hostChecks() []check {
	return []check{{Name: "operating system", Required: true, Detail: runtime.GOOS + ": sandboxing needs Linux"}}
}
