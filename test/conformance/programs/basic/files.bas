open #1, "input.txt", "r"
open #2, "output.txt", "w"
while (not eof(1))
  line input #1 a$
  print #2 upper$(a$)
wend
close #1
close #2
