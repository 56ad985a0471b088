# The mount family from a shell: mount, umount and chroot all fail.
mkdir -p /tmp/m
if out=$(mount -t tmpfs none /tmp/m 2>&1); then echo "mount LEAK"; else echo "mount tmpfs FAILED"; fi
if out=$(mount --bind /usr /tmp/m 2>&1); then echo "bind LEAK"; else echo "mount bind FAILED"; fi
if out=$(umount -l /proc/keys 2>&1); then echo "umount LEAK"; else echo "umount FAILED"; fi
if out=$(/usr/sbin/chroot /tmp /bin/true 2>&1); then echo "chroot LEAK"; else
  case "$out" in *"Operation not permitted"*) echo "chroot EPERM";; *) echo "chroot FAILED: $out";; esac
fi
# /proc/keys is still the masking /dev/null bind.
if [ "$(head -c 16 /proc/keys | wc -c)" != 0 ]; then echo "keys LEAK"; else echo "keys still EMPTY"; fi
grep -c . /proc/self/mountinfo | sed 's/^/mounts /'
