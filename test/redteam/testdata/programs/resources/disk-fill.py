# Fill /work until ENOSPC with one growing file per 4 MiB, then fail.
import errno, sys
chunk = b"y" * (1 << 16)
total = 0
i = 0
try:
    while True:
        with open(f"/work/fill-{i:04d}", "wb", buffering=0) as f:
            for _ in range(64):
                total += f.write(chunk)
        i += 1
except OSError as e:
    print("ENOSPC" if e.errno == errno.ENOSPC else e, "after", total, "bytes")
    print("TOTAL", total)
    sys.exit(1)
