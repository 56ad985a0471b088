# A list that grows by 1 MiB of touched memory per step, forever.
hog = []
while True:
    hog.append(bytearray(b"\x5a" * (1 << 20)))
