# CPython ignores SIGXFSZ, so past RLIMIT_FSIZE a write fails with EFBIG.
# The file is argv[1] (default /work/big).
import errno, sys
path = sys.argv[1] if len(sys.argv) > 1 else "/work/big"
total = 0
try:
    with open(path, "wb", buffering=0) as f:
        while True:
            total += f.write(b"p" * (1 << 16))
except OSError as e:
    print("EFBIG" if e.errno == errno.EFBIG else e, "at", total, flush=True)
    sys.exit(1)
