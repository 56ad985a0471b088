package main

import (
	"bytes"
	"os"
)

func main() {
	b, err := os.ReadFile("input.txt")
	if err != nil {
		panic(err)
	}
	if err := os.WriteFile("output.txt", bytes.ToUpper(b), 0o644); err != nil {
		panic(err)
	}
}
