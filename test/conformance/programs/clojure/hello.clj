(print "Hello, World!\n")
(flush)
