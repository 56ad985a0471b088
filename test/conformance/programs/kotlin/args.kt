fun main(args: Array<String>) {
    for (a in args) print(a + "\n")
}
