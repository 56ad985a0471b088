l = []
while True:
    l.append(bytearray(1 << 20))
