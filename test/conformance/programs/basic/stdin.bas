rem Line by line, each line printed with its newline
while (not eof(0))
  line input "" a$
  print a$
wend
