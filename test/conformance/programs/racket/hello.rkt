#lang racket/base
(display "Hello, World!\n")
