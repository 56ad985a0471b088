# Create empty files until the tmpfs runs out of inodes.
mkdir -p /work/inodes || exit 2
i=0
while : > "/work/inodes/f$i" 2>/dev/null; do
  i=$((i + 1))
  if [ "$i" -gt 100000 ]; then echo "never refused"; exit 0; fi
done
echo "ENOSPC after $i files"
exit 1
