# Double fork + setsid + nohup, every signal ignored, stdio detached: a
# daemon that tries to outlive the run. The script itself exits 0.
( trap '' HUP TERM INT; setsid nohup sh -c 'trap "" HUP TERM INT; while :; do sleep 1; done' </dev/null >/dev/null 2>&1 & ) &
( setsid sleep 600 </dev/null >/dev/null 2>&1 & )
sleep 0.2
echo "daemons started"
exit 0
