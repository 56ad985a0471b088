object Main {
  def main(args: Array[String]): Unit = {
    val out = new java.io.PrintStream(System.out, true, "UTF-8")
    out.print("héllo wörld ✓ 日本\n")
  }
}
