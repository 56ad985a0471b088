import std/unicode
writeFile("output.txt", toUpper(readFile("input.txt")))
