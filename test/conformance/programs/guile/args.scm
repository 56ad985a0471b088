(for-each (lambda (a) (display a) (newline)) (cdr (command-line)))
