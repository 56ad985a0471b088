object Main {
  def main(args: Array[String]): Unit = {
    val x: Int = "not an int"
    println(x)
  }
}
