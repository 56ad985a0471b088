IFS= read -r content < data/input.txt || true
printf '%s\n' "$content"
