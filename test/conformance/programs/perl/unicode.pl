print "héllo wörld ✓ 日本\n";
