//go:build ignore

// One 8 MiB write, many times larger than the cap, then more: the kept
// output must be exactly the cap.
package main

import (
	"bytes"
	"os"
)

func main() {
	big := bytes.Repeat([]byte("G"), 8<<20)
	for {
		os.Stdout.Write(big)
	}
}
