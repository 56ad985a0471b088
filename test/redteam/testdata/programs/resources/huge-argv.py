# os.execve with a 3 MiB environment: OSError E2BIG, handled.
import errno, os
env = {f"V{i}": "e" * (96 << 10) for i in range(32)}
pid = os.fork()
if pid == 0:
    try:
        os.execve("/bin/true", ["true"], env)
    except OSError as e:
        os._exit(42 if e.errno == errno.E2BIG else 43)
_, st = os.waitpid(pid, 0)
print("E2BIG" if os.waitstatus_to_exitcode(st) == 42 else f"status {st}")
