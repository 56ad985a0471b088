for arg in "$@"; do
  printf '%s\n' "$arg"
done
