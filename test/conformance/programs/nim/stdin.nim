var buf: array[4096, char]
while true:
  let n = stdin.readBuffer(addr buf[0], buf.len)
  if n <= 0: break
  discard stdout.writeBuffer(addr buf[0], n)
stdout.flushFile()
