# kill -9 -1 from a shell, with a few background jobs around.
for i in 1 2 3; do sleep 600 & done
sleep 0.05
kill -9 -1
echo "kill -1 status $?"
wait
echo "shell alive"
