rem peek$("argument") takes the next argument; peek("argument") counts those left
while (peek("argument") > 0)
  print peek$("argument")
wend
