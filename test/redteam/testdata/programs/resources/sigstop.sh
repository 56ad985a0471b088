# A stopped background job and a stopped shell.
sleep 600 &
kill -STOP $!
echo stopping
kill -STOP $$
echo continued
