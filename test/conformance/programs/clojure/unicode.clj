(let [out (java.io.PrintStream. System/out true "UTF-8")]
  (.print out "héllo wörld ✓ 日本\n"))
