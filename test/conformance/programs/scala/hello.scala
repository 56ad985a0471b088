object Main {
  def main(args: Array[String]): Unit = print("Hello, World!\n")
}
