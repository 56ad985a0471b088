# Sleep far past the wall-clock limit, in a child too.
import os, time
print("sleeping", flush=True)
if os.fork() == 0:
    time.sleep(600)
    os._exit(0)
time.sleep(600)
