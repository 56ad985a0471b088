# The host's UNIX sockets: argv[1] is an abstract socket name and argv[2]
# a socket path, both listened on by the test in the host's namespaces
# (the containerd-shim class of escape). Abstract names belong to the
# network namespace and the path is outside our root: neither connects.
import errno, socket, sys

abstract, path = sys.argv[1], sys.argv[2]
for label, addr in [("abstract", "\0" + abstract), ("path", path)]:
    for kind in [socket.SOCK_STREAM, socket.SOCK_SEQPACKET, socket.SOCK_DGRAM]:
        s = socket.socket(socket.AF_UNIX, kind)
        try:
            s.connect(addr)
            s.send(b"LEAK from sandbox")
            print(label, kind, "CONNECTED")
        except OSError as e:
            print(label, int(kind), errno.errorcode.get(e.errno, e))
        finally:
            s.close()
# Listening on the same abstract name works: it is our own namespace's.
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.bind("\0" + abstract)
    print("bind abstract OWN")
except OSError as e:
    print("bind abstract", errno.errorcode.get(e.errno, e))
