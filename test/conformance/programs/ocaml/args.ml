let () = Array.iteri (fun i a -> if i > 0 then print_endline a) Sys.argv
