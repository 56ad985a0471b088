process.stdout.write "Hello, World!\n"
