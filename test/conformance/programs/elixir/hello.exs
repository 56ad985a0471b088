IO.puts("Hello, World!")
