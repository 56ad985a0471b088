fun main() {
    var n = 0L
    while (true) {
        n++
        if (n == Long.MAX_VALUE) println(n)
    }
}
