void main () {
    stdout.printf ("Hello, World!\n");
}
