#lang racket/base
(for ([a (current-command-line-arguments)]) (display a) (newline))
