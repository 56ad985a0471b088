import java.nio.file.{Files, Paths}
import java.nio.charset.StandardCharsets.UTF_8

object Main {
  def main(args: Array[String]): Unit = {
    val s = new String(Files.readAllBytes(Paths.get("input.txt")), UTF_8)
    Files.write(Paths.get("output.txt"), s.toUpperCase.getBytes(UTF_8))
  }
}
