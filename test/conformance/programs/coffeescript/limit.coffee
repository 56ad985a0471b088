l = []
loop
  l.push Buffer.alloc(1 << 20, 1)
