# Eight processes spinning (threads would share the GIL).
import os
parent = True
for _ in range(7):
    if os.fork() == 0:
        parent = False
        break
if parent:
    print("burning", flush=True)
x = 0
while True:
    x = (x * 31 + 7) & 0xFFFFFFFF
