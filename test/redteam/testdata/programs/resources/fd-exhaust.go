//go:build ignore

// syscall.Open and pipes until EMFILE.
package main

import (
	"fmt"
	"syscall"
)

func main() {
	n := 0
	for {
		var err error
		if n%3 == 0 {
			var p [2]int
			if err = syscall.Pipe(p[:]); err == nil {
				n += 2
			}
		} else {
			if _, err = syscall.Open("/dev/null", syscall.O_RDONLY, 0); err == nil {
				n++
			}
		}
		if err != nil {
			if err == syscall.EMFILE {
				fmt.Println("EMFILE", n)
			} else {
				fmt.Println("error", err, n)
			}
			break
		}
	}
	var rl syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl)
	fmt.Println("OPENED", n, "LIMIT", rl.Max)
}
