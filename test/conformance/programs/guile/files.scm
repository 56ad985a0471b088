(use-modules (ice-9 textual-ports))
(define s (call-with-input-file "input.txt" get-string-all))
(call-with-output-file "output.txt" (lambda (p) (display (string-upcase s) p)))
