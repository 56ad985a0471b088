import java.io.File

fun main() {
    File("output.txt").writeText(File("input.txt").readText(Charsets.UTF_8).toUpperCase(), Charsets.UTF_8)
}
