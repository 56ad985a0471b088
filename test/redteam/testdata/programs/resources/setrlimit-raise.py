# resource.setrlimit past the hard limits: refused (EPERM, which CPython
# reports as ValueError "not allowed to raise maximum limit").
import resource
for name in ("RLIMIT_NOFILE", "RLIMIT_FSIZE", "RLIMIT_CPU", "RLIMIT_STACK"):
    res = getattr(resource, name)
    soft, hard = resource.getrlimit(res)
    try:
        resource.setrlimit(res, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        print(name, "RAISED")
    except (ValueError, PermissionError) as e:
        print(name, "EPERM", e)
