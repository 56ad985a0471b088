# Ignore every catchable signal, then sleep past the limit.
trap '' TERM INT HUP QUIT USR1 USR2 ALRM XCPU
echo trapped
sleep 600 &
wait
while :; do sleep 600; done
