#lang racket/base
(require racket/file)
(display-to-file (string-upcase (file->string "input.txt")) "output.txt" #:exists 'replace)
