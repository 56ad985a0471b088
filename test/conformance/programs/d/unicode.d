import std.stdio;
void main() { write("héllo wörld ✓ 日本\n"); }
