# SIGTERM handler that refuses to die, then sleep.
import signal, time
def refuse(signum, frame):
    print("refusing", signum, flush=True)
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGXCPU):
    signal.signal(s, refuse)
print("installed", flush=True)
while True:
    time.sleep(600)
