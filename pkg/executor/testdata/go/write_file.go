package main

import (
	"fmt"
	"os"
)

func main() {
	if err := os.MkdirAll("out", 0o755); err != nil {
		panic(err)
	}
	if err := os.WriteFile("out/result.txt", []byte("result: ok"), 0o644); err != nil {
		panic(err)
	}
	fmt.Println("written")
}
