# Host secrets from a shell: every probe must fail.
# $1 is the name of a variable set in the server's environment.
for f in /etc/shadow /root/.ssh/id_rsa /root/.bash_history /var/lib/sandbox-run /home; do
  if cat "$f" >/dev/null 2>&1 || ls "$f" >/dev/null 2>&1; then echo "$f LEAK"; else echo "$f UNREADABLE"; fi
done
if ls /root >/dev/null 2>&1; then echo "/root LEAK"; else echo "/root NOTFOUND"; fi
if [ -n "${!1+x}" ]; then echo "ENV $1 LEAK"; else echo "ENV $1 ABSENT"; fi
echo "HOME=$HOME USER=$USER"
env
echo "ID $(id -u) $(id -g) $(id -G)"
echo "HOST $(hostname 2>/dev/null || cat /proc/sys/kernel/hostname)"
cat /proc/self/status | grep -E '^(Cap|NoNewPrivs|Seccomp)'
