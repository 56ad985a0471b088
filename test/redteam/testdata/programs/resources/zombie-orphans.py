# A child makes 30 grandchildren that exit at once and then exits itself
# without reaping them: the orphaned zombies are reparented to the sandbox's
# PID 1, which must reap them. Then the parent leaves 20 zombies of its own.
import os, time

def zombies(parent=None):
    n = 0
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] == "Z" and (parent is None or int(fields[1]) == parent):
            n += 1
    return n

child = os.fork()
if child == 0:
    for _ in range(30):
        if os.fork() == 0:
            os._exit(0)
    time.sleep(0.2)
    os._exit(0)
os.waitpid(child, 0)
for _ in range(50):
    if zombies() == 0:
        break
    time.sleep(0.02)
print("orphan zombies left", zombies(), flush=True)
for _ in range(20):
    if os.fork() == 0:
        os._exit(0)
time.sleep(0.2)
print("own zombies", zombies(os.getpid()), flush=True)
