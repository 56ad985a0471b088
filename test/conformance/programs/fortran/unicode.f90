program u
  print "(a)", "héllo wörld ✓ 日本"
end program u
