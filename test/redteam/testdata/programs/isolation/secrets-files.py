# Host secrets: none of the host's private files may be visible. Each probe
# prints "<path> NOTFOUND" (absent) or "<path> DENIED <errno>" (present but
# unreadable); "<path> LEAK" means the sandbox failed.
import errno, os

def probe(path):
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            names = os.listdir(path)
            print(path, "LEAK dir", names[:20])
            return
        with open(path, "rb") as f:
            data = f.read(4096)
        print(path, "LEAK", data[:200])
    except FileNotFoundError:
        print(path, "NOTFOUND")
    except OSError as e:
        print(path, "DENIED", errno.errorcode.get(e.errno, e.errno))

for p in ["/root", "/root/.ssh", "/root/.ssh/id_rsa", "/root/.ssh/authorized_keys",
          "/root/.bash_history", "/root/.cache", "/etc/shadow", "/etc/gshadow",
          "/etc/sudoers", "/etc/ssh", "/etc/ssh/ssh_host_ed25519_key", "/home",
          "/var", "/var/lib/sandbox-run", "/var/log", "/run", "/boot", "/sys",
          "/etc/hostname", "/etc/resolv.conf", "/etc/machine-id", "/proc/1/environ",
          "/proc/1/cmdline", "/proc/1/root/etc/shadow", "/proc/1/cwd"]:
    probe(p)

# The only user database is the sandbox's own three-line one.
with open("/etc/passwd") as f:
    users = [line.split(":")[0] for line in f]
print("PASSWD", ",".join(users))
print("ETC", ",".join(sorted(os.listdir("/etc"))))
print("ROOTDIR", ",".join(sorted(os.listdir("/"))))
