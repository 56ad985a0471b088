# The denied syscalls from Python through ctypes (x86-64 numbers): each
# fails with EPERM. Arguments are harmless or invalid.
import ctypes, errno, os

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

calls = [
    ("bpf", 321, (0, None, 0)),
    ("perf_event_open", 298, (None, 0, -1, -1, 0)),
    ("userfaultfd", 323, (0,)),
    ("io_uring_setup", 425, (1, ctypes.create_string_buffer(120))),
    ("keyctl", 250, (0, -3, 0)),
    ("ptrace_TRACEME", 101, (0, 0, 0, 0)),
    ("ptrace_ATTACH_1", 101, (16, 1, 0, 0)),
    ("unshare_NEWUSER", 272, (0x10000000,)),
    ("mount", 165, (b"tmpfs", b"/tmp", b"tmpfs", 0, None)),
    ("chroot", 161, (b"/tmp",)),
    ("setns", 308, (-1, 0)),
    ("init_module", 175, (None, 0, b"")),
    ("kexec_load", 246, (0, 0, None, 0)),
    ("open_by_handle_at", 304, (-1, None, 0)),
    ("syslog", 103, (10, None, 0)),
]
for name, nr, args in calls:
    r = libc.syscall(ctypes.c_long(nr), *args)
    e = ctypes.get_errno()
    print(name, "SUCCEEDED" if r >= 0 else errno.errorcode.get(e, e))
# clone3: ENOSYS, not EPERM.
r = libc.syscall(ctypes.c_long(435), None, 0)
print("clone3", errno.errorcode.get(ctypes.get_errno()) if r < 0 else "SUCCEEDED")
# Ordinary Python still works: threads, subprocesses.
import threading, subprocess
t = threading.Thread(target=lambda: None); t.start(); t.join()
print("thread OK")
print("subprocess", subprocess.run(["/usr/bin/true"]).returncode)
