void main () {
    int x = "not an int";
    stdout.printf ("%d\n", x)
}
