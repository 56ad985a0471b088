#lang racket/base
(display "héllo wörld ✓ 日本\n")
