void main () {
    stdout.printf ("héllo wörld ✓ 日本\n");
}
