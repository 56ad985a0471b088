import std/os
for a in commandLineParams():
  echo a
