import std.stdio;
void main(string[] args) { foreach (a; args[1 .. $]) write(a, "\n"); }
