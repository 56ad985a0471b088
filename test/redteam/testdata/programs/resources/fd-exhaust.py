# os.open and socket pairs until EMFILE.
import errno, os, resource, socket
fds = []
try:
    while True:
        if len(fds) % 2:
            a, b = socket.socketpair()
            fds += [a, b]
        else:
            fds.append(os.open("/dev/null", os.O_RDONLY))
except OSError as e:
    print("EMFILE" if e.errno == errno.EMFILE else e, len(fds))
print("OPENED", len(fds), "LIMIT", resource.getrlimit(resource.RLIMIT_NOFILE)[1])
