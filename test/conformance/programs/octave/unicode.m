printf("héllo wörld ✓ 日本\n");
