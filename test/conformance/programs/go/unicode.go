package main

import "fmt"

func main() {
	fmt.Println("héllo wörld ✓ 日本")
}
