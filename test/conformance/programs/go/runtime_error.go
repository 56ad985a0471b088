package main

func main() {
	var s []int
	_ = s[5]
}
