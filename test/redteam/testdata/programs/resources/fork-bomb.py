# os.fork in a loop in every process for a second; the main process reports
# whether the kernel refused (EAGAIN from the pids limit) and exits 0 while
# its descendants still live: the run must end them all.
import errno, os, time

me = os.getpid()
refused = 0
deadline = time.monotonic() + 1.0
while time.monotonic() < deadline:
    try:
        os.fork()
    except OSError as e:
        if e.errno == errno.EAGAIN and os.getpid() == me:
            refused += 1
if os.getpid() == me:
    print("EAGAIN" if refused else "never refused", refused > 0)
    os._exit(0)
while True:
    time.sleep(60)
