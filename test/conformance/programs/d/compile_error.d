import std.stdio;
void main() { int x = "not an int"; writeln(x) }
