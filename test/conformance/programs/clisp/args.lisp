(dolist (a ext:*args*) (write-line a))
