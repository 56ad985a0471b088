fun main() {
    print("Hello, World!\n")
}
