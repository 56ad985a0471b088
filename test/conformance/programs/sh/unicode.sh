echo "héllo wörld ✓ 日本"
