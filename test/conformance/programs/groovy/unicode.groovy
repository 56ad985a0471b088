def out = new PrintStream(System.out, true, "UTF-8")
out.print("héllo wörld ✓ 日本\n")
