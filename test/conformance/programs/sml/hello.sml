val _ = print "Hello, World!\n";
