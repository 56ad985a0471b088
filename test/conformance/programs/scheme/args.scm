(import (chicken process-context))
(for-each (lambda (a) (display a) (newline)) (command-line-arguments))
