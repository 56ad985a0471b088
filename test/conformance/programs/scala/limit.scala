object Main {
  def main(args: Array[String]): Unit = {
    var n = 0L
    while (true) { n += 1; if (n == Long.MaxValue) println(n) }
  }
}
