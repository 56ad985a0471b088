set -e
echo "boom" >&2
false
