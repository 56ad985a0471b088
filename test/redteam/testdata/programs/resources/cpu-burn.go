//go:build ignore

// GOMAXPROCS 16, 32 goroutines spinning.
package main

import (
	"fmt"
	"runtime"
)

func main() {
	runtime.GOMAXPROCS(16)
	for i := 0; i < 32; i++ {
		go func(x uint64) {
			for {
				x = x*6364136223846793005 + 1
			}
		}(uint64(i))
	}
	fmt.Println("burning")
	var x uint64
	for {
		x = x*6364136223846793005 + 1
	}
}
