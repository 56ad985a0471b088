# Writing into the Python toolchain: the stdlib and site-packages are
# read-only; a module planted there would run in every later Python run.
import errno, glob, os, sys, sysconfig

def create(path):
    try:
        with open(path, "w") as f:
            f.write("print('pwned')\n")
        print(path, "LEAK created")
    except OSError as e:
        print(path, errno.errorcode.get(e.errno, e.errno))

stdlib = sysconfig.get_paths()["stdlib"]
print("STDLIB", stdlib)
create(os.path.join(stdlib, "zz_evil.py"))
# Debian's sitecustomize.py is a link into /etc/python3.X, absent here.
try:
    with open(os.path.join(stdlib, "sitecustomize.py"), "w") as f:
        f.write("print('pwned')\n")
    print("sitecustomize LEAK")
except OSError as e:
    print("sitecustomize DENIED", errno.errorcode.get(e.errno, e.errno))
create(os.path.join(stdlib, "os.py.new"))
for d in sorted(glob.glob("/usr/lib/python3*")):
    create(os.path.join(d, "usercustomize.py"))
for d in sorted(set(glob.glob("/usr/lib/python3/dist-packages") + glob.glob("/usr/local/lib/python3*/dist-packages"))):
    create(os.path.join(d, "evil.pth"))
create(os.path.realpath(sys.executable) + ".evil")
try:
    os.chmod(os.path.realpath(sys.executable), 0o777)
    print("chmod python LEAK")
except OSError as e:
    print("chmod python", errno.errorcode.get(e.errno, e.errno))
try:
    with open(os.path.join(stdlib, "os.py"), "a") as f:
        f.write("# pwned\n")
    print("append os.py LEAK")
except OSError as e:
    print("append os.py DENIED", errno.errorcode.get(e.errno, e.errno))
try:
    os.utime(os.path.join(stdlib, "os.py"), (0, 0))
    print("utime os.py LEAK")
except OSError as e:
    print("utime os.py DENIED", errno.errorcode.get(e.errno, e.errno))
