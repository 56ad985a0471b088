# The server's environment must not reach the program. argv[1] names a
# variable the test set in the server process; its value must appear
# nowhere: not in our environment, nor in any /proc/*/environ we can read.
import os, sys

name = sys.argv[1]
print("ENV", name, "ABSENT" if name not in os.environ else "LEAK")
print("ENVKEYS", ",".join(sorted(os.environ)))
for k, v in sorted(os.environ.items()):
    print("env", k, v)
for pid in sorted(p for p in os.listdir("/proc") if p.isdigit()):
    try:
        with open("/proc/%s/environ" % pid, "rb") as f:
            data = f.read()
    except OSError as e:
        print("environ", pid, "DENIED", e.strerror)
        continue
    print("environ", pid, data.replace(b"\0", b" ").decode(errors="replace"))
print("DONE")
