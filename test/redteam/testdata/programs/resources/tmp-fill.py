# Fill /tmp and then /dev/shm until ENOSPC: both are the run's own bounded
# tmpfs; their sizes are printed, and the run then fails.
import errno, os, sys
chunk = b"t" * (1 << 16)
for d in ("/tmp", "/dev/shm"):
    total = 0
    try:
        with open(os.path.join(d, "fill"), "wb", buffering=0) as f:
            while True:
                total += f.write(chunk)
    except OSError as e:
        print(d, "ENOSPC" if e.errno == errno.ENOSPC else e, "TOTAL", total, flush=True)
    # the files stay: the sandbox reports the full tmpfs as the disk limit
sys.exit(1)
