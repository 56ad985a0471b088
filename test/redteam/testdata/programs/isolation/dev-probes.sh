# /dev holds only the harmless devices and the fd links; no disk, memory,
# kvm, tty or network device exists, and /sys is absent.
echo "DEV $(ls /dev | tr '\n' ' ')"
for d in mem kmem port kvm sda vda nvme0 nvme0n1 tty tty0 console ptmx pts net/tun vsock vhost-vsock fuse loop0 loop-control cpu/0/msr mapper/control dri hwrng rtc0 watchdog userfaultfd; do
  if [ -e "/dev/$d" ]; then echo "/dev/$d PRESENT"; else echo "/dev/$d NOTFOUND"; fi
done
for d in /sys /sys/firmware /sys/kernel /sys/fs/cgroup; do
  if [ -e "$d" ]; then echo "$d PRESENT"; else echo "$d NOTFOUND"; fi
done
# The harmless ones work.
head -c 8 /dev/urandom | wc -c | sed 's/^/urandom read /'
echo x > /dev/null && echo "null write OK"
if echo x > /dev/full 2>/dev/null; then echo "full LEAK"; else echo "full ENOSPC"; fi
# The /dev tmpfs is the read-only root's child: no new nodes.
if touch /dev/newnode 2>/dev/null; then echo "dev create LEAK"; else echo "dev create DENIED"; fi
