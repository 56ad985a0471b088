# A background job keeps stdout and stderr open after the script exits:
# the run must end with the script, not wait for the pipe to close.
( sleep 600; echo late; echo late >&2 ) &
( trap '' HUP TERM; while :; do sleep 1; done ) &
echo "main done"
exit 0
