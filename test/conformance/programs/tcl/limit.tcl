set x 0
while 1 { incr x }
