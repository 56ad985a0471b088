(display "Hello, World!")
(newline)
