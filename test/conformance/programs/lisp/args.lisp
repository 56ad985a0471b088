(dolist (a (rest sb-ext:*posix-argv*)) (write-line a))
