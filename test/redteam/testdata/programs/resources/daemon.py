# The classic double fork: child setsid()s, forks the daemon and exits; the
# daemon ignores SIGHUP/SIGTERM and sleeps. The main process exits 0 once the
# daemon reports in.
import os, signal, sys, time
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        os.write(w, b"%d\n" % os.getpid())
        os.close(w)
        devnull = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        while True:
            time.sleep(1)
    os._exit(0)
os.close(w)
os.waitpid(pid, 0)
print("daemon", os.read(r, 32).decode().strip(), "started", flush=True)
sys.exit(0)
