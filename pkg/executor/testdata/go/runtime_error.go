package main

import "fmt"

func main() {
	var m map[string]int
	m["boom"] = 1 // assignment to a nil map panics
	fmt.Println(m)
}
