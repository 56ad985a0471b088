let () = print_string "héllo wörld ✓ 日本\n"
