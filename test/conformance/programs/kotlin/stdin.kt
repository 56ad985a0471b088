fun main() {
    System.`in`.copyTo(System.out)
    System.out.flush()
}
