# A 3 MB single argument and 2 MB of arguments to an external command.
big=$(head -c 3000000 /dev/zero | tr '\0' a)
/bin/true "$big"
echo "one huge arg: status $?"
many=$(head -c 2200000 /dev/zero | tr '\0' a | fold -w 60000 | tr '\n' ' ')
/bin/true $many
echo "many args: status $?"
