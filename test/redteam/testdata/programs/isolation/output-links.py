# Output-file attacks: outputs that are symlinks to host files, a hardlink
# to a host file, a FIFO and a socket named like outputs, a directory that
# is a symlink to /. The host must return none of the targets' content.
import errno, os, socket

os.chdir("/work")
def attempt(what, fn):
    try:
        fn()
        print(what, "OK")
    except OSError as e:
        print(what, errno.errorcode.get(e.errno, e))

attempt("symlink out.txt", lambda: os.symlink("/etc/passwd", "out.txt"))
attempt("symlink shadow.txt", lambda: os.symlink("/proc/1/root/etc/shadow", "shadow.txt"))
attempt("symlink rel.txt", lambda: os.symlink("../../../../../../etc/passwd", "rel.txt"))
attempt("symlink selfroot.txt", lambda: os.symlink("/proc/self/root/etc/passwd", "selfroot.txt"))
attempt("symlink rootlink", lambda: os.symlink("/", "rootlink"))
attempt("symlink etclink", lambda: os.symlink("/etc", "etclink"))
os.mkdir("d")
attempt("symlink d/x.txt", lambda: os.symlink("/etc/passwd", "d/x.txt"))
# Hardlinks to files outside /work cross a mount: EXDEV.
attempt("hardlink passwd", lambda: os.link("/etc/passwd", "hard.txt"))
attempt("hardlink python", lambda: os.link(os.path.realpath("/usr/bin/python3"), "hard.bin"))
attempt("hardlink devnull", lambda: os.link("/dev/null", "null.txt"))
# A hardlink inside /work to a file we then replace is still our own data.
with open("ok.txt", "w") as f:
    f.write("fine\n")
attempt("hardlink ok2.txt", lambda: os.link("ok.txt", "ok2.txt"))
attempt("fifo result.txt", lambda: os.mkfifo("result.txt"))
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
attempt("socket sock.txt", lambda: s.bind("sock.txt"))
print("LISTING", " ".join(sorted(os.listdir("."))))
