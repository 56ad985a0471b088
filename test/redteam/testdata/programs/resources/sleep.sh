# Sleep far past the wall-clock limit.
echo sleeping
sleep 600
