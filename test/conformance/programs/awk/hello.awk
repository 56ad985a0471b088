BEGIN { print "Hello, World!" }
