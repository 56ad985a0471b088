puts "héllo wörld ✓ 日本"
