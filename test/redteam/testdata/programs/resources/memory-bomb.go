//go:build ignore

// Slices of touched memory, kept alive forever.
package main

func main() {
	var hog [][]byte
	for {
		b := make([]byte, 1<<20)
		for i := range b {
			b[i] = 0x5a
		}
		hog = append(hog, b)
	}
}
