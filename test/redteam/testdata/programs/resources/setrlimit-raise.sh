# ulimit -H past the hard limits.
for opt in n f t s; do
  if ulimit -H"$opt" unlimited 2>/dev/null; then echo "$opt RAISED"; else echo "$opt EPERM"; fi
done
ulimit -Hn
