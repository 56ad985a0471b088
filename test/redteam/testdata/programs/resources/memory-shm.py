# Memory through the back door: tmpfs pages (/dev/shm) are charged to the
# run's memory cgroup, so a small memory limit must stop this too.
import os
n = 0
with open("/dev/shm/hog", "wb") as f:
    while True:
        f.write(b"\x5a" * (1 << 20))
        n += 1
        if n % 8 == 0:
            print("MiB", n, flush=True)
