import std.stdio;
void main() { write("Hello, World!\n"); }
