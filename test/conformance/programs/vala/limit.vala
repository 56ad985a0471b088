void main () {
    var l = new GLib.List<uint8[]> ();
    while (true) {
        var b = new uint8[1 << 20];
        for (int i = 0; i < b.length; i += 4096) b[i] = 1;
        l.prepend ((owned) b);
    }
}
