void main () {
    int[] a = new int[2];
    int i = 1 << 30;
    stderr.printf ("about to fail\n");
    GLib.error ("boom %d", a[0] + i);
}
