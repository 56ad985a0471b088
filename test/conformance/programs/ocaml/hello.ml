let () = print_string "Hello, World!\n"
