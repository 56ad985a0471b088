# SIGSTOP ourselves: the wall clock must still end the run.
import os, signal
print("stopping", flush=True)
os.kill(os.getpid(), signal.SIGSTOP)
print("continued", flush=True)
