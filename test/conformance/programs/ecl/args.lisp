;; ECL decodes the command line as Latin-1 (one character per byte): write
;; those bytes back unchanged.
(let ((out (ext:make-stream-from-fd 1 :output :element-type (quote (unsigned-byte 8)))))
  (dolist (a (cdr (member "main.lisp" (ext:command-args) :test (function string=))))
    (write-sequence (map (quote (vector (unsigned-byte 8))) (function char-code) a) out)
    (write-byte 10 out))
  (finish-output out))
