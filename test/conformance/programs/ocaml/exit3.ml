let () = exit 3
