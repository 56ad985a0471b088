(import (chicken io))
(define s (call-with-input-file "input.txt" (lambda (p) (read-string #f p))))
(call-with-output-file "output.txt"
  (lambda (p) (write-string (list->string (map char-upcase (string->list s))) #f p)))
