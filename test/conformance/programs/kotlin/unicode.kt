import java.io.PrintStream

fun main() {
    val out = PrintStream(System.out, true, "UTF-8")
    out.print("héllo wörld ✓ 日本\n")
}
