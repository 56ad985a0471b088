import std.file, std.uni;
void main() { write("output.txt", toUpper(readText("input.txt"))); }
