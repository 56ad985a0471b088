(display "héllo wörld ✓ 日本")
(newline)
