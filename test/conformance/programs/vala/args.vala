void main (string[] args) {
    for (int i = 1; i < args.length; i++) {
        stdout.printf ("%s\n", args[i]);
    }
}
