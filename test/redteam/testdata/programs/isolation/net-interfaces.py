# The sandbox's network: only lo, no routes off the machine, and AF_VSOCK
# sockets cannot be created (never connected: its peer is the hypervisor).
import errno, socket

print("IFACES", ",".join(name for _, name in socket.if_nameindex()))
with open("/proc/net/dev") as f:
    devs = [line.split(":")[0].strip() for line in f.readlines()[2:]]
print("PROCNETDEV", ",".join(devs))
with open("/proc/net/route") as f:
    routes = f.readlines()[1:]
print("ROUTES4", len(routes))
try:
    with open("/proc/net/ipv6_route") as f:
        print("ROUTES6", ",".join(sorted({line.split()[-1] for line in f})))
except OSError as e:
    print("ROUTES6 none", e.strerror)
# The host's UNIX sockets (its API socket, dbus, ...) are not reachable.
with open("/proc/net/unix") as f:
    print("UNIX sockets", len(f.readlines()) - 1)
for path in ["/run/sandbox-run.sock", "/var/run/docker.sock", "/run/dbus/system_bus_socket", "/tmp/.X11-unix/X0"]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        print("unix", path, "CONNECTED")
    except OSError as e:
        print("unix", path, errno.errorcode.get(e.errno, e))
    s.close()
for kind in [socket.SOCK_STREAM, socket.SOCK_DGRAM]:
    try:
        s = socket.socket(socket.AF_VSOCK, kind)
        print("vsock CREATED")
        s.close()
    except OSError as e:
        print("vsock", errno.errorcode.get(e.errno, e))
print("hostname", socket.gethostname())
