import std.stdio;
void main() {
    foreach (ubyte[] chunk; stdin.byChunk(4096)) stdout.rawWrite(chunk);
}
