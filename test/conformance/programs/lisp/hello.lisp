(write-line "Hello, World!")
