object Main {
  def main(args: Array[String]): Unit = args.foreach(a => print(a + "\n"))
}
