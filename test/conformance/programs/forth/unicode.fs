.( héllo wörld ✓ 日本) cr bye
