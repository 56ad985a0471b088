# Network egress to the host's loopback: argv[1] is a TCP port and argv[2]
# a UDP port the test listens on at the host's 127.0.0.1. The sandbox's
# 127.0.0.1 is its own: TCP is refused, UDP goes nowhere the host hears.
import errno, socket, sys

tcp, udp = int(sys.argv[1]), int(sys.argv[2])
for host in ["127.0.0.1", "127.1.2.3", "0.0.0.0"]:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect((host, tcp))
        s.sendall(b"LEAK from sandbox\n")
        print("tcp", host, "CONNECTED")
    except OSError as e:
        print("tcp", host, errno.errorcode.get(e.errno, e))
    finally:
        s.close()

u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(5):
    u.sendto(b"LEAK from sandbox", ("127.0.0.1", udp))
print("udp sent 5 datagrams to 127.0.0.1:%d" % udp)
# A connected UDP socket learns of the ICMP port-unreachable from our own lo.
c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
c.settimeout(1)
c.connect(("127.0.0.1", udp))
c.send(b"LEAK from sandbox")
try:
    c.recv(100)
    print("udp REPLY")
except OSError as e:
    print("udp", errno.errorcode.get(e.errno, "TIMEOUT") if e.errno else "TIMEOUT")
# Broadcast to the loopback net stays in our namespace too.
b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
b.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
try:
    b.sendto(b"LEAK from sandbox", ("127.255.255.255", udp))
    print("udp broadcast sent")
except OSError as e:
    print("udp broadcast", errno.errorcode.get(e.errno, e))
