BEGIN {
    RS = "\001"
    while ((getline s < "input.txt") > 0) printf "%s", toupper(s) > "output.txt"
}
