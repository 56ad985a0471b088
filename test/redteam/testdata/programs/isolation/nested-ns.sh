# Nested namespaces from a shell: util-linux unshare fails for every kind.
try() {
  if out=$(unshare "$@" id -u 2>&1); then echo "unshare $* LEAK: $out"; else
    case "$out" in
      *"Operation not permitted"*) echo "unshare $* EPERM" ;;
      *) echo "unshare $* FAILED: $out" ;;
    esac
  fi
}
try -U
try -r
try -U -m
try -n
try -p -f
try -m
try -i
try -u
try -C
try --user --map-root-user --mount --net
if out=$(nsenter -t 1 -U true 2>&1); then echo "nsenter LEAK"; else echo "nsenter FAILED"; fi
echo "uid still $(id -u)"
