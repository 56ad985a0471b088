.( Hello, World!) cr bye
