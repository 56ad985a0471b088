# Writing into the toolchains and the root: every write fails with EROFS
# (printed as "<path> EROFS"), every existing binary stays as it was.
try_create() {
  if out=$( { : > "$1"; } 2>&1 ); then echo "$1 LEAK created"; rm -f "$1"; return; fi
  case "$out" in
    *"Read-only file system"*) echo "$1 EROFS" ;;
    *) echo "$1 DENIED $out" ;;
  esac
}
for p in /usr/bin/evil /bin/evil /usr/lib/evil /lib/evil /usr/local/bin/evil /usr/local/go/bin/evil /evil /etc/evil /etc/passwd.new /usr/lib/x86_64-linux-gnu/evil.so; do
  try_create "$p"
done
if mkdir /usr/evil 2>/dev/null; then echo "mkdir LEAK"; else echo "mkdir /usr/evil DENIED"; fi
if out=$(chmod 777 /usr/bin/bash 2>&1); then echo "chmod LEAK"; else case "$out" in *"Read-only"*) echo "chmod /usr/bin/bash EROFS";; *) echo "chmod DENIED $out";; esac; fi
if out=$(ln -s /tmp/x /usr/bin/evil-link 2>&1); then echo "symlink LEAK"; else case "$out" in *"Read-only"*) echo "symlink /usr/bin EROFS";; *) echo "symlink DENIED $out";; esac; fi
if out=$(mv /usr/bin/env /usr/bin/env.bak 2>&1); then echo "rename LEAK"; else case "$out" in *"Read-only"*|*"Permission denied"*) echo "rename /usr/bin/env DENIED";; *) echo "rename DENIED $out";; esac; fi
if echo pwned >> /etc/passwd 2>/dev/null; then echo "append /etc/passwd LEAK"; else echo "append /etc/passwd DENIED"; fi
if echo 'echo pwned' >> /usr/bin/bashbug 2>/dev/null; then echo "append bashbug LEAK"; else echo "append /usr/bin/bashbug DENIED"; fi
grep -c pwned /etc/passwd | sed 's/^/pwned lines in passwd: /'
