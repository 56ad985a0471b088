for a in "$@"; do
	printf "%s\n" "$a"
done
