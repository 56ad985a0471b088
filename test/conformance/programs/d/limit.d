void main() {
    ubyte[][] l;
    while (true) { auto b = new ubyte[1 << 20]; foreach (i; 0 .. b.length / 4096) b[i * 4096] = 1; l ~= b; }
}
