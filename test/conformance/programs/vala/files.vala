void main () {
    string s;
    try {
        FileUtils.get_contents ("input.txt", out s);
        FileUtils.set_contents ("output.txt", s.up ());
    } catch (FileError e) {
        stderr.printf ("%s\n", e.message);
        Process.exit (1);
    }
}
