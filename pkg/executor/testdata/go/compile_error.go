package main

import "fmt"

func main() {
	fmt.Println(undefined_name)
}
