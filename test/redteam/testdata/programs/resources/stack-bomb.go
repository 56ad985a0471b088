//go:build ignore

// Goroutine stacks grow until the runtime's maximum: a fatal stack overflow.
package main

import (
	"fmt"
	"os"
	"runtime/debug"
)

func down(n int) int {
	var frame [256]byte
	frame[n%256] = byte(n)
	return down(n+1) + int(frame[(n+1)%256])
}

func main() {
	debug.SetMaxStack(32 << 20)
	fmt.Println("recursing")
	os.Stdout.Sync()
	down(0)
}
