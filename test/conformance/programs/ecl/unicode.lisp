(write-line "héllo wörld ✓ 日本")
