let () = print_string (1 + "x")
