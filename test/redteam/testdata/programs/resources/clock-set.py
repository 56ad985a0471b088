# time.clock_settime on the realtime clock.
import time
try:
    time.clock_settime(time.CLOCK_REALTIME, 0.0)
    print("SUCCEEDED")
except PermissionError as e:
    print("EPERM", e)
