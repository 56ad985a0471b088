object Main {
  def main(args: Array[String]): Unit = {
    val buf = new Array[Byte](4096)
    var n = System.in.read(buf)
    while (n >= 0) { System.out.write(buf, 0, n); n = System.in.read(buf) }
    System.out.flush()
  }
}
