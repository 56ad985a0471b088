do
  n = n + 1
loop
