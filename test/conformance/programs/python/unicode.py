print("héllo wörld ✓ 日本")
