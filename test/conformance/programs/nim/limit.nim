var l: seq[seq[byte]]
while true:
  var b = newSeq[byte](1 shl 20)
  for i in countup(0, b.len - 1, 4096): b[i] = 1
  l.add(b)
