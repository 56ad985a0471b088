//go:build ignore

// Create empty files and directories until the tmpfs runs out of inodes.
package main

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

func main() {
	for i := 0; i < 100000; i++ {
		var err error
		if i%2 == 0 {
			err = os.Mkdir(fmt.Sprintf("/work/d%d", i), 0o755)
		} else {
			var f *os.File
			if f, err = os.Create(fmt.Sprintf("/work/f%d", i)); err == nil {
				f.Close()
			}
		}
		if err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				fmt.Println("ENOSPC after", i, "inodes")
			} else {
				fmt.Println("error:", err)
			}
			os.Exit(1)
		}
	}
	fmt.Println("never refused")
}
