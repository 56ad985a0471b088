void main () {
    uint8 buf[4096];
    size_t n;
    while ((n = stdin.read (buf, 1)) > 0) {
        stdout.write (buf[0:n], 1);
    }
    stdout.flush ();
}
