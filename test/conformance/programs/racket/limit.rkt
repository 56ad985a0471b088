#lang racket/base
(let loop ([l '()]) (loop (cons (make-bytes 1048576 1) l)))
